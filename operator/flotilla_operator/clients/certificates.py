"""Reads and writes the Secrets of a KafkaCluster's certificates (what to write: builders/certificates.py).

Run by every reconcile of a cluster with operator-served TLS listeners (and so by the periodic
resync, which is what renews a certificate that nears its expiry), before the StatefulSet: a broker
never starts without its certificate. A KafkaUser with `authentication: tls` gets its certificate
from the clients CA read here.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from .. import pki
from ..api.kafka_cluster import KafkaClusterSpec
from ..builders import cert_manager as cm
from ..builders import certificates as certs
from ..builders.common import Owner, foreign, statefulset_name


class CertificateError(Exception):
    """The certificates could not be read or written; the message names the Secret and why."""


class CertificatesPending(CertificateError):
    """cert-manager has not issued every broker's certificate yet (retried)."""


async def ensure_cluster_certificates(kube: Any, owner: Owner, spec: KafkaClusterSpec, *, replicas: int,
                                      now: dt.datetime | None = None,
                                      external_addresses: dict[int, tuple[str, ...]] | None = None
                                      ) -> certs.CertificatePlan:
    """Issue what is missing or due and return the plan (its generation goes on the pod template);
    `external_addresses`: each broker's load balancer addresses its certificate must name."""
    from .kube import ApiError

    if not certs.managed_tls(spec):
        return certs.CertificatePlan()
    names = certs.secret_names(owner.name)
    if spec.certificates.issuer_ref is not None:  # no CA of the operator's: the public bundles and the brokers'
        names = (certs.cluster_ca_cert_name(owner.name), certs.clients_ca_cert_name(owner.name),
                 certs.broker_certs_name(owner.name))  # the operator's own certificate is cert-manager's
    try:
        existing = {n: await kube.get("Secret", owner.namespace, n) for n in names}
    except ApiError as exc:
        raise CertificateError(f"reading the certificate Secrets: {exc.reason}") from None
    for secret in existing.values():
        why = foreign(secret, owner)
        if why:
            raise CertificateError(why)
    if spec.certificates.issuer_ref is not None:
        issued = await _request_from_cert_manager(kube, owner, spec, replicas, existing, external_addresses or {})
        plan = certs.plan_issued_certificates(owner, spec, replicas=replicas, existing=existing, issued=issued)
    else:
        plan = certs.plan_certificates(owner, spec, replicas=replicas, existing=existing,
                                       now=now or dt.datetime.now(dt.timezone.utc),
                                       external_addresses=external_addresses)
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
    if plan.pending:
        ref = spec.certificates.issuer_ref
        assert ref is not None
        raise CertificatesPending(
            f"waiting for cert-manager ({ref.kind} {ref.name}) to issue Certificate "
            + ", ".join(cm.broker_certificate_name(owner, o) for o in plan.pending))
    return plan


async def _request_from_cert_manager(kube: Any, owner: Owner, spec: KafkaClusterSpec, replicas: int,
                                     existing: dict[str, Any], external: dict[int, tuple[str, ...]]
                                     ) -> dict[int, dict[str, str]]:
    """Apply every broker's cert-manager Certificate (its names as they are now) and read what
    cert-manager has written so far, by ordinal."""
    from .kube import ApiError

    held = certs.decoded(existing.get(certs.broker_certs_name(owner.name)))
    ordinals = certs.broker_ordinals(held, replicas)
    issued = {}
    for ordinal in sorted(ordinals):
        name = cm.broker_certificate_name(owner, ordinal)
        try:
            current = await kube.get("Certificate", owner.namespace, name)  # None: absent, or no such API
        except ApiError as exc:
            raise CertificateError(f"reading Certificate {name}: {exc.reason}") from None
        why = foreign(current, owner)
        if why:
            raise CertificateError(why)
        desired = cm.build_broker_certificate(
            owner, spec.certificates, ordinal, f"{statefulset_name(owner)}-{ordinal}",
            certs.broker_dns_names(owner, ordinal) + tuple(external.get(ordinal, ())))
        try:
            await kube.apply(desired)
            secret = await kube.get("Secret", owner.namespace, cm.broker_certificate_secret(owner, ordinal))
        except ApiError as exc:
            if exc.status == 404:
                raise CertificateError("spec.certificates.issuerRef: cert-manager is not installed "
                                       "(the API server serves no certificates.cert-manager.io)") from None
            raise CertificateError(f"applying Certificate {name}: {exc.reason}") from None
        issued[ordinal] = certs.decoded(secret)
    if certs.fleet_certificates(spec):
        try:
            await kube.apply(cm.build_operator_certificate(owner, spec.certificates))
        except ApiError as exc:
            raise CertificateError(f"applying the operator's Certificate: {exc.reason}") from None
    return issued


async def clients_ca(kube: Any, namespace: str, cluster: str) -> tuple[pki.KeyPair, str] | None:
    """The cluster's clients CA and its cluster CA bundle (what a user trusts the brokers with),
    None until the cluster's reconcile has made them."""
    ca = certs.decoded(await kube.get("Secret", namespace, certs.clients_ca_name(cluster)))
    bundle = certs.decoded(await kube.get("Secret", namespace, certs.cluster_ca_cert_name(cluster)))
    if not (ca.get(certs.CA_KEY) and ca.get(certs.CA_FILE) and bundle.get(certs.CA_FILE)):
        return None
    return pki.KeyPair(ca[certs.CA_KEY], ca[certs.CA_FILE]), bundle[certs.CA_FILE]


CERTIFICATE_NAME_ANNOTATION = "cert-manager.io/certificate-name"  # on the Secrets cert-manager writes


async def user_certificate_from_cert_manager(kube: Any, body: dict[str, Any], settings: Any,
                                             secret_name: str) -> tuple[str | None, str]:
    """A tls KafkaUser of a cluster with an issuerRef: its cert-manager Certificate applied, then
    (None, what) once cert-manager has written the user's Secret (tls.crt, tls.key, ca.crt), or
    (the Ready reason, why): Conflict (a Certificate or Secret of that name is someone else's),
    Pending (retried)."""
    from .kube import ApiError

    meta = body["metadata"]
    namespace, name, uid = meta["namespace"], meta["name"], meta["uid"]
    current = await kube.get("Certificate", namespace, name)
    if current is not None and not any(r.get("uid") == uid for r in current["metadata"].get("ownerReferences") or []):
        return "Conflict", f"Certificate {name} exists and is not this KafkaUser's; it is left alone"
    secret = await kube.get("Secret", namespace, secret_name)
    if secret is not None:
        ours = any(r.get("uid") == uid for r in secret["metadata"].get("ownerReferences") or [])
        written = (secret["metadata"].get("annotations") or {}).get(CERTIFICATE_NAME_ANNOTATION) == name
        if not (ours or written and current is not None):
            return "Conflict", f"Secret {secret_name} exists and is not this KafkaUser's; it is left alone"
    try:
        await kube.apply(cm.build_user_certificate(body, settings, secret_name))
    except ApiError as exc:
        if exc.status == 404:
            return "Pending", "cert-manager is not installed (the API server serves no certificates.cert-manager.io)"
        raise
    data = certs.decoded(secret)
    if data.get("tls.crt") and data.get("tls.key"):
        if secret is not None and not ours:
            # Owned by the KafkaUser too, so that deleting the user deletes it (cert-manager does not).
            refs = [*(secret["metadata"].get("ownerReferences") or []), cm.user_owner_reference(body)]
            await kube.replace({**secret, "metadata": {**secret["metadata"], "ownerReferences": refs}})
            return None, "certificate issued by cert-manager"
        return None, ""
    ref = settings.issuer_ref
    return "Pending", f"waiting for cert-manager ({ref.kind} {ref.name}) to issue Certificate {name}"
