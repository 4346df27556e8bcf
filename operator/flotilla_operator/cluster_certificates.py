"""Reads and writes the Secrets of a KafkaCluster's certificates (what to write: builders/certificates.py).

Run by every reconcile of a cluster with operator-served TLS listeners (and so by the periodic
resync, which is what renews a certificate that nears its expiry), before the StatefulSet: a broker
never starts without its certificate. A KafkaUser with `authentication: tls` gets its certificate
from the clients CA read here.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from . import pki
from .builders import certificates as certs
from .builders.common import Owner, foreign
from .models import KafkaClusterSpec


class CertificateError(Exception):
    """The certificates could not be read or written; the message names the Secret and why."""


async def ensure_cluster_certificates(kube: Any, owner: Owner, spec: KafkaClusterSpec, *, replicas: int,
                                      now: dt.datetime | None = None,
                                      external_addresses: dict[int, tuple[str, ...]] | None = None
                                      ) -> certs.CertificatePlan:
    """Issue what is missing or due and return the plan (its generation goes on the pod template);
    `external_addresses`: each broker's load balancer addresses its certificate must name."""
    from .apply import ApiError

    if not certs.managed_tls(spec):
        return certs.CertificatePlan()
    try:
        existing = {n: await kube.get("Secret", owner.namespace, n) for n in certs.secret_names(owner.name)}
    except ApiError as exc:
        raise CertificateError(f"reading the certificate Secrets: {exc.reason}") from None
    for secret in existing.values():
        why = foreign(secret, owner)
        if why:
            raise CertificateError(why)
    plan = certs.plan_certificates(owner, spec, replicas=replicas, existing=existing,
                                   now=now or dt.datetime.now(dt.timezone.utc), external_addresses=external_addresses)
    for secret in plan.secrets:  # in order: a CA is stored before anything it signed
        name = secret["metadata"]["name"]
        held = existing.get(name)
        try:
            # Created once, then compare-and-set against what was read: two operators (an upgrade's
            # old and new pod) can never store two different CAs. The operator may not patch Secrets.
            if held is None:
                written = await kube.create(secret)
            else:
                meta = {**secret["metadata"], "resourceVersion": held["metadata"]["resourceVersion"]}
                written = await kube.replace({**secret, "metadata": meta})
        except ApiError as exc:
            if exc.status == 409:
                written = None
            else:
                raise CertificateError(f"writing Secret {name}: {exc.reason}") from None
        if written is None:
            raise CertificateError(f"Secret {name} changed while being written; reading it again")
    return plan


async def clients_ca(kube: Any, namespace: str, cluster: str) -> tuple[pki.KeyPair, str] | None:
    """The cluster's clients CA and its cluster CA bundle (what a user trusts the brokers with),
    None until the cluster's reconcile has made them."""
    ca = certs.decoded(await kube.get("Secret", namespace, certs.clients_ca_name(cluster)))
    bundle = certs.decoded(await kube.get("Secret", namespace, certs.cluster_ca_cert_name(cluster)))
    if not (ca.get(certs.CA_KEY) and ca.get(certs.CA_FILE) and bundle.get(certs.CA_FILE)):
        return None
    return pki.KeyPair(ca[certs.CA_KEY], ca[certs.CA_FILE]), bundle[certs.CA_FILE]
