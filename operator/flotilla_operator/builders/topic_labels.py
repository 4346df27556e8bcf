"""Which cluster a KafkaTopic belongs to: flotilla.io/cluster, and nothing else (issue 41). Pure.

Before this release a KafkaTopic without flotilla.io/cluster joined the cluster named by its
app.kubernetes.io/instance label, which Helm and Argo CD set on everything they install (to the
release or application name): a topic could silently join a cluster that happened to share that
name. The operator no longer reads that label. One release's migration keeps existing topics
where they are: at start-up (`migration_plan`) every KafkaTopic that relied on it (no
flotilla.io/cluster, app.kubernetes.io/instance naming a KafkaCluster of its namespace, and
already taken in by that cluster's brokers: status.topicId set) is labelled flotilla.io/cluster
with that name, and the operator logs each. Any other KafkaTopic without flotilla.io/cluster
belongs to no cluster: its status gets a Ready=False condition, reason ClusterLabelMissing,
saying which label to add (`missing_label_status`), rather than nothing at all. Unless brokers
serve it already (status.topicId: the status is theirs, and the brokers still read the old label
until the next release): writing over their status would start a tug of war, so the operator
only warns (`served_without_label`).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any, Iterable, Mapping

from .common import CLUSTER_LABEL, LEGACY_CLUSTER_LABEL

MISSING_REASON = "ClusterLabelMissing"


@dataclass(frozen=True)
class Relabel:
    namespace: str
    name: str
    cluster: str


def _meta(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    return obj.get("metadata") or {}


def _labels(obj: Mapping[str, Any]) -> Mapping[str, str]:
    return _meta(obj).get("labels") or {}


def needs_label(topic: Mapping[str, Any]) -> bool:
    return not _labels(topic).get(CLUSTER_LABEL) and not _meta(topic).get("deletionTimestamp")


def migration_plan(topics: Iterable[Mapping[str, Any]], clusters: Iterable[Mapping[str, Any]]) -> list[Relabel]:
    """The KafkaTopics to label flotilla.io/cluster: those that joined a cluster through
    app.kubernetes.io/instance alone (the cluster exists in the topic's namespace and its brokers
    wrote the topic's id)."""
    existing = {(_meta(c).get("namespace"), _meta(c).get("name")) for c in clusters}
    plan = []
    for topic in topics:
        legacy = _labels(topic).get(LEGACY_CLUSTER_LABEL)
        namespace = _meta(topic).get("namespace")
        if (needs_label(topic) and legacy and (namespace, legacy) in existing
                and (topic.get("status") or {}).get("topicId")):
            plan.append(Relabel(str(namespace), str(_meta(topic).get("name")), legacy))
    return sorted(plan, key=lambda r: (r.namespace, r.name))


def label_patch(cluster: str) -> dict[str, Any]:
    """The merge patch that names the topic's cluster."""
    return {"metadata": {"labels": {CLUSTER_LABEL: cluster}}}


def missing_label_message(topic: Mapping[str, Any]) -> str:
    legacy = _labels(topic).get(LEGACY_CLUSTER_LABEL)
    message = (f"no {CLUSTER_LABEL} label: this KafkaTopic belongs to no KafkaCluster and no broker serves it; "
               f"add the label {CLUSTER_LABEL}=<cluster name>")
    if legacy:
        message += (f" ({LEGACY_CLUSTER_LABEL}={legacy} no longer names a cluster: Helm and Argo CD set that label "
                    "to their release or application)")
    return message


def served_without_label(topic: Mapping[str, Any]) -> str | None:
    """The cluster whose brokers serve a KafkaTopic without flotilla.io/cluster through the old
    label (its status has the brokers' topic id), or None."""
    if not needs_label(topic) or not (topic.get("status") or {}).get("topicId"):
        return None
    return _labels(topic).get(LEGACY_CLUSTER_LABEL) or None


def missing_label_status(topic: Mapping[str, Any], now: datetime) -> dict[str, Any] | None:
    """The status patch for a KafkaTopic that names no cluster, or None when it has the label, its
    status already says so (the message unchanged), or brokers serve it (the status is theirs)."""
    if not needs_label(topic) or (topic.get("status") or {}).get("topicId"):
        return None
    message = missing_label_message(topic)
    generation = int(_meta(topic).get("generation") or 1)
    for c in (topic.get("status") or {}).get("conditions") or ():
        if (c.get("type") == "Ready" and c.get("reason") == MISSING_REASON and c.get("message") == message
                and c.get("observedGeneration") == generation):
            return None
    stamp = now.strftime("%Y-%m-%dT%H:%M:%SZ")
    return {"conditions": [{"type": "Ready", "status": "False", "reason": MISSING_REASON, "message": message,
                            "lastTransitionTime": stamp, "observedGeneration": generation}]}
