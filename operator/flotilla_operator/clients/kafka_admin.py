"""The operator's Kafka admin requests, on kio: AlterClientQuotas, DescribeClientQuotas, Metadata (to
find every broker), SCRAM credentials and ACLs, one connection per call through the broker's own
network client (broker/network/client.py: framing, headers, TLS and SASL as the brokers dial each
other).

The operator talks to its clusters the way any Kafka admin tool would (the Java AdminClient's
kafka-configs does the same requests), so what a ClientQuota sets is what `kafka-configs
--describe` shows.
"""

from __future__ import annotations

import os
import ssl
import tempfile
from dataclasses import dataclass, field
from typing import Any, Mapping

from kio.static.primitive import i8, i32

from broker.network.client import ClientError, KafkaConnection
from broker.security.inter_broker_client import InterBrokerClient

CLIENT_ID = "flotilla-operator"
TIMEOUT_S = 10.0


class AdminError(Exception):
    """The cluster could not be reached or refused a request; the message says which and why."""


@dataclass(frozen=True)
class BrokerAddress:
    node_id: int
    host: str
    port: int

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"


@dataclass(frozen=True)
class AdminAuth:
    """How the operator authenticates to one cluster (clients/credentials.py builds it): the
    listener's security protocol and, for SASL_*, SCRAM-SHA-512 as `username`; for *_SSL the CA
    certificates to trust (PEM; None: the system's). The default is PLAINTEXT, no authentication."""

    security_protocol: str = "PLAINTEXT"
    username: str = ""
    password: str = field(default="", repr=False)
    ca_pem: str | None = field(default=None, repr=False)
    mechanism: str = "SCRAM-SHA-512"
    #: On an SSL first listener: the operator's own certificate and key (PEM), presented to the brokers.
    client_cert_pem: str | None = field(default=None, repr=False)
    client_key_pem: str | None = field(default=None, repr=False)

    def ssl_context(self) -> ssl.SSLContext:
        context = ssl.create_default_context()
        if self.ca_pem:
            context.load_verify_locations(cadata=self.ca_pem)
        if self.client_cert_pem and self.client_key_pem:
            # ssl loads a key only from a file: a private one, removed once read.
            with tempfile.NamedTemporaryFile("w", suffix=".pem") as pem:
                os.chmod(pem.name, 0o600)
                pem.write(self.client_key_pem + self.client_cert_pem)
                pem.flush()
                context.load_cert_chain(pem.name)
        return context

    @property
    def sasl(self) -> bool:
        return self.security_protocol.startswith("SASL_")

    @property
    def tls(self) -> bool:
        return self.security_protocol.endswith("SSL")


PLAINTEXT = AdminAuth()


def _dial(auth: AdminAuth) -> InterBrokerClient:
    """`auth` as the broker's network client takes it (the shape of the brokers' own client side)."""
    return InterBrokerClient(listener=auth.security_protocol, protocol=auth.security_protocol,
                             ssl_context=auth.ssl_context() if auth.tls else None, mechanism=auth.mechanism,
                             username=auth.username, password=auth.password)


async def request(address: str, req: Any, timeout: float = TIMEOUT_S, auth: AdminAuth = PLAINTEXT) -> Any:
    """Send one request to host:port (after TLS and SASL as `auth` says) on a connection of its own,
    with the broker's network client; AdminError saying which broker and why when it fails."""
    host, _, port = address.rpartition(":")
    conn = KafkaConnection(host, int(port), CLIENT_ID, _dial(auth))
    try:
        await conn.connect(timeout)
        return await conn.request(req, timeout)
    except ClientError as e:
        raise AdminError(str(e)) from None
    finally:
        conn.close()


async def bootstrap_request(bootstrap: str, req: Any, auth: AdminAuth = PLAINTEXT) -> Any:
    """`request` to the first of the comma-separated bootstrap addresses that answers (as a Kafka
    client's bootstrap.servers); AdminError naming the last failure when none does."""
    error: AdminError | None = None
    for address in [a.strip() for a in bootstrap.split(",") if a.strip()]:
        try:
            return await request(address, req, auth=auth)
        except AdminError as exc:
            error = exc
    raise error or AdminError(f"no bootstrap address in {bootstrap!r}")


async def brokers(bootstrap: str, auth: AdminAuth = PLAINTEXT) -> list[BrokerAddress]:
    """Every broker of the cluster, as its Metadata answer lists them."""
    from kio.schema.metadata.v12.request import MetadataRequest

    md = await bootstrap_request(bootstrap, MetadataRequest(topics=(), allow_auto_topic_creation=False,
                                                            include_topic_authorized_operations=False), auth)
    return sorted((BrokerAddress(int(b.node_id), b.host, int(b.port)) for b in md.brokers), key=lambda b: b.node_id)


async def alter_client_quota(bootstrap: str, entity: Mapping[str, str | None], ops: Mapping[str, float | None],
                             auth: AdminAuth = PLAINTEXT) -> None:
    """Set (value) or remove (None) quota keys of one entity; AdminError with the broker's message."""
    from kio.schema.alter_client_quotas.v1.request import AlterClientQuotasRequest, EntityData, EntryData, OpData

    req = AlterClientQuotasRequest(validate_only=False, entries=(EntryData(
        entity=tuple(EntityData(entity_type=t, entity_name=n) for t, n in entity.items()),
        ops=tuple(OpData(key=k, value=0.0 if v is None else float(v), remove=v is None) for k, v in ops.items())),))
    resp = await bootstrap_request(bootstrap, req, auth)
    for e in resp.entries:
        if int(e.error_code) != 0:
            raise AdminError(f"AlterClientQuotas: error {int(e.error_code)}: {e.error_message}")


async def describe_client_quota(address: str, entity: Mapping[str, str | None],
                                auth: AdminAuth = PLAINTEXT) -> dict[str, float]:
    """The values one broker holds for exactly this entity ({} when it has none)."""
    from kio.schema.describe_client_quotas.v1.request import ComponentData, DescribeClientQuotasRequest

    req = DescribeClientQuotasRequest(strict=True, components=tuple(
        ComponentData(entity_type=t, match_type=i8(0 if n is not None else 1), match=n) for t, n in entity.items()))
    resp = await request(address, req, auth=auth)
    if int(resp.error_code) != 0:
        raise AdminError(f"DescribeClientQuotas: error {int(resp.error_code)}: {resp.error_message}")
    for entry in resp.entries or ():
        if {e.entity_type: e.entity_name for e in entry.entity} == dict(entity):
            return {v.key: float(v.value) for v in entry.values}
    return {}


# -- KafkaUser: SCRAM credentials (KIP-554) and ACLs (KIP-140) ---------------------------------

RESOURCE_NOT_FOUND = 91  # DescribeUserScramCredentials: the user has no credential


async def scram_mechanisms(bootstrap: str, user: str, auth: AdminAuth = PLAINTEXT) -> set[int]:
    """The SCRAM mechanisms (Kafka's codes) `user` has a credential for."""
    from kio.schema.describe_user_scram_credentials.v0.request import DescribeUserScramCredentialsRequest, UserName

    resp = await bootstrap_request(bootstrap, DescribeUserScramCredentialsRequest(users=(UserName(name=user),)), auth)
    if int(resp.error_code) != 0:
        raise AdminError(f"DescribeUserScramCredentials: error {int(resp.error_code)}: {resp.error_message}")
    out: set[int] = set()
    for r in resp.results:
        if int(r.error_code) not in (0, RESOURCE_NOT_FOUND):
            raise AdminError(f"DescribeUserScramCredentials {user}: error {int(r.error_code)}: {r.error_message}")
        out |= {int(c.mechanism) for c in r.credential_infos}
    return out


async def alter_scram_credential(bootstrap: str, user: str, mechanism: int,
                                 upsert: tuple[bytes, bytes, int] | None, auth: AdminAuth = PLAINTEXT) -> None:
    """Upsert (salt, salted password, iterations) or delete (None) one credential of `user`."""
    from kio.schema.alter_user_scram_credentials.v0.request import (AlterUserScramCredentialsRequest,
                                                                    ScramCredentialDeletion, ScramCredentialUpsertion)

    if upsert is None:
        req = AlterUserScramCredentialsRequest(
            deletions=(ScramCredentialDeletion(name=user, mechanism=i8(mechanism)),), upsertions=())
    else:
        salt, salted, iterations = upsert
        req = AlterUserScramCredentialsRequest(deletions=(), upsertions=(ScramCredentialUpsertion(
            name=user, mechanism=i8(mechanism), iterations=i32(iterations), salt=salt, salted_password=salted),))
    resp = await bootstrap_request(bootstrap, req, auth)
    for r in resp.results:
        if int(r.error_code) != 0 and not (upsert is None and int(r.error_code) == RESOURCE_NOT_FOUND):
            raise AdminError(f"AlterUserScramCredentials {user}: error {int(r.error_code)}: {r.error_message}")


async def describe_acls(bootstrap: str, principal: str, auth: AdminAuth = PLAINTEXT) -> list[tuple]:
    """Every ACL of `principal`: (resource type, name, pattern type, principal, host, operation,
    permission) in Kafka's codes."""
    from kio.schema.describe_acls.v3.request import DescribeAclsRequest

    # ANY (1) for the type, pattern, operation and permission: the principal is the filter.
    req = DescribeAclsRequest(resource_type_filter=i8(1), resource_name_filter=None, pattern_type_filter=i8(1),
                              principal_filter=principal, host_filter=None, operation=i8(1), permission_type=i8(1))
    resp = await bootstrap_request(bootstrap, req, auth)
    if int(resp.error_code) != 0:
        raise AdminError(f"DescribeAcls: error {int(resp.error_code)}: {resp.error_message}")
    return [(int(r.resource_type), r.resource_name, int(r.pattern_type), a.principal, a.host, int(a.operation),
             int(a.permission_type)) for r in resp.resources for a in r.acls]


async def create_acls(bootstrap: str, bindings: list[tuple], auth: AdminAuth = PLAINTEXT) -> None:
    from kio.schema.create_acls.v3.request import AclCreation, CreateAclsRequest

    if not bindings:
        return
    req = CreateAclsRequest(creations=tuple(AclCreation(
        resource_type=i8(b[0]), resource_name=b[1], resource_pattern_type=i8(b[2]), principal=b[3], host=b[4],
        operation=i8(b[5]), permission_type=i8(b[6])) for b in bindings))
    resp = await bootstrap_request(bootstrap, req, auth)
    for b, r in zip(bindings, resp.results):
        if int(r.error_code) != 0:
            raise AdminError(f"CreateAcls {b}: error {int(r.error_code)}: {r.error_message}")


async def delete_acls(bootstrap: str, bindings: list[tuple], auth: AdminAuth = PLAINTEXT) -> None:
    """Delete exactly these bindings (each filter matches one)."""
    from kio.schema.delete_acls.v3.request import DeleteAclsFilter, DeleteAclsRequest

    if not bindings:
        return
    req = DeleteAclsRequest(filters=tuple(DeleteAclsFilter(
        resource_type_filter=i8(b[0]), resource_name_filter=b[1], pattern_type_filter=i8(b[2]), principal_filter=b[3],
        host_filter=b[4], operation=i8(b[5]), permission_type=i8(b[6])) for b in bindings))
    resp = await bootstrap_request(bootstrap, req, auth)
    for b, r in zip(bindings, resp.filter_results):
        if int(r.error_code) != 0:
            raise AdminError(f"DeleteAcls {b}: error {int(r.error_code)}: {r.error_message}")
