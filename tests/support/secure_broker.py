"""A broker (Flotilla or Apache Kafka, same settings) with one listener per security protocol, and
client settings for each (librdkafka, kafka-python, aiokafka, Java properties), for
tests/e2e/test_security.py, test_security_clients.py and the other security suites.

Listeners: PLAINTEXT (readiness checks and admin), SSL (server certificate only), MTLS (SSL with
`ssl.client.auth=required`), SASL_PLAINTEXT and SASL_SSL (PLAIN and SCRAM-SHA-512), and EXPIRED
(SSL whose server certificate has expired: clients must refuse it). The keystore
is Kafka's PEM file form (key + chain in one file) on SSL and SASL_SSL, and the
inline form (ssl.keystore.certificate.chain / ssl.keystore.key) on MTLS. SCRAM
credentials go to Flotilla as a file and to Apache Kafka through kafka-storage --add-scram.
"""

from __future__ import annotations

import contextlib
from typing import Iterator

from dataclasses import dataclass
from pathlib import Path

from flotilla.testenv.brokers.broker_process import FlotillaBroker, ServerProcess, free_port
from flotilla.testenv.brokers.tls_certs import TestPki

USERS = {"alice": "alice-secret", "bob": "bob-secret"}
PROTOCOLS = {"SSL": "SSL", "MTLS": "SSL", "SASL_PLAINTEXT": "SASL_PLAINTEXT", "SASL_SSL": "SASL_SSL", "EXPIRED": "SSL"}
TLS_LISTENERS = ("SSL", "MTLS", "SASL_SSL", "EXPIRED")
LOGIN_MODULES = {"PLAIN": "org.apache.kafka.common.security.plain.PlainLoginModule",
                 "SCRAM-SHA-256": "org.apache.kafka.common.security.scram.ScramLoginModule",
                 "SCRAM-SHA-512": "org.apache.kafka.common.security.scram.ScramLoginModule"}
PLAIN_JAAS = ("org.apache.kafka.common.security.plain.PlainLoginModule required "
              + " ".join(f'user_{u}="{p}"' for u, p in USERS.items()) + ";")
# Kafka wants a JAAS entry for every mechanism a SASL listener enables; for SCRAM it only holds
# the credentials the broker itself would use as a client (inter-broker), unused here.
SCRAM_JAAS = 'org.apache.kafka.common.security.scram.ScramLoginModule required username="alice" password="alice-secret";'


def scram_lines() -> list[str]:
    return [f"SCRAM-SHA-512=[name={u},password={p}]" for u, p in USERS.items()]


@dataclass
class SecureBroker:
    broker: ServerProcess
    ports: dict[str, int]
    pki: TestPki

    def address(self, listener: str) -> str:
        return f"127.0.0.1:{self.ports[listener]}"

    def confluent(self, listener: str, *, user: str = "alice", password: str | None = None,
                  mechanism: str = "SCRAM-SHA-512", cert: str | None = "alice") -> dict[str, str]:
        """librdkafka settings to reach `listener` (bootstrap.servers included)."""
        conf = {"bootstrap.servers": self.address(listener), "security.protocol": PROTOCOLS.get(listener, listener)}
        if listener in TLS_LISTENERS:
            conf["ssl.ca.location"] = str(self.pki.ca_file)
        if listener == "MTLS" and cert:
            conf.update({"ssl.certificate.location": str(self.pki.client_cert(cert)),
                         "ssl.key.location": str(self.pki.client_key(cert))})
        if listener.startswith("SASL"):
            conf.update({"sasl.mechanism": mechanism, "sasl.username": user,
                         "sasl.password": USERS[user] if password is None else password})
        return conf

    def kafka_python(self, listener: str, *, user: str = "alice", password: str | None = None,
                     mechanism: str = "SCRAM-SHA-512", cert: str | None = "alice") -> dict[str, object]:
        """kafka-python keyword arguments to reach `listener`."""
        kw: dict[str, object] = {"bootstrap_servers": self.address(listener),
                                 "security_protocol": PROTOCOLS.get(listener, listener)}
        if listener in TLS_LISTENERS:
            kw["ssl_cafile"] = str(self.pki.ca_file)
        if listener == "MTLS" and cert:
            kw.update(ssl_certfile=str(self.pki.client_cert(cert)), ssl_keyfile=str(self.pki.client_key(cert)))
        if listener.startswith("SASL"):
            kw.update(sasl_mechanism=mechanism, sasl_plain_username=user,
                      sasl_plain_password=USERS[user] if password is None else password)
        return kw

    def aiokafka(self, listener: str, *, user: str = "alice", password: str | None = None,
                 mechanism: str = "SCRAM-SHA-512", cert: str | None = "alice") -> dict[str, object]:
        """aiokafka keyword arguments to reach `listener` (its TLS settings are an SSLContext)."""
        from aiokafka.helpers import create_ssl_context

        kw = self.kafka_python(listener, user=user, password=password, mechanism=mechanism, cert=cert)
        files = {k: kw.pop(k) for k in ("ssl_cafile", "ssl_certfile", "ssl_keyfile") if k in kw}
        if files:
            kw["ssl_context"] = create_ssl_context(cafile=files["ssl_cafile"], certfile=files.get("ssl_certfile"),
                                                   keyfile=files.get("ssl_keyfile"))
        return kw

    def java(self, listener: str, *, user: str = "alice", password: str | None = None,
             mechanism: str = "SCRAM-SHA-512", cert: str | None = "alice") -> str:
        """Java client properties (a --config file's text) to reach `listener`; the bootstrap
        address is given separately."""
        props = {"security.protocol": PROTOCOLS.get(listener, listener)}
        if listener in TLS_LISTENERS:
            props.update({"ssl.truststore.type": "PEM", "ssl.truststore.location": str(self.pki.ca_file)})
        if listener == "MTLS" and cert:
            props.update({"ssl.keystore.type": "PEM", "ssl.keystore.location": str(self.pki.client_keystore(cert))})
        if listener.startswith("SASL"):
            secret = USERS[user] if password is None else password
            props.update({"sasl.mechanism": mechanism, "sasl.jaas.config":
                          f'{LOGIN_MODULES.get(mechanism, LOGIN_MODULES["PLAIN"])} required username="{user}" password="{secret}";'})
        return "".join(f"{k}={v}\n" for k, v in props.items())


def inline(pem: bytes, target: str) -> str:
    """PEM text for an inline ssl.* value: Flotilla gets it through --override with its line
    breaks; Apache Kafka reads a properties file, where a line break is written `\\n`."""
    text = pem.decode().strip()
    return text.replace("\n", "\\n") if target == "apache" else text


def make_secure_broker(target: str, workdir: Path, pki: TestPki, extra: dict[str, str] | None = None) -> SecureBroker:
    """An unstarted broker of the chosen kind with the five listeners (and `extra` settings)."""
    port = free_port()
    ports = {name: free_port() for name in PROTOCOLS}
    listeners = ",".join([f"PLAINTEXT://127.0.0.1:{port}"] + [f"{n}://127.0.0.1:{p}" for n, p in ports.items()])
    protocol_map = ",".join(["PLAINTEXT:PLAINTEXT"] + [f"{n}:{p}" for n, p in PROTOCOLS.items()])
    settings = {
        "advertised.listeners": listeners,
        "inter.broker.listener.name": "PLAINTEXT",
        "ssl.keystore.type": "PEM",
        "ssl.truststore.type": "PEM",
        "ssl.truststore.location": str(pki.ca_file),
        "listener.name.mtls.ssl.client.auth": "required",
        "listener.name.mtls.ssl.keystore.certificate.chain": inline(pki.broker.cert_pem() + pki.ca.cert_pem(), target),
        "listener.name.mtls.ssl.keystore.key": inline(pki.broker.key_pem(), target),
        "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-512",
        **(extra or {}),
    }
    for listener in ("ssl", "sasl_ssl"):
        # Unencrypted: Java's PEM reader cannot decrypt PBES2 keys (cryptography's only PKCS#8
        # encryption); the encrypted form is covered by tests/unit/broker/security/test_tls.py.
        settings[f"listener.name.{listener}.ssl.keystore.location"] = str(pki.broker_keystore)
    settings["listener.name.expired.ssl.keystore.location"] = str(pki.broker_keystore_expired)
    for listener in ("sasl_plaintext", "sasl_ssl"):
        settings[f"listener.name.{listener}.plain.sasl.jaas.config"] = PLAIN_JAAS
        settings[f"listener.name.{listener}.scram-sha-512.sasl.jaas.config"] = SCRAM_JAAS
    if target == "apache":
        from flotilla.testenv.brokers.apache_kafka import ApacheKafka

        controller = free_port()
        settings["listeners"] = f"{listeners},CONTROLLER://127.0.0.1:{controller}"
        settings["listener.security.protocol.map"] = f"{protocol_map},CONTROLLER:PLAINTEXT"
        broker: ServerProcess = ApacheKafka(workdir, port=port, controller_port=controller, overrides=settings,
                                            scram_credentials=scram_lines())
    else:
        credentials = workdir / "scram-credentials"
        workdir.mkdir(parents=True, exist_ok=True)
        credentials.write_text("".join(line + "\n" for line in scram_lines()))
        settings.update({"listeners": listeners, "listener.security.protocol.map": protocol_map,
                         "flotilla.sasl.scram.credentials.file": str(credentials)})
        broker = FlotillaBroker(workdir, port=port, overrides=settings)
    return SecureBroker(broker, ports, pki)


@contextlib.contextmanager
def running_secure_broker(target: str, base: Path) -> Iterator[SecureBroker]:
    """A started secure broker of `target` under `base` (its own test PKI), closed on exit: the
    module fixture of every suite that talks TLS and SASL to one broker."""
    from flotilla.testenv.brokers.tls_certs import make_pki

    sb = make_secure_broker(target, base / "broker", make_pki(base / "pki"))
    sb.broker.start()
    try:
        yield sb
    finally:
        sb.broker.close()
