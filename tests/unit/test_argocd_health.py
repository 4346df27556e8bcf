"""monitoring/argocd/flotilla-health.lua, the Argo CD health check docs/operations.md tells users
to install, run by a real Lua interpreter (lupa) the way Argo CD runs it (a global `obj`, a table
returned) on statuses shaped as the operator writes them (status.py, events of every kind)."""

from __future__ import annotations

from datetime import datetime, timezone
from pathlib import Path

import lupa

from flotilla_operator.builders.common import Owner
from flotilla_operator.status import condition, kafka_cluster_status, paused_status

SCRIPT = (Path(__file__).resolve().parents[2] / "monitoring" / "argocd" / "flotilla-health.lua").read_text()
NOW = datetime(2026, 11, 26, 2, 0, tzinfo=timezone.utc)


def health(obj: dict) -> tuple[str, str]:
    lua = lupa.LuaRuntime(unpack_returned_tuples=True)

    def table(value):
        if isinstance(value, dict):
            return lua.table_from({k: table(v) for k, v in value.items()})
        if isinstance(value, list):
            return lua.table_from([table(v) for v in value])
        return value

    lua.globals().obj = table(obj)
    result = lua.execute(SCRIPT)
    return result["status"], result["message"]


def kafkacluster(status: dict | None, generation: int = 2) -> dict:
    obj = {"apiVersion": "flotilla.io/v1alpha1", "kind": "KafkaCluster",
           "metadata": {"name": "demo", "namespace": "kafka", "generation": generation}}
    if status is not None:
        obj["status"] = status
    return obj


OWNER = Owner(name="demo", namespace="kafka", uid="u", generation=2)
READY_STS = {"metadata": {"generation": 1}, "spec": {"template": {"metadata": {"annotations": {}}}},
             "status": {"observedGeneration": 1, "replicas": 3, "readyReplicas": 3, "updatedReplicas": 3,
                        "currentRevision": "r1", "updateRevision": "r1"}}


def cluster_status(**kw) -> dict:
    return kafka_cluster_status(OWNER, replicas=3, port=9092, config_hash=None, statefulset=READY_STS, now=NOW, **kw)


def test_kafkacluster_states():
    assert health(kafkacluster(None)) == ("Progressing", "waiting for the operator's first status")
    assert health(kafkacluster(cluster_status()))[0] == "Healthy"
    assert health(kafkacluster(cluster_status(), generation=3))[0] == "Progressing"  # a newer spec, not seen yet
    stalled = health(kafkacluster(cluster_status(error="spec.config: log.retention.hour", error_reason="InvalidConfig")))
    assert stalled == ("Degraded", "InvalidConfig: spec.config: log.retention.hour")
    failing = health(kafkacluster(cluster_status(error="applying Service x: forbidden", error_reason="ApplyFailed")))
    assert failing[0] == "Degraded" and "ApplyFailed" in failing[1]
    creating = kafka_cluster_status(OWNER, replicas=3, port=9092, config_hash=None, statefulset=None, now=NOW)
    assert health(kafkacluster(creating)) == ("Progressing", "Creating: creating the broker StatefulSet")
    assert health(kafkacluster(paused_status(cluster_status(), generation=2, now=NOW)))[0] == "Suspended"


def test_clientquota_and_recorddeletion_states():
    def obj(kind, ready, reason, stalled=False):
        conds = [condition("Ready", ready, reason, "m", generation=1, now=NOW),
                 condition("Stalled", stalled, reason if stalled else "AsExpected", "m", generation=1, now=NOW)]
        return {"kind": kind, "metadata": {"name": "x", "generation": 1},
                "status": {"observedGeneration": 1, "conditions": conds}}
    assert health(obj("ClientQuota", True, "Applied"))[0] == "Healthy"
    assert health(obj("ClientQuota", False, "Pending"))[0] == "Progressing"
    assert health(obj("ClientQuota", False, "Conflict", stalled=True))[0] == "Degraded"
    assert health(obj("RecordDeletion", True, "Deleted"))[0] == "Healthy"
    assert health(obj("RecordDeletion", False, "GroupNotFound"))[0] == "Progressing"
    assert health(obj("RecordDeletion", False, "InvalidSpec", stalled=True))[0] == "Degraded"
