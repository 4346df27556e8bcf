"""Where the operator's admin clients (ClientQuota, RecordDeletion) reach a KafkaCluster. Pure: it
reads the KafkaCluster object.

Each cluster is reached through its own address: the annotation
`flotilla.io/operator-bootstrap-servers` when set (host:port[,host:port...]: for an operator that
runs outside the Kubernetes cluster, where the bootstrap Service's DNS name does not resolve),
else `status.bootstrapServers`, the bootstrap Service (`<name>-bootstrap.<namespace>.svc:<port>`).
Kafka clients then talk to each broker at the address it advertises (Metadata), so an operator
outside the cluster must reach those too; docs/operator.md says how.
"""

from __future__ import annotations

import re
from typing import Any, Mapping

OPERATOR_BOOTSTRAP = "flotilla.io/operator-bootstrap-servers"
_ADDRESS = re.compile(r"^(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9._-]+):([0-9]{1,5})$")


def _override(meta: Mapping[str, Any]) -> tuple[str | None, str]:
    raw = ((meta.get("annotations") or {}).get(OPERATOR_BOOTSTRAP) or "").strip()
    if not raw:
        return None, ""
    parts = [p.strip() for p in raw.split(",") if p.strip()]
    bad = [p for p in parts if not _ADDRESS.match(p) or not 0 < int(_ADDRESS.match(p).group(2)) < 65536]
    if bad or not parts:
        return None, f"annotation {OPERATOR_BOOTSTRAP}: expected host:port[,host:port...], got {raw!r}"
    return ",".join(parts), ""


def admin_address(kafka_cluster: Mapping[str, Any] | None, cluster: str, *,
                  require_ready: bool) -> tuple[str | None, str]:
    """(bootstrap servers, "") or (None, why not). `require_ready`: the Service's address only once
    the cluster is Ready (a RecordDeletion run waits for it; a quota is applied as soon as the
    address exists). An annotated address is the user's word that the cluster answers there: it is
    used whatever the status says (brokers that do not answer give Unreachable)."""
    if kafka_cluster is None:
        return None, f"spec.clusterRef.name: KafkaCluster {cluster} does not exist"
    override, problem = _override(kafka_cluster.get("metadata") or {})
    if problem:
        return None, f"KafkaCluster {cluster}: {problem}"
    if override:
        return override, ""
    st = kafka_cluster.get("status") or {}
    if require_ready:
        ready = next((c for c in st.get("conditions") or () if c.get("type") == "Ready"), {})
        if ready.get("status") != "True":
            return None, f"KafkaCluster {cluster} is not Ready ({ready.get('reason') or 'no status yet'})"
    if not st.get("bootstrapServers"):
        return None, f"KafkaCluster {cluster} has no bootstrap address yet"
    return st["bootstrapServers"], ""
