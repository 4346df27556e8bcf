"""Flotilla's benchmark harness: the same workloads, the same clients, Flotilla and Apache Kafka in
alternation on one machine, reported as medians and Flotilla/Kafka ratios.

    python -m bench              # the full comparison (see bench/README.md)
    python -m bench --smoke      # seconds-long run that only checks the harness works
    python -m bench --help       # and the harnesses of their own (bench/catalog.py)

- `harness/`: starting brokers and fleets of either kind, observing them, running rounds, reporting
- `workloads/`: the cases of the one-broker comparison, each registered by name
- `commands/`: the harnesses of their own (`python -m bench <command>`), with their plans and reports
- `clients/`: the load generators, each run as a child process so that it is timed on its own

The paths every part writes to are defined here once.
"""

from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
RESULTS = REPO_ROOT / "bench" / "results"  # committed results
WORK = REPO_ROOT / "bench" / ".work"  # data directories and smoke results, never committed
