"""What runs and observes the brokers and turns measurements into ratios, shared by every workload
and command: the two targets and their /proc observation (`targets`), the rounds of the one-broker
comparison (`runner`), fleets of three (`fleets`), the machine a run was measured on (`machine`),
latency samples (`samples`) and the JSON/markdown/chart reports (`report`)."""
