"""Quotas per user (KIP-13's user entities): a quota set with Kafka 4.1's kafka-configs tool on
`--entity-type users` throttles a confluent-kafka producer authenticated as that user over
SASL/SCRAM-SHA-512, and not another user with the same client-id; a (user, client-id) quota takes
precedence over the user's own. The broker is tests/support/secure_broker.py's (alice and bob),
the same against Apache Kafka 4.1 (`--kafka-target=apache`).
"""

from __future__ import annotations

import pytest

from tests.e2e.test_quotas import alter_quotas, kafka_configs
from tests.support.interop_suite import make_topic
from tests.support.secure_broker import SecureBroker, running_secure_broker
from flotilla.testenv.waiting import wait_for

pytestmark = pytest.mark.timeout(180)

SLOW_RATE = 10240  # bytes/s: one 256 KiB batch is far over it
BATCH = 256 * 1024


@pytest.fixture(scope="module")
def secure(kafka_target, tmp_path_factory) -> SecureBroker:
    with running_secure_broker(kafka_target, tmp_path_factory.mktemp("user-quotas")) as sb:
        yield sb


def produce_throttle_ms(conf: dict, topic: str, client_id: str) -> float:
    """The largest throttle time librdkafka reports for one 256 KiB produce (0: not throttled)."""
    from confluent_kafka import Producer

    throttles: list[float] = []
    errors: list = []
    p = Producer({**conf, "client.id": client_id, "acks": "1", "linger.ms": 0, "message.timeout.ms": 20000,
                  "error_cb": errors.append, "throttle_cb": lambda ev: throttles.append(ev.throttle_time)})
    p.produce(topic, b"q" * BATCH, partition=0, on_delivery=lambda err, _m: err and errors.append(err))
    left = p.flush(30)
    p.poll(0.5)  # a throttle event queued just after the delivery report
    assert left == 0 and not errors, f"{conf.get('sasl.username')}/{client_id}: {left} undelivered, errors {errors}"
    return max(throttles, default=0.0) * 1000  # ThrottleEvent.throttle_time is in seconds


def sasl(secure: SecureBroker, user: str) -> dict:
    return secure.confluent("SASL_PLAINTEXT", user=user, mechanism="SCRAM-SHA-512")


def test_user_quota_throttles_the_scram_user_only(secure):
    b, topic = secure.broker.bootstrap, make_topic(secure.broker, 1, "userq")
    # (alice, client-id exempt) first, then (alice): by the time alice is throttled both are in force
    assert alter_quotas(b, [({"user": "alice", "client-id": "exempt"}, {"producer_byte_rate": 100 * BATCH})]) \
        == [(0, None)]
    kafka_configs(b, "--alter", "--add-config", f"producer_byte_rate={SLOW_RATE}",
                  "--entity-type", "users", "--entity-name", "alice")
    assert f"producer_byte_rate={SLOW_RATE}" in kafka_configs(b, "--describe", "--entity-type", "users",
                                                              "--entity-name", "alice")
    # the broker applies it once its metadata has it (at once on Flotilla; Apache via its metadata log)
    wait_for("alice's producer throttled by her user quota",
             lambda: produce_throttle_ms(sasl(secure, "alice"), topic, "app"), timeout=60, interval=1)
    # the same client-id as another user: not throttled (the quota is alice's, not the client-id's)
    assert produce_throttle_ms(sasl(secure, "bob"), topic, "app") == 0
    # (user, client-id) comes before (user) in Kafka's precedence: a generous pair quota wins
    assert produce_throttle_ms(sasl(secure, "alice"), topic, "exempt") == 0
