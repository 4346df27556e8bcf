"""Every workload `python -m bench` knows: those defined in bench/workloads.py and the ones in
modules of their own, which register themselves on import. Importing them here, above all of them,
keeps the imports one way (a case module imports workloads; workloads imports no case).

COMMANDS are the harnesses of their own, on several brokers or with listeners of their own, that
`python -m bench <command>` runs instead of the one-broker rounds (each module has a `main(argv)`);
they are imported only when run."""

from bench import catchup, fetch_sessions, quotas, transactions  # noqa: F401  (they register themselves)
from bench.workloads import REGISTRY

COMMANDS = {  # name -> (module, what it measures)
    "omb": ("bench.omb", "three brokers each side, OMB-shaped load, transactions and failover (bench/omb.py)"),
    "security": ("bench.security", "SASL_SSL + ACLs against PLAINTEXT, one broker each side (bench/security.py)"),
    "drain": ("bench.drain", "draining one of three brokers holding 2 GiB, without and with a replication "
              "throttle, and produce latency before and during the move (bench/drain.py)"),
}

__all__ = ["COMMANDS", "REGISTRY"]
