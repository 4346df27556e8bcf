"""An operator-rendered fleet whose first listener is SASL: the brokers reach each other there as
`flotilla-broker` with SCRAM-SHA-512 (builders/configmap.py, builders/statefulset.py,
operator_credentials.ensure_broker_credentials)."""

from __future__ import annotations

import base64
import subprocess

from flotilla_operator.reconcilers import kafka_cluster as cluster_reconciler
from flotilla_operator.builders.common import Owner
from flotilla_operator.builders.configmap import server_properties
from flotilla_operator.builders.statefulset import BROKER_CONTAINER, broker_command, build_statefulset
from flotilla_operator.api.kafka_cluster import KafkaClusterSpec
from flotilla_operator.clients.credentials import credential_matches

from broker.config import parse_config, parse_properties
from broker.metadata.kube_document import document_of
from broker.security.inter_broker_client import inter_broker_client
from tests.unit.operator.test_operator_handlers import FakeKube, cluster, memo_for

OWNER = Owner(name="demo", namespace="ns", uid="u-1")
SASL = [{"name": "INTERNAL", "port": 9092, "protocol": "SASL_PLAINTEXT"}, {"name": "CLIENTS", "port": 9094}]


def rendered_args(spec: KafkaClusterSpec, password: str) -> list[str]:
    """The broker's argv as the pod's shell script builds it (flotilla replaced by printf)."""
    script = broker_command(OWNER, spec)[2].replace("exec flotilla broker", "printf '%s\\n'")
    out = subprocess.run(["/bin/sh", "-c", script], capture_output=True, text=True, check=True,
                         env={"HOSTNAME": "demo-1", "FLOTILLA_BROKER_PASSWORD": password, "PATH": "/usr/bin:/bin"})
    return out.stdout.splitlines()


def test_the_rendered_config_and_command_make_a_broker_that_authenticates_to_its_peers():
    spec = KafkaClusterSpec.model_validate({"listeners": SASL})
    props = parse_properties(server_properties(OWNER, spec))
    assert props["inter.broker.listener.name"] == "INTERNAL"
    assert props["sasl.mechanism.inter.broker.protocol"] == "SCRAM-SHA-512"
    assert props["super.users"] == "User:flotilla-operator;User:flotilla-broker"
    args = rendered_args(spec, "pw-Abc_123")
    overrides = dict(a.split("=", 1) for a in args if "=" in a and not a.startswith("/"))
    raw = {**props, **overrides}
    raw.pop("flotilla.metrics.listener", None)
    client = inter_broker_client(parse_config(raw))  # the broker's own parser, as at start-up
    assert (client.listener, client.mechanism, client.username, client.password) == (
        "INTERNAL", "SCRAM-SHA-512", "flotilla-broker", "pw-Abc_123")
    assert "pw-Abc_123" not in str(build_statefulset(OWNER, spec, image="i", config_hash="h", pull_policy="Never"))


def test_the_password_comes_from_the_broker_credentials_secret():
    spec = KafkaClusterSpec.model_validate({"listeners": SASL})
    sts = build_statefulset(OWNER, spec, image="i", config_hash="h", pull_policy="Never")
    (container,) = [c for c in sts["spec"]["template"]["spec"]["containers"] if c["name"] == BROKER_CONTAINER]
    (env,) = [e for e in container["env"] if e["name"] == "FLOTILLA_BROKER_PASSWORD"]
    assert env["valueFrom"]["secretKeyRef"] == {"name": "demo-broker-credentials", "key": "password"}


def test_a_plaintext_first_listener_renders_no_broker_credentials():
    spec = KafkaClusterSpec.model_validate({"listeners": [{"name": "PLAINTEXT", "port": 9092},
                                                          {"name": "SASL", "port": 9093, "protocol": "SASL_PLAINTEXT"}]})
    text = server_properties(OWNER, spec)
    assert "flotilla-broker" not in text and "sasl.mechanism.inter.broker.protocol" not in text
    sts = build_statefulset(OWNER, spec, image="i", config_hash="h", pull_policy="Never")
    assert "FLOTILLA_BROKER_PASSWORD" not in str(sts) and "jaas" not in " ".join(broker_command(OWNER, spec))


async def test_reconcile_creates_the_brokers_credential_before_the_statefulset():
    kube = FakeKube([cluster({"replicas": 3, "listeners": SASL})])
    await cluster_reconciler.reconcile(memo_for(kube), "ns", "demo", why="test")
    secret = kube.objects[("Secret", "ns", "demo-broker-credentials")]
    assert secret["metadata"]["ownerReferences"][0]["name"] == "demo"
    password = base64.b64decode(secret["data"]["password"]).decode()
    assert base64.b64decode(secret["data"]["username"]).decode() == "flotilla-broker"
    document = document_of("Secret", "credentials.json", kube.objects[("Secret", "ns", "demo-scram-credentials")])
    assert credential_matches(document, "flotilla-broker", password) and password not in str(document)
    created = [o["metadata"]["name"] for o in kube.created]
    assert created.index("demo-broker-credentials") >= 0 and [o["kind"] for o in kube.applied][-1] == "StatefulSet"
    await cluster_reconciler.reconcile(memo_for(kube), "ns", "demo", why="again")  # kept: same password
    again = kube.objects[("Secret", "ns", "demo-broker-credentials")]
    assert base64.b64decode(again["data"]["password"]).decode() == password
