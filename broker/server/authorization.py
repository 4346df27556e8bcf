"""Turning the authorizer on (`authorizer.class.name`): the ACL store, the authorizer that follows
it, and a warning when the brokers' own requests would be refused.

Brokers send each other follower Fetches, WriteTxnMarkers and AddPartitionsToTxn verifications
over the inter-broker listener; Kafka authorizes those as CLUSTER_ACTION on the cluster, which a
broker has as a super user or through an ACL. On a SASL inter-broker listener a broker's principal
is User:<its username>; on PLAINTEXT (and SSL without client certificates) User:ANONYMOUS, as a
Kafka broker's: `super.users` must name it (or an ACL allow it CLUSTER_ACTION), exactly as Kafka needs.
"""

from __future__ import annotations

import logging
from pathlib import Path

from broker.metadata.acls import AclStore
from broker.security.authorizer import StandardAuthorizer
from broker.replica.follower_identity import inter_broker_listener
from broker.server.metadata_backends import open_acl_store

log = logging.getLogger(__name__)

INTER_BROKER_PRINCIPAL = "User:ANONYMOUS"


def open_authorizer(config, metadata_store, directory: Path) -> tuple[AclStore | None, StandardAuthorizer | None]:
    """(None, None) unless authorizer.class.name is set."""
    if not config["authorizer.class.name"]:
        return None, None
    acls = open_acl_store(metadata_store, directory)
    authorizer = StandardAuthorizer(config["super.users"], config["allow.everyone.if.no.acl.found"])
    acls.subscribe(authorizer.update)
    authorizer.update(acls.acls)
    from broker.security.inter_broker_client import inter_broker_client

    client = inter_broker_client(config)
    principal = f"User:{client.username}" if client.sasl else INTER_BROKER_PRINCIPAL
    if principal not in authorizer.super_users:
        log.warning("authorizer: brokers reach each other on listener %s as %s, which is not in super.users: "
                    "follower fetches and transaction markers need an ACL allowing it CLUSTER_ACTION on the "
                    "cluster", inter_broker_listener(config), principal)
    return acls, authorizer
