"""A started fleet of the target a test runs against (`--kafka-target`), so that the same fleet test
checks itself against Kafka with `--kafka-target=apache`: Flotilla's BrokerCluster asks pytest for
the kube_env and kube_namespace fixtures, so the API server starts only for that target. The
clusters themselves live in flotilla/testenv/brokers/ (the benchmarks start them too).

    with fleet_cluster(kafka_target, tmp_path, request, overrides={...}) as cluster: ...
"""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Iterator

import pytest

from flotilla.testenv.brokers.fleet import Fleet


@contextlib.contextmanager
def fleet_cluster(target: str, workdir: Path, request: pytest.FixtureRequest, size: int = 3,
                  overrides: dict[str, str] | None = None,
                  apache_overrides: dict[str, str] | None = None,
                  node_overrides: dict[int, dict[str, str]] | None = None) -> Iterator[Fleet]:
    """A started cluster of `size` brokers of the chosen target. Keys starting `flotilla.` go to
    Flotilla only; `apache_overrides` (Kafka's own names for what a Flotilla key does, such as
    broker.session.timeout.ms for the Lease duration) go to Kafka only. Flotilla's cluster asks
    for the kube_env and kube_namespace fixtures, so the API server starts only for that target.
    `node_overrides` (node id -> keys, Kafka's names: broker.rack) go to one broker each, either target."""
    if target == "apache":
        from flotilla.testenv.brokers.kraft_cluster import ApacheCluster

        settings = {k: v for k, v in (overrides or {}).items() if not k.startswith("flotilla.")}
        settings.update(apache_overrides or {})
        with ApacheCluster(workdir, size=size, overrides=settings, node_overrides=node_overrides) as c:
            yield c
        return
    from flotilla.testenv.brokers.cluster import BrokerCluster

    kube_env = request.getfixturevalue("kube_env")
    namespace = request.getfixturevalue("kube_namespace")
    with BrokerCluster(workdir, kube_env, namespace, size=size, overrides=overrides,
                       node_overrides=node_overrides) as c:
        yield c
