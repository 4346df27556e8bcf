"""SCRAM credentials in a fleet: two brokers on Kubernetes metadata share users' credentials
through one Secret (broker/metadata/kube_scram_store.py). A user added through one broker
authenticates on the other once its watch delivers the Secret (within seconds); the Secret holds
salted keys, not the password; a deletion through the other broker is refused on both.

    pytest -m kube tests/e2e/test_scram_credentials_fleet.py
"""

from __future__ import annotations

import base64
import json

import pytest

from tests.e2e.test_scram_credentials import auth_error
from flotilla.testenv.brokers.broker_process import free_port
from flotilla.testenv.brokers.cluster import BrokerCluster
from flotilla.testenv.waiting import wait_for

pytestmark = [pytest.mark.kube, pytest.mark.timeout(180),
              pytest.mark.flotilla_only("a Flotilla cluster on Kubernetes metadata")]


@pytest.fixture
def cluster(tmp_path, kube_env, kube_namespace):
    c = BrokerCluster(tmp_path, kube_env, kube_namespace, size=2, name="scram",
                      overrides={"sasl.enabled.mechanisms": "SCRAM-SHA-512",
                                 "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SASL_PLAINTEXT:SASL_PLAINTEXT"})
    for b in c.brokers:
        b.sasl_port = free_port()
        b.overrides["listeners"] = f"PLAINTEXT://127.0.0.1:{b.port},SASL_PLAINTEXT://127.0.0.1:{b.sasl_port}"
        b.overrides["advertised.listeners"] = b.overrides["listeners"]
    with c:
        yield c


def _sasl(broker, user: str, password: str) -> dict[str, str]:
    return {"bootstrap.servers": f"127.0.0.1:{broker.sasl_port}", "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "SCRAM-SHA-512", "sasl.username": user, "sasl.password": password}


def _authenticates(broker, user: str, password: str) -> bool:
    """Whether `user` gets cluster metadata through `broker`'s SCRAM listener (raises when refused)."""
    from confluent_kafka.admin import AdminClient

    AdminClient(_sasl(broker, user, password)).list_topics(timeout=5)
    return True


def test_a_user_added_on_one_broker_authenticates_on_the_other(cluster, kube_env, kube_namespace):
    from confluent_kafka.admin import (AdminClient, ScramCredentialInfo, ScramMechanism, UserScramCredentialDeletion,
                                       UserScramCredentialUpsertion)

    a, b = cluster.brokers
    admin_a = AdminClient({"bootstrap.servers": a.bootstrap})
    info = ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 4096)
    admin_a.alter_user_scram_credentials([UserScramCredentialUpsertion("fleet-user", info, b"fleet-pw")])["fleet-user"].result(30)
    wait_for("fleet-user to authenticate on the other broker", lambda: _authenticates(b, "fleet-user", "fleet-pw"),
             timeout=30, interval=0.5)
    admin_b = AdminClient({"bootstrap.servers": b.bootstrap})  # kept: a collected client fails its futures
    described = admin_b.describe_user_scram_credentials(["fleet-user"])
    assert described["fleet-user"].result(30).scram_credential_infos[0].iterations == 4096

    secret = json.loads(kube_env.kubectl("get", "secret", "-n", kube_namespace, "scram-scram-credentials",
                                         "-o", "json").stdout)
    assert secret["metadata"]["labels"]["flotilla.io/cluster"] == "scram"
    document = json.loads(base64.b64decode(secret["data"]["credentials.json"]))
    (entry,) = document["credentials"]
    assert (entry["user"], entry["mechanism"], entry["iterations"]) == ("fleet-user", "SCRAM-SHA-512", 4096)
    assert set(entry) == {"user", "mechanism", "iterations", "salt", "stored_key", "server_key"}
    assert "fleet-pw" not in json.dumps(document)

    deleted = admin_b.alter_user_scram_credentials(
        [UserScramCredentialDeletion("fleet-user", ScramMechanism.SCRAM_SHA_512)])
    deleted["fleet-user"].result(30)
    for broker in (a, b):
        wait_for(f"the deleted credential to be refused on broker {broker.node_id}",
                 lambda: auth_error(_sasl(broker, "fleet-user", "fleet-pw")),
                 until=lambda message: "invalid credentials" in message, timeout=30)
