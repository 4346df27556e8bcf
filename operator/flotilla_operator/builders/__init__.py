"""Pure functions from a validated KafkaCluster spec to the Kubernetes objects that run it.

Nothing here does I/O or imports kopf: every builder takes the owner and the spec and returns a
plain dict, so each one is unit-tested on its own and the reconcilers only send what they get.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..config_hash import config_hash
from ..api.kafka_cluster import KafkaClusterSpec
from .common import CONFIG_FILE, Owner
from .configmap import build_configmap
from .external_addresses import build_external_addresses, load_balancer_listeners
from .pdb import build_pdb
from .roll import TEMPLATE_HASH_ANNOTATION
from .rbac import build_metadata_role_binding, build_role, build_role_binding, build_service_account
from .services import build_bootstrap_service, build_external_services, build_headless_service
from .statefulset import build_statefulset


@dataclass(frozen=True)
class Desired:
    """Everything one KafkaCluster should own, in the order to apply it."""

    config_hash: str
    objects: list[dict[str, Any]]

    @property
    def server_properties(self) -> str:
        return next(o for o in self.objects if o["kind"] == "ConfigMap" and CONFIG_FILE in o["data"])["data"][CONFIG_FILE]

    @property
    def statefulset(self) -> dict[str, Any]:
        return next(o for o in self.objects if o["kind"] == "StatefulSet")

    @property
    def template_hash(self) -> str:
        return self.statefulset["metadata"]["annotations"][TEMPLATE_HASH_ANNOTATION]


def build_all(
    owner: Owner,
    spec: KafkaClusterSpec,
    *,
    image: str,
    pull_policy: str = "IfNotPresent",
    statefulset_replicas: int | None = None,
    cluster_id: str | None = None,
    partition: int = 0,
    restart_token: str | None = None,
    certificate_generation: int | None = None,
    external_addresses: dict[str, str] | None = None,
) -> Desired:
    """`statefulset_replicas` holds the StatefulSet above spec.replicas while a scale-down is
    blocked (scale_down.py); `cluster_id` is the fleet's recorded id (cluster_id.py; None: a new
    fleet's from the uid); `partition` gates the roll (roll.py); `restart_token` marks the pod
    template of a manual rolling update (annotations.py); `certificate_generation` is that of the
    brokers' TLS certificates (certificates.py); `external_addresses` those of the brokers' load
    balancers known so far (external_addresses.py); everything else follows the spec."""
    configmap = build_configmap(owner, spec, cluster_id)
    digest = config_hash(configmap["data"][CONFIG_FILE])
    objects = [
        build_service_account(owner),
        # Before the Role: on an upgrade from a Role that held BROKER_RULES itself, the brokers
        # never lose them.
        build_metadata_role_binding(owner),
        build_role(owner),
        build_role_binding(owner),
        configmap,
        build_headless_service(owner, spec),
        build_bootstrap_service(owner, spec),
        *build_external_services(owner, spec, spec.replicas if statefulset_replicas is None else statefulset_replicas),
        *([build_external_addresses(owner, external_addresses or {})] if load_balancer_listeners(spec) else []),
        build_pdb(owner),
        # Last: the brokers start only once everything they need exists.
        build_statefulset(owner, spec, image=spec.image or image, config_hash=digest, pull_policy=pull_policy,
                          replicas=statefulset_replicas, partition=partition,
                          restart_token=restart_token, certificate_generation=certificate_generation),
    ]
    return Desired(config_hash=digest, objects=objects)


__all__ = ["Desired", "Owner", "build_all"]
