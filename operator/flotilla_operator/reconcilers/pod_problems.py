"""Reading a KafkaCluster's pod-level problems (builders/pod_problems.py decides them): its broker
pods and claims, and the previous log of a crash-looping container that left no termination
message; and the Events for problems that appeared since the last run.

Used by the `diagnose_pods` step of reconcilers/kafka_cluster.py and by its `refresh_status`, so
that every status written names the causes the brokers are not running.
"""

from __future__ import annotations

from datetime import datetime, timezone
import kopf

from .. import events as ev
from ..builders.common import Owner, selector_string
from ..builders.pod_problems import PodProblem, diagnose, needs_log_tail
from ..clients.kube import ApiError, Kube
from .common import log

#: memo key: (namespace, cluster) -> the keys of the problems the last run found.
SEEN = "pod_problems"


async def read_pod_problems(kube: Kube, owner: Owner) -> list[PodProblem]:
    """The cluster's pod problems now; none when the pods or claims cannot be read (a status is
    still written, without them)."""
    selector = selector_string(owner)
    try:
        pods = await kube.list("Pod", owner.namespace, label_selector=selector)
        claims = await kube.list("PersistentVolumeClaim", owner.namespace, label_selector=selector)
    except ApiError as err:
        log.warning("reading the pods and claims of %s/%s: %s", owner.namespace, owner.name, err.reason)
        return []
    tails: dict[str, str] = {}
    for pod in pods:
        container = needs_log_tail(pod)
        if container is None:
            continue
        name = pod["metadata"]["name"]
        try:
            tails[name] = await kube.pod_log_tail(owner.namespace, name, container)
        except Exception as exc:  # a courtesy (no right to pods/log, ...): reported without the line
            log.debug("reading the log of %s/%s: %s", owner.namespace, name, exc)
    return diagnose(pods, claims, now=datetime.now(timezone.utc), log_tails=tails)


def new_problem_events(memo: kopf.Memo, namespace: str, name: str, problems: list[PodProblem]) -> list[ev.Event]:
    """Warnings for the problems the last run of this cluster did not find; remembers these."""
    seen: dict[tuple[str, str], set[tuple[str, str]]] = memo.setdefault(SEEN, {})
    found = ev.pod_problem_events(seen.get((namespace, name)), problems)
    seen[(namespace, name)] = {p.key for p in problems}
    return found


def forget(memo: kopf.Memo, namespace: str, name: str) -> None:
    memo.get(SEEN, {}).pop((namespace, name), None)
