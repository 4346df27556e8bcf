"""The brokers' StatefulSet: stable names and volumes, one broker rolled at a time."""

from __future__ import annotations

import shlex
from typing import Any

from broker.metadata.names import broker_credentials_secret_name

from ..annotations import RESTART_TOKEN
from ..api.kafka_cluster import METRICS_PORT, KafkaClusterSpec, Listener
from .common import (
    BROKER_PASSWORD_ENV,
    BROKER_USER,
    CONFIG_DIR,
    CONFIG_FILE,
    CONFIG_HASH_ANNOTATION,
    DATA_DIR,
    Owner,
    configmap_name,
    external_bootstrap_name,
    external_broker_name,
    headless_service_name,
    labels,
    metadata,
    sasl_inter_broker,
    selector_labels,
    service_account_name,
    statefulset_name,
)
from .external_addresses import (BOOTSTRAP, EXTERNAL_ADDRESSES_DIR, address_key, external_addresses_name,
                                 load_balancer_listeners, tls_load_balancer_listeners)
from .certificates import GENERATION_ANNOTATION, TLS_DIR, broker_certs_name, managed_listeners, managed_tls
from .roll import TEMPLATE_HASH_ANNOTATION, template_hash

BROKER_CONTAINER = "broker"
# Immutable in a StatefulSet: an existing one with another policy is replaced (reconcilers/kafka_cluster.py).
POD_MANAGEMENT_POLICY = "Parallel"
BROKER_UID = 10001
HOST_IP_ENV = "HOST_IP"  # the node's address, which external (NodePort) listeners advertise


def port_name(index: int) -> str:
    """Container and Service port name of the index-th listener (at most 15 characters)."""
    return "kafka" if index == 0 else f"kafka-{index}"


def _advertised(index: int, listener: Listener, host: str) -> str:
    external = listener.external
    if external is None:
        return f"{listener.name}://{host}:{listener.port}"
    if external.type == "loadbalancer":
        return f"{listener.name}://${{lb_{index}}}:{listener.port}"
    return f"{listener.name}://${{{HOST_IP_ENV}}}:$(({external.node_port + 1} + ordinal))"


def _wait_for_load_balancers(owner: Owner, spec: KafkaClusterSpec) -> str:
    """Shell that sets lb_<index> to this broker's load balancer address on each LoadBalancer
    listener, waiting (and saying so) until the operator has written it to the mounted ConfigMap;
    on a TLS one, also until the mounted certificate names it and the bootstrap load balancer's."""
    listeners = [(i, l) for i, l in enumerate(spec.listeners) if l in load_balancer_listeners(spec)]
    if not listeners:
        return ""
    tls = tls_load_balancer_listeners(spec)
    script = (
        "external_address() {\n"
        f'  file="{EXTERNAL_ADDRESSES_DIR}/$1"; waited=0\n'
        '  until [ -s "$file" ]; do\n'
        '    if [ $((waited % 15)) -eq 0 ]; then echo "waiting for the load balancer address $1 (Service $2)" >&2; fi\n'
        "    waited=$((waited + 1)); sleep 1\n"
        "  done\n"
        '  cat "$file"\n'
        "}\n"
    )
    if tls:
        script += (
            "certificate_names() {\n"
            "  waited=0\n"
            f'  until grep -qxF "$1" "{TLS_DIR}/broker-${{ordinal}}.names" 2>/dev/null; do\n'
            '    if [ $((waited % 15)) -eq 0 ]; then echo "waiting for a certificate that names $1" >&2; fi\n'
            "    waited=$((waited + 1)); sleep 1\n"
            "  done\n"
            "}\n"
        )
    for index, listener in listeners:
        broker = address_key(listener, "${ordinal}")
        script += (f'lb_{index}="$(external_address {broker} '
                   f'{external_broker_name(owner, "${ordinal}", listener.port)})"\n')
        if listener in tls:
            bootstrap = address_key(listener, BOOTSTRAP)
            script += (f'certificate_names "$lb_{index}"\n'
                       f'certificate_names "$(external_address {bootstrap} '
                       f'{external_bootstrap_name(owner, listener.port)})"\n')
    return script


def broker_command(owner: Owner, spec: KafkaClusterSpec) -> list[str]:
    """The container command: a tiny shell wrapper that derives node.id and advertised.listeners from
    the pod's own name (<statefulset>-<ordinal>), then execs the broker so it gets SIGTERM directly."""
    host = f"${{HOSTNAME}}.{headless_service_name(owner)}.{owner.namespace}.svc"
    # An external listener: the node's address and this broker's nodePort (builders/services.py),
    # or its own load balancer's address (builders/external_addresses.py) at the listener's port.
    advertised = ",".join(_advertised(i, l, host) for i, l in enumerate(spec.listeners))
    config = shlex.quote(f"{CONFIG_DIR}/{CONFIG_FILE}")
    script = "set -eu\n" 'ordinal="${HOSTNAME##*-}"\n' + _wait_for_load_balancers(owner, spec)
    script += (
        f"exec flotilla broker --config {config} \\\n"
        '  --override "node.id=${ordinal}" \\\n'
        f'  --override "advertised.listeners={advertised}"'
    )
    for listener in managed_listeners(spec):
        # Each broker's own key and certificate (builders/certificates.py), chosen by its ordinal.
        key = f"listener.name.{listener.name.lower()}.ssl.keystore.location"
        script += f' \\\n  --override "{key}={TLS_DIR}/broker-${{ordinal}}.pem"'
    if sasl_inter_broker(spec):
        # The brokers' own credentials for the inter-broker listener (Kafka's JAAS convention),
        # the password from the Secret (env), never in the ConfigMap or the pod spec.
        key = f"listener.name.{spec.listeners[0].name.lower()}.scram-sha-512.sasl.jaas.config"
        jaas = (r'org.apache.kafka.common.security.scram.ScramLoginModule required '
                rf'username=\"{BROKER_USER}\" password=\"${{{BROKER_PASSWORD_ENV}}}\";')
        script += f' \\\n  --override "{key}={jaas}"'
    script += "\n"
    return ["/bin/sh", "-c", script]


def _container(owner: Owner, spec: KafkaClusterSpec, image: str, pull_policy: str) -> dict[str, Any]:
    ports = [
        {"name": port_name(i), "containerPort": l.port, "protocol": "TCP"} for i, l in enumerate(spec.listeners)
    ]
    ports.append({"name": "metrics", "containerPort": METRICS_PORT, "protocol": "TCP"})
    container: dict[str, Any] = {
        "name": BROKER_CONTAINER,
        "image": image,
        "imagePullPolicy": spec.image_pull_policy or pull_policy,
        "command": broker_command(owner, spec),
        "ports": ports,
        "env": [
            {"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
            {"name": "POD_NAMESPACE", "valueFrom": {"fieldRef": {"fieldPath": "metadata.namespace"}}},
            {"name": "FLOTILLA_CLUSTER", "value": owner.name},
            {"name": "PYTHONUNBUFFERED", "value": "1"},
        ] + ([{"name": HOST_IP_ENV, "valueFrom": {"fieldRef": {"fieldPath": "status.hostIP"}}}]
             if any(l.external for l in spec.listeners) else []) + ([{"name": BROKER_PASSWORD_ENV, "valueFrom": {"secretKeyRef": {
            "name": broker_credentials_secret_name(owner.name), "key": "password"}}}]
             if sasl_inter_broker(spec) else []),
        # Ready when registered and back in the ISR of every partition it holds (each with a
        # leader): the RollingUpdate restarts the next broker only then. Alive while the metrics
        # server answers /healthz, which a broker catching up does: it is never killed for lagging.
        "readinessProbe": {
            "httpGet": {"path": "/readyz", "port": "metrics"},
            "periodSeconds": 5,
            "failureThreshold": 3,
        },
        "livenessProbe": {
            "httpGet": {"path": "/healthz", "port": "metrics"},
            "initialDelaySeconds": 15,
            "periodSeconds": 10,
            "failureThreshold": 6,
        },
        "volumeMounts": [
            {"name": "data", "mountPath": DATA_DIR},
            {"name": "config", "mountPath": CONFIG_DIR, "readOnly": True},
            {"name": "tmp", "mountPath": "/tmp"},
        ] + ([{"name": "tls", "mountPath": TLS_DIR, "readOnly": True}] if managed_tls(spec) else [])
          + ([{"name": "external-addresses", "mountPath": EXTERNAL_ADDRESSES_DIR, "readOnly": True}]
             if load_balancer_listeners(spec) else []),
        "securityContext": {
            "allowPrivilegeEscalation": False,
            "readOnlyRootFilesystem": True,
            "capabilities": {"drop": ["ALL"]},
        },
    }
    if spec.resources is not None:
        container["resources"] = spec.resources.to_k8s()
    return container


def default_affinity(owner: Owner) -> dict[str, Any]:
    """Prefer one broker per node, so that losing a node loses one broker."""
    return {
        "podAntiAffinity": {
            "preferredDuringSchedulingIgnoredDuringExecution": [
                {
                    "weight": 100,
                    "podAffinityTerm": {
                        "topologyKey": "kubernetes.io/hostname",
                        "labelSelector": {"matchLabels": selector_labels(owner)},
                    },
                }
            ]
        }
    }


def build_statefulset(
    owner: Owner,
    spec: KafkaClusterSpec,
    *,
    image: str,
    config_hash: str,
    pull_policy: str = "IfNotPresent",
    replicas: int | None = None,
    partition: int = 0,
    restart_token: str | None = None,
    certificate_generation: int | None = None,
) -> dict[str, Any]:
    """The StatefulSet of brokers. `config_hash` goes on the pod template: a new hash rolls the pods,
    as does a new `certificate_generation` (the brokers' TLS certificates re-issued, certificates.py).
    `replicas` overrides spec.replicas (a blocked scale-down keeps brokers that hold replicas);
    `partition` is the operator's gate on the roll (roll.py); a new `restart_token` rolls the
    pods too (a manual rolling update, annotations.py)."""
    template = spec.template
    user_meta = template.metadata
    pod_labels = {**((user_meta.labels if user_meta else None) or {}), **labels(owner)}
    pod_annotations = {
        **((user_meta.annotations if user_meta else None) or {}),
        CONFIG_HASH_ANNOTATION: config_hash,
    }
    if restart_token:
        pod_annotations[RESTART_TOKEN] = restart_token
    volumes: list[dict[str, Any]] = [
        {"name": "config", "configMap": {"name": configmap_name(owner)}},
        {"name": "tmp", "emptyDir": {"sizeLimit": "64Mi"}},
    ]
    if managed_tls(spec):
        pod_annotations[GENERATION_ANNOTATION] = str(certificate_generation or 0)
        volumes.append({"name": "tls", "secret": {"secretName": broker_certs_name(owner.name), "defaultMode": 0o440}})
    if load_balancer_listeners(spec):
        # A directory mount (not subPath): kubelet refreshes it when the operator adds an address.
        volumes.append({"name": "external-addresses", "configMap": {"name": external_addresses_name(owner)}})
    claim_templates: list[dict[str, Any]] = []
    storage = spec.storage
    if storage.type == "ephemeral":
        volumes.append({"name": "data", "emptyDir": {"sizeLimit": storage.size}})
    else:
        claim_spec: dict[str, Any] = {
            "accessModes": ["ReadWriteOnce"],
            "resources": {"requests": {"storage": storage.size}},
        }
        if storage.storage_class_name:
            claim_spec["storageClassName"] = storage.storage_class_name
        claim_templates.append(
            {
                "apiVersion": "v1",
                "kind": "PersistentVolumeClaim",
                "metadata": {"name": "data", "labels": labels(owner)},
                "spec": claim_spec,
            }
        )
    pod_spec: dict[str, Any] = {
        "serviceAccountName": service_account_name(owner),
        "terminationGracePeriodSeconds": template.termination_grace_period_seconds,
        "securityContext": {
            "runAsNonRoot": True,
            "runAsUser": BROKER_UID,
            "runAsGroup": BROKER_UID,
            "fsGroup": BROKER_UID,
            "seccompProfile": {"type": "RuntimeDefault"},
        },
        "containers": [_container(owner, spec, image, pull_policy)],
        "volumes": volumes,
    }
    # Spread brokers over nodes unless told otherwise: preferred, so it never blocks scheduling.
    pod_spec["affinity"] = template.affinity if template.affinity else default_affinity(owner)
    if template.tolerations:
        pod_spec["tolerations"] = template.tolerations
    if template.node_selector:
        pod_spec["nodeSelector"] = template.node_selector
    if template.priority_class_name:
        pod_spec["priorityClassName"] = template.priority_class_name
    if spec.image_pull_secrets:
        pod_spec["imagePullSecrets"] = [{"name": r.name} for r in spec.image_pull_secrets]
    sts_spec: dict[str, Any] = {
        "replicas": spec.replicas if replicas is None else replicas,
        "serviceName": headless_service_name(owner),
        "selector": {"matchLabels": selector_labels(owner)},
        # Parallel: a lost broker is re-created at once, even while others are not Ready (with
        # OrderedReady it would wait behind an unready lower ordinal, which may be waiting for it).
        # Updates are RollingUpdate, highest ordinal first, one pod at a time; the operator opens
        # `partition` one broker at a time, only while every broker is Ready and every ISR full.
        "podManagementPolicy": POD_MANAGEMENT_POLICY,
        "updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {"partition": partition}},
        "revisionHistoryLimit": 10,
        "template": {
            "metadata": {"labels": pod_labels, "annotations": pod_annotations},
            "spec": pod_spec,
        },
    }
    if claim_templates:
        sts_spec["volumeClaimTemplates"] = claim_templates
        # deleteClaim covers both ways a broker goes: the KafkaCluster deleted, or its ordinal
        # removed by a scale-down (after the drain has moved its replicas elsewhere).
        policy = "Delete" if storage.delete_claim else "Retain"
        sts_spec["persistentVolumeClaimRetentionPolicy"] = {"whenDeleted": policy, "whenScaled": policy}
    return {
        "apiVersion": "apps/v1",
        "kind": "StatefulSet",
        "metadata": metadata(owner, statefulset_name(owner),
                             annotations={TEMPLATE_HASH_ANNOTATION: template_hash(sts_spec["template"])}),
        "spec": sts_spec,
    }
