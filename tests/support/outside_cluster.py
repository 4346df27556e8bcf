"""A KafkaCluster standing for brokers that run as processes on this host, not in pods: the way
the operator's e2e tests reach real brokers while the operator itself runs outside the Kubernetes
cluster (the README's first path).

It is paused (flotilla.io/pause-reconciliation), so the operator creates no StatefulSet or pods
for it, and annotated with flotilla.io/operator-bootstrap-servers, the per-cluster address the
operator's admin clients (ClientQuota, RecordDeletion) use instead of the bootstrap Service's DNS
name, which does not resolve outside the cluster. So the tests go through the same
KafkaCluster-to-bootstrap lookup as a real deployment does.
"""

from __future__ import annotations

from typing import Any

from flotilla_operator.admin_address import OPERATOR_BOOTSTRAP
from flotilla_operator.annotations import PAUSE_RECONCILIATION


def stand_in_cluster(name: str, namespace: str, bootstrap: str) -> dict[str, Any]:
    return {"apiVersion": "flotilla.io/v1alpha1", "kind": "KafkaCluster",
            "metadata": {"name": name, "namespace": namespace,
                         "annotations": {PAUSE_RECONCILIATION: "true", OPERATOR_BOOTSTRAP: bootstrap}},
            "spec": {"replicas": 1}}
