"""What the operator checks and fixes once, at start-up (handlers.py `startup`):

- the Kubernetes it runs on (kube_version.py decides): logged, with what is off below 1.30;
- one release's migration of KafkaTopic labels (builders/topic_labels.py decides): KafkaTopics
  that named their cluster by app.kubernetes.io/instance alone are labelled flotilla.io/cluster,
  each logged; any other KafkaTopic without the label gets a status condition saying it is missing
  (`topic_without_cluster`, also called for each KafkaTopic event), or, when brokers serve it
  through the old label anyway, a warning (once per topic and operator run).

Neither stops the operator: a failure is logged and the operator starts all the same.
"""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any, Iterable

from ..api.kafka_cluster import KAFKA_CLUSTER
from ..builders import topic_labels as tl
from ..clients.kube import ApiError, Kube
from ..kube_version import Verdict, verdict
from .common import log

TOPIC = "KafkaTopic"


async def check_kube_version(kube: Kube) -> Verdict:
    """Read /version and log the verdict: info when supported, a warning per line otherwise."""
    try:
        found = verdict(await kube.version())
    except ApiError as err:
        found = verdict({"gitVersion": f"(unreadable: {err.reason})"})
    if found.supported:
        log.info("%s", found.message)
    else:
        for line in found.lines:
            log.warning("%s", line)
    return found


async def _each_namespace(kube: Kube, kind: str, namespaces: Iterable[str]) -> list[dict[str, Any]]:
    namespaces = list(namespaces)
    if not namespaces:
        return await kube.list(kind)
    found: list[dict[str, Any]] = []
    for namespace in namespaces:
        found += await kube.list(kind, namespace)
    return found


async def migrate_topic_labels(kube: Kube, namespaces: Iterable[str]) -> list[tl.Relabel]:
    """Label the KafkaTopics that relied on app.kubernetes.io/instance (every namespace watched:
    `namespaces`, or all when empty), then mark those still without a cluster. Returns what was
    labelled."""
    namespaces = list(namespaces)
    try:
        topics = await _each_namespace(kube, TOPIC, namespaces)
        clusters = await _each_namespace(kube, KAFKA_CLUSTER.kind, namespaces)
    except ApiError as err:
        log.warning("KafkaTopic label migration: listing KafkaTopics and KafkaClusters failed: %s", err.reason)
        return []
    done = []
    for change in tl.migration_plan(topics, clusters):
        try:
            await kube.patch(TOPIC, change.namespace, change.name, tl.label_patch(change.cluster))
        except ApiError as err:
            log.warning("KafkaTopic %s/%s: labelling it %s=%s failed: %s", change.namespace, change.name,
                        tl.CLUSTER_LABEL, change.cluster, err.reason)
            continue
        log.warning("KafkaTopic %s/%s named its cluster by %s alone: labelled %s=%s (add the label to its "
                    "manifest: the old label is no longer read)", change.namespace, change.name,
                    tl.LEGACY_CLUSTER_LABEL, tl.CLUSTER_LABEL, change.cluster)
        done.append(change)
    labelled = {(c.namespace, c.name) for c in done}
    warned: set[tuple[str, str]] = set()
    for topic in topics:
        meta = topic.get("metadata") or {}
        if (meta.get("namespace"), meta.get("name")) not in labelled:
            await topic_without_cluster(kube, topic, warned)
    return done


async def topic_without_cluster(kube: Kube, topic: dict[str, Any], warned: set[tuple[str, str]]) -> None:
    """A KafkaTopic without flotilla.io/cluster: the ClusterLabelMissing condition, or, when brokers
    serve it through the old label (their status), a warning the first time (`warned` remembers)."""
    if not tl.needs_label(topic):
        return
    meta = topic.get("metadata") or {}
    served_by = tl.served_without_label(topic)
    if served_by is None:
        await mark_unlabelled(kube, topic)
        return
    key = (meta.get("namespace", ""), meta.get("name", ""))
    if key not in warned:
        warned.add(key)
        log.warning("KafkaTopic %s/%s has no %s label; the brokers of cluster %s serve it through %s=%s, "
                    "which the next release no longer reads: label it %s=%s", key[0], key[1], tl.CLUSTER_LABEL,
                    served_by, tl.LEGACY_CLUSTER_LABEL, served_by, tl.CLUSTER_LABEL, served_by)


async def mark_unlabelled(kube: Kube, topic: dict[str, Any]) -> bool:
    """Write the ClusterLabelMissing condition on a KafkaTopic without flotilla.io/cluster (once per
    message); True when written."""
    patch = tl.missing_label_status(topic, datetime.now(timezone.utc))
    if patch is None:
        return False
    meta = topic.get("metadata") or {}
    try:
        written = await kube.patch_status(TOPIC, meta.get("namespace", ""), meta.get("name", ""), patch)
    except ApiError as err:
        log.warning("KafkaTopic %s/%s: writing %s failed: %s", meta.get("namespace"), meta.get("name"),
                    tl.MISSING_REASON, err.reason)
        return False
    if written is not None:
        log.warning("KafkaTopic %s/%s: %s", meta.get("namespace"), meta.get("name"), tl.missing_label_message(topic))
    return written is not None
