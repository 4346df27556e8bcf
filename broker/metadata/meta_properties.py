"""meta.properties in each log directory: which cluster and node the data belongs to.

Like Kafka, refuse to start on a directory written by another node or cluster, rather than
mixing data; generate a cluster id on first start.
"""

from __future__ import annotations

import base64
import uuid
from pathlib import Path

from broker.config import ConfigError, parse_properties

FILE_NAME = "meta.properties"


def new_cluster_id() -> str:
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")


def ensure_meta_properties(log_dirs, node_id: int, cluster_id: str | None) -> str:
    found: dict[str, str] = {}
    for d in log_dirs:
        p = Path(d) / FILE_NAME
        if p.exists():
            props = parse_properties(p.read_text())
            if int(props.get("node.id", node_id)) != node_id:
                raise ConfigError(f"log.dirs {d} belongs to node.id {props.get('node.id')}, not {node_id}")
            if "cluster.id" in props:
                found[str(d)] = props["cluster.id"]
    ids = set(found.values())
    if len(ids) > 1:
        raise ConfigError(f"log.dirs hold data of different clusters: {found}")
    existing = ids.pop() if ids else None
    if cluster_id and existing and cluster_id != existing:
        raise ConfigError(f"cluster.id {cluster_id!r} does not match {existing!r} stored in log.dirs")
    cid = cluster_id or existing or new_cluster_id()
    for d in log_dirs:
        p = Path(d) / FILE_NAME
        if not p.exists():
            p.write_text(f"version=1\nnode.id={node_id}\ncluster.id={cid}\n")
    return cid
