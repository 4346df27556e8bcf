"""pytest plugin for the end-to-end suites: broker fixtures and the --kafka-target option.

Register it with `pytest_plugins = ["tests.support.pytest_plugin"]` in tests/conftest.py, or
pass `-p tests.support.pytest_plugin`.

Fixtures:
  broker          a fresh broker for one test (function scope); `@pytest.mark.broker_config(k=v)`
                  adds settings (Kafka key names, dots written as `__` or passed via a dict).
  shared_broker   one broker for a whole test module (default settings); tests use unique topics.
  broker_factory  start extra brokers with chosen settings: `broker_factory({"message.max.bytes": "1000"})`.
  kafka_target    "flotilla" (default) or "apache".

`--kafka-target=apache` (or FLOTILLA_KAFKA_TARGET=apache) runs the same tests against Apache
Kafka (flotilla/testenv/brokers/apache_kafka.py), to check that the tests themselves are right.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Callable, Iterator

import pytest

from tests.support import ci_skips
from flotilla.testenv.brokers.broker_process import FlotillaBroker, ServerProcess

TARGETS = ("flotilla", "apache")


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("flotilla")
    group.addoption(
        "--kafka-target",
        choices=TARGETS,
        default=os.environ.get("FLOTILLA_KAFKA_TARGET", "flotilla"),
        help="which broker the e2e tests start: flotilla (default) or apache (Apache Kafka from Maven jars)",
    )


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "broker_config(settings=None, **kw): extra broker settings for the `broker` fixture"
    )
    config.addinivalue_line("markers", "flotilla_only(reason): test checks Flotilla-specific behaviour")


def _marker_settings(node: pytest.Item) -> dict[str, str]:
    settings: dict[str, str] = {}
    for mark in reversed(list(node.iter_markers("broker_config"))):
        if mark.args:
            settings.update({k: str(v) for k, v in mark.args[0].items()})
        settings.update({k.replace("__", "."): str(v) for k, v in mark.kwargs.items()})
    return settings


def make_broker(target: str, workdir: Path, overrides: dict[str, str] | None = None, **kw: Any) -> ServerProcess:
    """An unstarted broker of the chosen kind."""
    overrides = dict(overrides or {})
    if target == "apache":
        from flotilla.testenv.brokers.apache_kafka import ApacheKafka

        overrides = {k: v for k, v in overrides.items() if not k.startswith("flotilla.")}
        return ApacheKafka(workdir, overrides=overrides, **kw)
    return FlotillaBroker(workdir, overrides=overrides, **kw)


@pytest.fixture(scope="session")
def kafka_target(pytestconfig: pytest.Config) -> str:
    return pytestconfig.getoption("--kafka-target")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if config.getoption("--kafka-target") == "flotilla":
        return
    for item in items:
        mark = item.get_closest_marker("flotilla_only")
        if mark:
            item.add_marker(pytest.mark.skip(reason=f"Flotilla-only: {mark.args[0] if mark.args else ''}"))


class BrokerFactory:
    def __init__(self, target: str, base: Path):
        self.target = target
        self.base = base
        self.started: list[ServerProcess] = []

    def __call__(self, overrides: dict[str, str] | None = None, *, start: bool = True, **kw: Any) -> ServerProcess:
        workdir = self.base / f"broker{len(self.started)}"
        b = make_broker(self.target, workdir, overrides, **kw)
        self.started.append(b)
        if start:
            b.start()
        return b

    def close(self) -> None:
        for b in self.started:
            b.close()


@pytest.fixture
def broker_factory(kafka_target: str, tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[BrokerFactory]:
    factory = BrokerFactory(kafka_target, tmp_path)
    request.node._flotilla_brokers = factory.started  # for the failure report below
    try:
        yield factory
    finally:
        factory.close()


@pytest.fixture
def broker(broker_factory: BrokerFactory, request: pytest.FixtureRequest) -> ServerProcess:
    return broker_factory(_marker_settings(request.node))


@pytest.fixture(scope="module")
def shared_broker(kafka_target: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    b = make_broker(kafka_target, tmp_path_factory.mktemp("shared-broker"))
    b.start()
    try:
        yield b
    finally:
        b.close()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[None]:
    outcome = yield
    report = outcome.get_result()
    if report.when != "call" or not report.failed:
        return
    brokers: list[ServerProcess] = list(getattr(item, "_flotilla_brokers", []))
    # Any broker a fixture handed the test, alone or as a cluster's `brokers` (BrokerCluster).
    for value in getattr(item, "funcargs", {}).values():
        for b in [value, *getattr(value, "brokers", [])]:
            if hasattr(b, "log_tail") and hasattr(b, "log_path") and b not in brokers:
                brokers.append(b)
    for b in brokers:
        report.sections.append((f"{b.kind} broker log tail ({b.log_path})", b.log_tail(40)))


BrokerStarter = Callable[..., ServerProcess]


# -- CI: no unexpected skips (tests/support/ci_skips.py, tests/ci_allowed_skips.toml) ---------------

_skips = ci_skips.SkipLedger()


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    _skips.record(report)


def pytest_collectreport(report: pytest.CollectReport) -> None:
    _skips.record(report)  # a module or class skipped as a whole


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    if not ci_skips.in_ci():
        return
    unexpected = _skips.unexpected(ci_skips.load())
    session.config._flotilla_unexpected_skips = unexpected  # for the summary below
    if unexpected and session.exitstatus in (pytest.ExitCode.OK, pytest.ExitCode.NO_TESTS_COLLECTED):
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


def pytest_terminal_summary(terminalreporter, exitstatus: int, config: pytest.Config) -> None:
    unexpected = getattr(config, "_flotilla_unexpected_skips", None)
    if unexpected:
        terminalreporter.section("unexpected skips", sep="=", red=True, bold=True)
        terminalreporter.line(ci_skips.message(unexpected), red=True)
