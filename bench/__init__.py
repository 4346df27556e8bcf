"""Flotilla's benchmark harness: the same workloads, the same clients, Flotilla and Apache Kafka in
alternation on one machine, reported as medians and Flotilla/Kafka ratios.

    python -m bench              # the full comparison (see bench/README.md)
    python -m bench --smoke      # seconds-long run that only checks the harness works
"""
