"""How this broker dials its peers as a client: the inter-broker listener's TLS and SASL, from the
broker's config, as Kafka's inter-broker client side reads them.

TLS (SSL, SASL_SSL): the peer's certificate must chain to the listener's truststore
(`listener.name.<l>.ssl.truststore.*`, else `ssl.truststore.*`; none: the system's CAs), its name
checked unless `ssl.endpoint.identification.algorithm` is empty; the listener's keystore is
presented as the client certificate (mTLS peers need it). SASL (SASL_PLAINTEXT, SASL_SSL):
`sasl.mechanism.inter.broker.protocol` with the `username=`/`password=` options of
`listener.name.<l>.<mechanism>.sasl.jaas.config`, Kafka's convention for a broker's own credentials.
Built once at start-up; what is missing stops start-up with a ConfigError naming the key.
"""

from __future__ import annotations

import ssl
from dataclasses import dataclass, field

from broker.config import INTER_BROKER_LISTENER, INTER_BROKER_UNAUTHENTICATED, BrokerConfig, ConfigError


@dataclass(frozen=True)
class InterBrokerClient:
    listener: str
    protocol: str = "PLAINTEXT"
    ssl_context: ssl.SSLContext | None = field(default=None, repr=False)
    mechanism: str = ""
    username: str = ""
    password: str = field(default="", repr=False)

    @property
    def sasl(self) -> bool:
        return self.protocol.startswith("SASL_")


PLAINTEXT_CLIENT = InterBrokerClient("PLAINTEXT")


def _client_context(config: BrokerConfig, listener: str) -> ssl.SSLContext:
    from broker.security import tls

    def get(key: str):
        return config.listener_value(listener, key)

    where = f"inter-broker listener {listener}"
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    versions = [v.strip() for v in get("ssl.enabled.protocols").split(",") if v.strip()]
    try:
        ctx.minimum_version = min(tls.TLS_VERSIONS[v] for v in versions)
        ctx.maximum_version = max(tls.TLS_VERSIONS[v] for v in versions)
    except (KeyError, ValueError):
        raise ConfigError(f"{where}: ssl.enabled.protocols {versions} must name TLSv1.2 and/or TLSv1.3") from None
    ctx.check_hostname = bool(get("ssl.endpoint.identification.algorithm"))
    try:
        if not tls.load_truststore(ctx, get, where):
            ctx.load_default_certs()
        tls.load_keystore(ctx, get, where)
    except (OSError, ValueError) as e:
        raise ConfigError(f"{where}: cannot load TLS keys or certificates: {e}") from None
    return ctx


def _credentials(config: BrokerConfig, listener: str, mechanism: str) -> tuple[str, str]:
    from broker.security import jaas

    key = f"listener.name.{listener.lower()}.{mechanism.lower()}.sasl.jaas.config"
    entry = config.values.get("listener.name", {}).get(listener, {}).get(f"{mechanism.lower()}.sasl.jaas.config")
    module = jaas.PLAIN_LOGIN_MODULE if mechanism == "PLAIN" else jaas.SCRAM_LOGIN_MODULE
    if entry is None or not entry.options.get("username") or "password" not in entry.options:
        raise ConfigError(f"inter-broker listener {listener} authenticates with {mechanism}: '{key}' must hold the "
                          f"broker's own credentials ({module} required username=\"...\" password=\"...\";)")
    if entry.login_module != module:
        raise ConfigError(f"'{key}' must use {module}")
    return entry.options["username"], entry.options["password"]


def inter_broker_client(config: BrokerConfig) -> InterBrokerClient:
    listener = config[INTER_BROKER_LISTENER]  # as broker/config.py resolved it (Kafka's rules)
    protocol = config.protocol_of(listener)
    context = _client_context(config, listener) if protocol in ("SSL", "SASL_SSL") else None
    if not protocol.startswith("SASL_") or config.values.get(INTER_BROKER_UNAUTHENTICATED):
        return InterBrokerClient(listener, protocol.replace("SASL_", "") if protocol.startswith("SASL_") else protocol,
                                 context)
    mechanism = config["sasl.mechanism.inter.broker.protocol"]
    username, password = _credentials(config, listener, mechanism)
    return InterBrokerClient(listener, protocol, context, mechanism, username, password)
