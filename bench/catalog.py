"""Every workload `python -m bench` knows: those defined in bench/workloads.py and the ones in
modules of their own, which register themselves on import. Importing them here, above all of them,
keeps the imports one way (a case module imports workloads; workloads imports no case)."""

from bench import catchup, fetch_sessions, quotas, transactions  # noqa: F401  (they register themselves)
from bench.workloads import REGISTRY

__all__ = ["REGISTRY"]
