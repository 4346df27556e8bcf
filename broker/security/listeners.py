"""What each listener asks of a connection, from the broker config: TLS or not, SASL or not, which
mechanisms against which credentials. Built once at start-up; a bad setting stops start-up with a
ConfigError naming the listener and the key, before any socket is bound.
"""

from __future__ import annotations

import ssl
from dataclasses import dataclass, field

from broker.config import BrokerConfig, ConfigError
from broker.security import jaas
from broker.security.credentials import PlainUsers, ScramCredentials
from broker.security.mechanisms import MECHANISMS
from broker.security.principal import PrincipalMapper


@dataclass
class ListenerSecurity:
    name: str
    protocol: str  # PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL
    ssl_context: ssl.SSLContext | None = None
    mechanisms: tuple[str, ...] = ()
    plain_users: PlainUsers = field(default_factory=lambda: PlainUsers({}))
    scram: ScramCredentials = field(default_factory=ScramCredentials)
    principal_mapper: PrincipalMapper = field(default_factory=PrincipalMapper)
    max_receive_size: int = 524288  # frames before authentication (sasl.server.max.receive.size)
    failed_auth_delay_s: float = 0.1
    max_reauth_s: float = 0.0  # connections.max.reauth.ms (KIP-368); 0: no re-authentication

    @property
    def tls(self) -> bool:
        return self.ssl_context is not None

    @property
    def sasl(self) -> bool:
        return self.protocol.startswith("SASL_")


def _plain_users(config: BrokerConfig, listener: str) -> PlainUsers:
    entry = config.listener_value(listener, "plain.sasl.jaas.config")
    if entry is None:
        raise ConfigError(f"listener {listener} offers PLAIN but 'listener.name.{listener.lower()}.plain.sasl.jaas.config' "
                          f"is not set (PlainLoginModule with user_<name>=\"<password>\" entries)")
    if entry.login_module != jaas.PLAIN_LOGIN_MODULE:
        raise ConfigError(f"'listener.name.{listener.lower()}.plain.sasl.jaas.config' must use {jaas.PLAIN_LOGIN_MODULE}")
    return PlainUsers(entry.users())


def listener_security(config: BrokerConfig, scram: ScramCredentials | None = None) -> dict[str, ListenerSecurity]:
    """ListenerSecurity per listener name of `listeners`."""
    if scram is None:
        path = config["flotilla.sasl.scram.credentials.file"]
        try:
            scram = ScramCredentials.from_file(path) if path else ScramCredentials()
        except (OSError, ValueError) as e:
            raise ConfigError(f"'flotilla.sasl.scram.credentials.file': {e}") from None
    mapper = PrincipalMapper(config["ssl.principal.mapping.rules"])
    out = {}
    for listener in config.listeners:
        name, protocol = listener.name, config.protocol_of(listener.name)
        sec = ListenerSecurity(name, protocol, principal_mapper=mapper, scram=scram,
                               max_receive_size=config["sasl.server.max.receive.size"],
                               failed_auth_delay_s=config["connection.failed.authentication.delay.ms"] / 1000,
                               max_reauth_s=config["connections.max.reauth.ms"] / 1000)
        if protocol in ("SSL", "SASL_SSL"):
            from broker.security.tls import server_context

            if protocol == "SSL":
                client_auth = config.listener_value(name, "ssl.client.auth")
            else:  # KIP-684: only the listener-prefixed setting applies to SASL_SSL
                client_auth = config.values.get("listener.name", {}).get(name, {}).get("ssl.client.auth", "none")
            sec.ssl_context = server_context(lambda k, n=name: config.listener_value(n, k), f"listener {name}",
                                             client_auth)
        if sec.sasl:
            mechanisms = config.listener_value(name, "sasl.enabled.mechanisms")
            unsupported = [m for m in mechanisms if m not in MECHANISMS]
            if unsupported or not mechanisms:
                raise ConfigError(f"listener {name}: sasl.enabled.mechanisms {','.join(mechanisms)}: "
                                  f"{', '.join(unsupported) or 'none'} not served; use {', '.join(MECHANISMS)}")
            sec.mechanisms = mechanisms
            if "PLAIN" in mechanisms:
                sec.plain_users = _plain_users(config, name)
        out[name] = sec
    return out
