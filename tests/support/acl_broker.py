"""A broker (Flotilla or Apache Kafka, same settings) with Kafka's StandardAuthorizer on, for
tests/e2e/test_acls.py.

Two listeners: PLAINTEXT, whose clients are User:ANONYMOUS, a super user (the tests' admin, the
readiness checks, and the brokers' own inter-broker and controller traffic, as a Kafka broker on a
PLAINTEXT inter-broker listener needs), and SASL_PLAINTEXT with PLAIN users: alice, bob and carol
(rights only from ACLs; carol is the one given rights on the cluster) and admin (a super user). `allow.everyone.if.no.acl.found` is false, Kafka's default.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from flotilla.testenv.brokers.broker_process import FlotillaBroker, ServerProcess, free_port

USERS = {"alice": "alice-secret", "bob": "bob-secret", "carol": "carol-secret", "admin": "admin-secret"}
PLAIN_JAAS = ("org.apache.kafka.common.security.plain.PlainLoginModule required "
              + " ".join(f'user_{u}="{p}"' for u, p in USERS.items()) + ";")
AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"


@dataclass
class AclBroker:
    broker: ServerProcess
    sasl_port: int

    @property
    def admin_bootstrap(self) -> str:
        """The PLAINTEXT listener: User:ANONYMOUS, a super user."""
        return self.broker.bootstrap

    def sasl(self, user: str) -> dict[str, str]:
        """librdkafka settings for `user` over SASL_PLAINTEXT/PLAIN."""
        return {"bootstrap.servers": f"127.0.0.1:{self.sasl_port}", "security.protocol": "SASL_PLAINTEXT",
                "sasl.mechanism": "PLAIN", "sasl.username": user, "sasl.password": USERS[user]}

    def kafka_python(self, user: str) -> dict:
        """kafka-python settings for `user` over SASL_PLAINTEXT/PLAIN."""
        return {"bootstrap_servers": f"127.0.0.1:{self.sasl_port}", "security_protocol": "SASL_PLAINTEXT",
                "sasl_mechanism": "PLAIN", "sasl_plain_username": user, "sasl_plain_password": USERS[user],
                "request_timeout_ms": 30000}

    def java_client_properties(self, user: str) -> str:
        """A Java client's --command-config for `user` over SASL_PLAINTEXT/PLAIN."""
        return ("security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\n"
                "sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required "
                f'username="{user}" password="{USERS[user]}";\n')


def make_acl_broker(target: str, workdir: Path) -> AclBroker:
    """An unstarted broker of the chosen kind."""
    port, sasl_port = free_port(), free_port()
    listeners = f"PLAINTEXT://127.0.0.1:{port},SASL_PLAINTEXT://127.0.0.1:{sasl_port}"
    settings = {
        "advertised.listeners": listeners,
        "inter.broker.listener.name": "PLAINTEXT",
        "sasl.enabled.mechanisms": "PLAIN",
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": PLAIN_JAAS,
        "authorizer.class.name": AUTHORIZER,
        "super.users": "User:ANONYMOUS;User:admin",
        "allow.everyone.if.no.acl.found": "false",
        "auto.create.topics.enable": "false",
    }
    protocol_map = "PLAINTEXT:PLAINTEXT,SASL_PLAINTEXT:SASL_PLAINTEXT"
    if target == "apache":
        from flotilla.testenv.brokers.apache_kafka import ApacheKafka

        controller = free_port()
        settings["listeners"] = f"{listeners},CONTROLLER://127.0.0.1:{controller}"
        settings["listener.security.protocol.map"] = f"{protocol_map},CONTROLLER:PLAINTEXT"
        broker: ServerProcess = ApacheKafka(workdir, port=port, controller_port=controller, overrides=settings)
    else:
        settings.update({"listeners": listeners, "listener.security.protocol.map": protocol_map})
        broker = FlotillaBroker(workdir, port=port, overrides=settings)
    return AclBroker(broker, sasl_port)
