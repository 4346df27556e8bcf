"""The broker StatefulSet builder."""

from __future__ import annotations

import subprocess

from flotilla_operator.builders.common import CONFIG_HASH_ANNOTATION, owner_reference
from flotilla_operator.builders.statefulset import broker_command, build_statefulset
from flotilla_operator.api.kafka_cluster import KafkaClusterSpec


def _sts(owner, spec, **kw):
    return build_statefulset(owner, spec, image=kw.pop("image", "flotilla:test"), config_hash=kw.pop("config_hash", "abc123"), **kw)


def _container(sts):
    return sts["spec"]["template"]["spec"]["containers"][0]


def test_identity_and_ownership(owner, spec):
    sts = _sts(owner, spec)
    assert sts["apiVersion"] == "apps/v1" and sts["kind"] == "StatefulSet"
    assert sts["metadata"]["name"] == "demo-broker" and sts["metadata"]["namespace"] == "kafka"
    assert sts["metadata"]["ownerReferences"] == [owner_reference(owner)]
    ref = sts["metadata"]["ownerReferences"][0]
    assert ref["controller"] is True and ref["uid"] == owner.uid and ref["kind"] == "KafkaCluster"


def test_rolling_update_gated_by_the_operators_partition(owner, spec):
    s = _sts(owner, spec)["spec"]
    assert s["replicas"] == 3
    assert s["updateStrategy"] == {"type": "RollingUpdate", "rollingUpdate": {"partition": 0}}
    assert _sts(owner, spec, partition=2)["spec"]["updateStrategy"]["rollingUpdate"] == {"partition": 2}
    # Parallel: a lost broker is re-created even behind an unready lower ordinal (issue 18, item 9b).
    assert s["podManagementPolicy"] == "Parallel"
    assert s["serviceName"] == "demo-brokers"
    assert s["selector"]["matchLabels"].items() <= s["template"]["metadata"]["labels"].items()


def test_config_hash_on_pod_template(owner, spec):
    a = _sts(owner, spec, config_hash="aaa")
    b = _sts(owner, spec, config_hash="bbb")
    assert a["spec"]["template"]["metadata"]["annotations"][CONFIG_HASH_ANNOTATION] == "aaa"
    assert a["spec"]["template"] != b["spec"]["template"]


def test_probes_ports_and_grace(owner, spec):
    sts = _sts(owner, spec)
    c = _container(sts)
    # Readiness is the broker's ISR rule (broker/server/readiness.py): a roll waits for each
    # restarted broker to be back in every ISR; liveness stays on /healthz so lagging never kills.
    assert c["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "metrics"}
    assert "tcpSocket" not in c["readinessProbe"]
    assert c["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "metrics"}
    assert {"name": "metrics", "containerPort": 9404, "protocol": "TCP"} in c["ports"]
    assert {"name": "kafka", "containerPort": 9092, "protocol": "TCP"} in c["ports"]
    assert sts["spec"]["template"]["spec"]["terminationGracePeriodSeconds"] == 120
    assert c["image"] == "flotilla:test"


def test_persistent_claims(owner):
    spec = KafkaClusterSpec.model_validate({"storage": {"size": "50Gi", "storageClassName": "fast", "deleteClaim": True}})
    s = _sts(owner, spec)["spec"]
    (claim,) = s["volumeClaimTemplates"]
    assert claim["metadata"]["name"] == "data"
    assert claim["spec"]["resources"]["requests"]["storage"] == "50Gi"
    assert claim["spec"]["storageClassName"] == "fast"
    assert s["persistentVolumeClaimRetentionPolicy"] == {"whenDeleted": "Delete", "whenScaled": "Delete"}
    assert all(v["name"] != "data" for v in s["template"]["spec"]["volumes"])
    mounts = {m["name"]: m["mountPath"] for m in _container({"spec": s})["volumeMounts"]}
    assert mounts["data"] == "/var/lib/flotilla/data" and mounts["config"] == "/etc/flotilla"


def test_claims_retained_by_default(owner, spec):
    s = _sts(owner, spec)["spec"]
    assert s["persistentVolumeClaimRetentionPolicy"] == {"whenDeleted": "Retain", "whenScaled": "Retain"}
    assert "storageClassName" not in s["volumeClaimTemplates"][0]["spec"]


def test_ephemeral_storage(owner):
    spec = KafkaClusterSpec.model_validate({"storage": {"type": "ephemeral", "size": "1Gi"}})
    s = _sts(owner, spec)["spec"]
    assert "volumeClaimTemplates" not in s
    assert {"name": "data", "emptyDir": {"sizeLimit": "1Gi"}} in s["template"]["spec"]["volumes"]


def test_pod_template_overrides(owner):
    spec = KafkaClusterSpec.model_validate(
        {
            "image": "registry/flotilla:custom",
            "imagePullPolicy": "Always",
            "resources": {"requests": {"cpu": "1"}, "limits": {"memory": "2Gi"}},
            "template": {
                "metadata": {
                    "labels": {"team": "data", "app.kubernetes.io/instance": "hijack"},
                    "annotations": {"a": "b"},
                },
                "affinity": {"podAntiAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": []}},
                "tolerations": [{"key": "dedicated", "operator": "Equal", "value": "kafka", "effect": "NoSchedule"}],
                "nodeSelector": {"disk": "ssd"},
                "priorityClassName": "high",
                "terminationGracePeriodSeconds": 300,
            },
        }
    )
    sts = build_statefulset(owner, spec, image=spec.image, config_hash="h")
    pod = sts["spec"]["template"]
    assert pod["metadata"]["labels"]["team"] == "data"
    assert pod["metadata"]["labels"]["app.kubernetes.io/instance"] == "demo"  # ours win
    assert pod["metadata"]["annotations"]["a"] == "b"
    assert pod["metadata"]["annotations"][CONFIG_HASH_ANNOTATION] == "h"
    ps = pod["spec"]
    assert ps["affinity"] == {"podAntiAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": []}}
    assert ps["tolerations"][0]["key"] == "dedicated"
    assert ps["nodeSelector"] == {"disk": "ssd"} and ps["priorityClassName"] == "high"
    assert ps["terminationGracePeriodSeconds"] == 300
    c = ps["containers"][0]
    assert c["image"] == "registry/flotilla:custom" and c["imagePullPolicy"] == "Always"
    assert c["resources"] == {"requests": {"cpu": "1"}, "limits": {"memory": "2Gi"}}


def test_brokers_spread_over_nodes_by_default(owner, spec):
    affinity = _sts(owner, spec)["spec"]["template"]["spec"]["affinity"]
    (term,) = affinity["podAntiAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"]
    assert term["podAffinityTerm"]["topologyKey"] == "kubernetes.io/hostname"
    assert term["podAffinityTerm"]["labelSelector"]["matchLabels"]["app.kubernetes.io/instance"] == "demo"
    assert "requiredDuringSchedulingIgnoredDuringExecution" not in affinity["podAntiAffinity"]


def test_runs_as_non_root(owner, spec):
    ps = _sts(owner, spec)["spec"]["template"]["spec"]
    assert ps["securityContext"]["runAsNonRoot"] is True and ps["securityContext"]["fsGroup"] == 10001
    assert ps["serviceAccountName"] == "demo-broker"
    assert ps["containers"][0]["securityContext"]["allowPrivilegeEscalation"] is False


def test_broker_command_derives_node_id_and_advertised_listener(owner, spec):
    argv = broker_command(owner, spec)
    assert argv[:2] == ["/bin/sh", "-c"]
    # Run the wrapper with a fake `flotilla` that prints its arguments.
    script = argv[2].replace("exec flotilla", "exec printf '%s\\n'")
    out = subprocess.run(["/bin/sh", "-c", script], env={"HOSTNAME": "demo-broker-7", "PATH": "/usr/bin:/bin"},
                         capture_output=True, text=True, check=True).stdout.splitlines()
    assert out == [
        "broker", "--config", "/etc/flotilla/server.properties",
        "--override", "node.id=7",
        "--override", "advertised.listeners=PLAINTEXT://demo-broker-7.demo-brokers.kafka.svc:9092",
    ]


def test_multiple_listeners(owner):
    spec = KafkaClusterSpec.model_validate({"listeners": [{"name": "INTERNAL", "port": 9092}, {"name": "CLIENTS", "port": 9094}]})
    sts = _sts(owner, spec)
    c = _container(sts)
    assert [p["name"] for p in c["ports"]] == ["kafka", "kafka-1", "metrics"]
    assert "INTERNAL://${HOSTNAME}.demo-brokers.kafka.svc:9092,CLIENTS://${HOSTNAME}.demo-brokers.kafka.svc:9094" in c["command"][2]


def test_image_pull_secrets_reach_the_broker_pods(owner, spec):
    """A private registry: spec.imagePullSecrets become the pod template's; none set, none rendered."""
    assert "imagePullSecrets" not in _sts(owner, spec)["spec"]["template"]["spec"]
    private = KafkaClusterSpec.model_validate({"image": "registry.example.com/flotilla:1.0",
                                               "imagePullSecrets": [{"name": "regcred"}, {"name": "mirror"}]})
    ps = _sts(owner, private, image=private.image)["spec"]["template"]["spec"]
    assert ps["imagePullSecrets"] == [{"name": "regcred"}, {"name": "mirror"}]


def test_image_pull_secrets_are_in_the_crd_schema():
    import pytest

    from flotilla_operator.crd_render import crd as render_crd
    from flotilla_operator.api.kafka_cluster import KAFKA_CLUSTER

    crd = render_crd(KAFKA_CLUSTER)
    props = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]
    item = props["imagePullSecrets"]["items"]
    assert item["required"] == ["name"] and item["properties"]["name"]["type"] == "string"
    with pytest.raises(ValueError, match="imagePullSecrets"):
        KafkaClusterSpec.model_validate({"imagePullSecrets": [{"name": "Not_A_Name"}]})
