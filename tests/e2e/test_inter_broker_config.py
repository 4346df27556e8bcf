"""A broker refuses to start when its inter-broker listener settings break Kafka's rules, naming
the keys; `--kafka-target=apache` checks the same settings against Apache Kafka 4.1 (its
KafkaConfig refuses them at start or when the storage is formatted).

    pytest tests/e2e/test_inter_broker_config.py [--kafka-target=apache]
"""

from __future__ import annotations

import pytest

from flotilla.testenv.brokers.broker_process import BrokerStartError, FlotillaBroker, free_port

pytestmark = pytest.mark.timeout(180)

CASES = {
    "both keys": ({"inter.broker.listener.name": "PLAINTEXT", "security.inter.broker.protocol": "PLAINTEXT"},
                  ["inter.broker.listener.name", "security.inter.broker.protocol"]),
    "not in the protocol map": ({"inter.broker.listener.name": "ELSEWHERE"},
                                ["ELSEWHERE", "inter.broker.listener.name", "listener.security.protocol.map"]),
    "not advertised": ({"inter.broker.listener.name": "INTERNAL", "advertised.listeners": "PLAINTEXT://{plain}"},
                       ["inter.broker.listener.name", "advertised.listeners"]),
    "mechanism not enabled": ({"inter.broker.listener.name": "INTERNAL", "internal.protocol": "SASL_PLAINTEXT",
                               "sasl.enabled.mechanisms": "SCRAM-SHA-512"},
                              ["sasl.mechanism.inter.broker.protocol", "sasl.enabled.mechanisms"]),
}


@pytest.mark.parametrize("case", list(CASES))
def test_inter_broker_misconfiguration_is_refused_at_start(case, kafka_target, tmp_path):
    settings, named = CASES[case]
    settings = dict(settings)
    port, internal = free_port(), free_port()
    protocol = settings.pop("internal.protocol", "PLAINTEXT")
    listeners = f"PLAINTEXT://127.0.0.1:{port},INTERNAL://127.0.0.1:{internal}"
    base = {"listener.security.protocol.map": f"PLAINTEXT:PLAINTEXT,INTERNAL:{protocol}",
            "advertised.listeners": listeners}
    base.update({k: v.format(plain=f"127.0.0.1:{port}") for k, v in settings.items()})
    if kafka_target == "apache":
        from flotilla.testenv.brokers.apache_kafka import ApacheKafka, KafkaSetupError

        controller = free_port()
        base["listeners"] = f"{listeners},CONTROLLER://127.0.0.1:{controller}"
        base["listener.security.protocol.map"] += ",CONTROLLER:PLAINTEXT"
        broker = ApacheKafka(tmp_path, port=port, controller_port=controller, overrides=base)
        errors: tuple[type[BaseException], ...] = (BrokerStartError, KafkaSetupError)
    else:
        base["listeners"] = listeners
        broker = FlotillaBroker(tmp_path, port=port, overrides=base)
        errors = (BrokerStartError,)
    try:
        with pytest.raises(errors) as refused:
            broker.start()
    finally:
        broker.close()
    message = str(refused.value)
    # The refusal itself, not the config dump Kafka logs first (which names every key).
    refusal = next((line for line in message.splitlines()
                    if "configuration error:" in line or "Exception:" in line), None)
    assert refusal is not None, f"{case}: no refusal in:\n{message[-3000:]}"
    for key in named:
        assert key in refusal, f"{case}: {key!r} not named in the refusal: {refusal}"
