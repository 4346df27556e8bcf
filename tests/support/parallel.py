"""Running the suite on several pytest-xdist workers (`make test` does, see scripts/test.sh).

- Each test module is one unit of work (`--dist loadgroup`, one xdist group per module), so a
  module's fixtures (a three-broker fleet, an operator) are built once, on one worker.
- Every test that needs the real node (marker `kube_node`) is in one group: the node (kubelet,
  containerd, its fixed ports) exists once per machine.
- Modules start longest first (tests/budget.toml, the expected seconds per module that the time
  budget holds them to), so the long fault tests do not start last and set the run's length alone.
- Each run writes what its modules took to tests/.work/module-durations.json and holds them against
  the budget (tests/support/budget.py): in CI a module over it, or without an entry, fails the run.
Ports are kept apart per worker by flotilla/testenv/ports.py.
"""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path

import pytest

from tests.support import budget, ci_skips

#: A module missing from the file (new since it was written) is assumed this long: new modules are
#: e2e modules more often than not, and starting them early costs little.
UNKNOWN_MODULE_SECONDS = 60.0
REAL_NODE_GROUP = "real-node"


def module_of(nodeid: str) -> str:
    return nodeid.split("::", 1)[0]


def _target(config: pytest.Config) -> str:
    return config.getoption("--kafka-target", default="flotilla")


def for_target(path: Path, config: pytest.Config) -> Path:
    """The Kafka-reference run (--kafka-target=apache) keeps its own times: Kafka starts slower."""
    target = _target(config)
    return path if target == "flotilla" else path.with_name(f"{path.stem}-{target}{path.suffix}")


def expected_seconds(config: pytest.Config) -> dict[str, float]:
    """The budget's seconds; none for the Kafka-reference run, whose times the budget does not hold."""
    return budget.load().modules if _target(config) == "flotilla" else {}


def group_of(item: pytest.Item) -> str:
    if item.get_closest_marker("kube_node"):
        return REAL_NODE_GROUP
    return module_of(item.nodeid)


def longest_first(items: list[pytest.Item], seconds: dict[str, float]) -> list[pytest.Item]:
    """Items with their groups ordered by expected length (longest first), each group's items in
    their collected order."""
    totals: dict[str, float] = defaultdict(float)
    modules_seen: dict[str, set[str]] = defaultdict(set)
    for item in items:
        group, module = group_of(item), module_of(item.nodeid)
        if module not in modules_seen[group]:
            modules_seen[group].add(module)
            totals[group] += seconds.get(module, UNKNOWN_MODULE_SECONDS)
    first_seen = {}
    for i, item in enumerate(items):
        first_seen.setdefault(group_of(item), i)
    return sorted(items, key=lambda it: (-totals[group_of(it)], first_seen[group_of(it)]))


def _distributed(config: pytest.Config) -> bool:
    """True on an xdist worker (only workers collect; the order must be the same on each)."""
    return hasattr(config, "workerinput")


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if not _distributed(config):
        return
    items[:] = longest_first(items, expected_seconds(config))
    for item in items:
        item.add_marker(pytest.mark.xdist_group(group_of(item)))


@pytest.hookimpl(trylast=True)
def pytest_collection_finish(session: pytest.Session) -> None:
    """Fail loudly if xdist did not take the groups (it rewrites node ids, which pytest 9 changed):
    without them a module's tests spread over workers, each building its fixtures, and two workers
    start the real node at once."""
    config = session.config
    if _distributed(config) and config.getvalue("loadgroup"):
        ungrouped = [i.nodeid for i in session.items if "@" not in i.nodeid]
        if ungrouped:
            raise pytest.UsageError(f"pytest-xdist ignored the module groups (e.g. {ungrouped[0]}); "
                                    "check the pytest and pytest-xdist versions (pyproject.toml)")


_spent: dict[str, float] = defaultdict(float)


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    _spent[module_of(report.nodeid)] += report.duration


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    config = session.config
    if _distributed(config) or not _spent:
        return  # the controller (or a run without xdist) writes the file
    spent = {k: round(v, 1) for k, v in sorted(_spent.items())}
    measured = for_target(budget.MEASURED, config)
    measured.parent.mkdir(parents=True, exist_ok=True)
    measured.write_text(json.dumps(spent, indent=1) + "\n")
    if _target(config) != "flotilla":
        return
    config._flotilla_overruns = overruns = budget.overruns(spent, budget.load())
    if overruns and ci_skips.in_ci() and session.exitstatus == pytest.ExitCode.OK:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


def pytest_terminal_summary(terminalreporter, exitstatus: int, config: pytest.Config) -> None:
    overruns = getattr(config, "_flotilla_overruns", None)
    if overruns:
        fails = ci_skips.in_ci()
        terminalreporter.section("time budget (tests/budget.toml)" + ("" if fails else ": not enforced outside CI"),
                                 sep="=", red=fails, yellow=not fails, bold=True)
        for line in overruns:
            terminalreporter.line(line, red=fails, yellow=not fails)
