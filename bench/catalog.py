"""The catalogue of `python -m bench`: every workload of the one-broker comparison and every harness
of its own. Importing the workload modules here, above all of them, fills the registry and keeps
the imports one way (a workload module imports bench/workloads/base.py; base imports no workload).

COMMANDS are the harnesses of their own, on several brokers or with listeners of their own, that
`python -m bench <command>` runs instead of the one-broker rounds (each module in bench/commands/
has a `main(argv)`); they are imported only when run."""

# Imported for their registrations, in this order (the order of REGISTRY and of --list).
from bench.workloads import standard  # noqa: F401
from bench.workloads import catchup, fetch_sessions, quotas, transactions  # noqa: F401
from bench.workloads.base import REGISTRY

COMMANDS = {  # name -> (module, what it measures)
    "omb": ("bench.commands.omb", "three brokers each side, OMB-shaped load, transactions and failover "
            "(bench/commands/omb.py)"),
    "security": ("bench.commands.security", "SASL_SSL + ACLs against PLAINTEXT, one broker each side "
                 "(bench/commands/security.py)"),
    "drain": ("bench.commands.drain", "draining one of three brokers holding 2 GiB, without and with a replication "
              "throttle, and produce latency before and during the move (bench/commands/drain.py)"),
    "acks-all": ("bench.commands.acks_all", "acks=all with replication factor 3 on three brokers each side: "
                 "throughput, latency at a fixed rate, replication lag (bench/commands/acks_all.py)"),
    "cluster-metadata": ("bench.commands.cluster_metadata", "topic creation to use on every broker and Metadata "
                         "latency with many topics, three Flotilla brokers against one Kafka node "
                         "(bench/commands/cluster_metadata.py)"),
}

__all__ = ["COMMANDS", "REGISTRY"]
