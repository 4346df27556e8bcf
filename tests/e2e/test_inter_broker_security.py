"""Brokers reach each other over a SASL_SSL inter-broker listener with their own SCRAM-SHA-512
credentials (issue 23; broker/security/inter_broker_client.py).

Three brokers, each with a PLAINTEXT listener for clients (and the harness's readiness checks) and
an INTERNAL SASL_SSL listener named by `inter.broker.listener.name`. The `broker` user's SCRAM
credential is static (flotilla.sasl.scram.credentials.file); each broker's own password is the
`password=` of `listener.name.internal.scram-sha-512.sasl.jaas.config`. With the right password the
followers of an RF=3 topic replicate (acks=all with all three in the ISR while a follower that
cannot fetch is dropped within replica.lag.time.max.ms) and a transaction's markers reach the other
leaders (a read_committed consumer sees the commit). A broker given a wrong password cannot
replicate: it falls out of the ISR, its log names the listener and the failed authentication, and
clients still produce with acks=all.

    pytest -m kube tests/e2e/test_inter_broker_security.py
"""

from __future__ import annotations

import uuid

import pytest

from tests.e2e.test_replication import create_topic, partition_states
from flotilla.testenv.brokers.broker_process import free_port
from flotilla.testenv.brokers.cluster import BrokerCluster
from flotilla.testenv.brokers.tls_certs import make_pki
from flotilla.testenv.waiting import wait_for

pytestmark = [pytest.mark.kube, pytest.mark.timeout(240),
              pytest.mark.flotilla_only("a Flotilla fleet's inter-broker listener")]

PASSWORD = "inter-broker-secret"
LAG_MS = 4000  # a follower that cannot fetch leaves the ISR after this long


def jaas(password: str) -> str:
    return f'org.apache.kafka.common.security.scram.ScramLoginModule required username="broker" password="{password}";'


def fleet(tmp_path, kube_env, kube_namespace, name: str, wrong_password_on: int | None = None) -> BrokerCluster:
    pki = make_pki(tmp_path / "pki")
    credentials = tmp_path / "scram-credentials"
    credentials.write_text(f"SCRAM-SHA-512=[name=broker,password={PASSWORD}]\n")
    c = BrokerCluster(tmp_path, kube_env, kube_namespace, size=3, name=name, overrides={
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,INTERNAL:SASL_SSL",
        "inter.broker.listener.name": "INTERNAL",
        "sasl.enabled.mechanisms": "SCRAM-SHA-512",
        "sasl.mechanism.inter.broker.protocol": "SCRAM-SHA-512",
        "flotilla.sasl.scram.credentials.file": str(credentials),
        "ssl.keystore.type": "PEM", "ssl.keystore.location": str(pki.broker_keystore),
        "ssl.truststore.type": "PEM", "listener.name.internal.ssl.truststore.location": str(pki.ca_file),
        "replica.lag.time.max.ms": str(LAG_MS), "replica.fetch.backoff.ms": "200",
        "transaction.state.log.replication.factor": "3", "offsets.topic.replication.factor": "3"})
    for b in c.brokers:
        internal = f"127.0.0.1:{free_port()}"
        b.overrides["listeners"] = f"PLAINTEXT://127.0.0.1:{b.port},INTERNAL://{internal}"
        b.overrides["advertised.listeners"] = b.overrides["listeners"]
        b.overrides["listener.name.internal.scram-sha-512.sasl.jaas.config"] = jaas(
            "wrong-password" if b.node_id == wrong_password_on else PASSWORD)
    return c


def produce_all(bootstrap: str, topic: str, n: int) -> None:
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "message.timeout.ms": 30000})
    errors: list = []
    for i in range(n):
        p.produce(topic, value=f"v{i}".encode(), partition=i % 3,
                  on_delivery=lambda err, msg: errors.append(err) if err else None)
    assert p.flush(40) == 0, "acks=all produce did not complete"
    assert not errors, f"acks=all produce failed: {errors[:3]}"


def test_followers_replicate_and_markers_arrive_over_sasl_ssl(tmp_path, kube_env, kube_namespace):
    from confluent_kafka import Consumer, Producer

    with fleet(tmp_path, kube_env, kube_namespace, "ibsec") as c:
        bootstrap = c.brokers[0].bootstrap
        topic = create_topic(c.brokers[0], 3, rf=3, prefix="ibsec")
        c.wait_leaders(topic, 3)
        produce_all(bootstrap, topic, 30)
        # Past replica.lag.time.max.ms every follower that had not fetched would be gone from the ISR.
        states = wait_for("every partition's ISR to hold all three brokers after the lag time",
                          lambda: partition_states(c, topic), timeout=30, interval=0.5,
                          until=lambda s: all(len(v[3]) == 3 for v in s.values()))
        assert {v[0] for v in states.values()} <= {1, 2, 3}

        producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": f"ib-{uuid.uuid4().hex[:8]}",
                             "acks": "all"})
        producer.init_transactions(30)
        producer.begin_transaction()
        for i in range(9):
            producer.produce(topic, value=f"t{i}".encode(), partition=i % 3)
        producer.commit_transaction(30)

        consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"ib-{uuid.uuid4().hex[:8]}",
                             "auto.offset.reset": "earliest", "isolation.level": "read_committed"})
        consumer.subscribe([topic])
        seen: set[bytes] = set()

        def committed_seen():
            m = consumer.poll(0.5)
            if m is not None and m.error() is None:
                seen.add(m.value())
            return {f"t{i}".encode() for i in range(9)} <= seen
        try:
            wait_for("the committed transaction to be readable on every partition (markers written)",
                     committed_seen, timeout=40, interval=0)
        finally:
            consumer.close()
        for b in c.brokers:
            assert "authentication failed" not in b.log_text(), f"broker {b.node_id}: {b.log_tail()}"


def test_a_wrong_inter_broker_password_keeps_the_broker_out_of_the_isr(tmp_path, kube_env, kube_namespace):
    with fleet(tmp_path, kube_env, kube_namespace, "ibbad", wrong_password_on=3) as c:
        topic = create_topic(c.brokers[0], 3, rf=3, prefix="ibbad")
        produce_all(c.brokers[0].bootstrap, topic, 30)
        bad = c.broker(3)
        wait_for("broker 3's log to say its inter-broker authentication failed on listener INTERNAL",
                 lambda: bad.log_tail(), timeout=30,
                 until=lambda text: "(listener INTERNAL): authentication failed as broker (SCRAM-SHA-512)" in text)
        states = wait_for("broker 3 out of the ISR of every partition it follows",
                          lambda: partition_states(c, topic), timeout=30, interval=0.5,
                          until=lambda s: all(3 not in v[3] for v in s.values() if v[0] != 3))
        assert any(v[0] != 3 for v in states.values())
        produce_all(c.brokers[0].bootstrap, topic, 30)  # clients are unaffected
        for b in c.brokers[:2]:
            assert "authentication failed" not in b.log_text(), f"broker {b.node_id}: {b.log_tail()}"
