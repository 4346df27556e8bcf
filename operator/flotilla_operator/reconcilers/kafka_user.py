"""KafkaUser: a Secret with the password (or a certificate from the cluster's clients CA), the
SCRAM credential, ACLs diffed against DescribeAcls, and the user entity's quotas (builders/
kafka_user.py decides); one run at a time per user, on the latest object. Removed from the cluster
when its deletion is seen (no finalizer, as ClientQuota), or by the orphan pass when it was not
(reconcilers/orphans.py: each user is recorded before its first apply). On a cluster whose bootstrap listener is
SASL every admin request authenticates as the operator's own user (clients/credentials.py)."""

from __future__ import annotations

import asyncio
from datetime import datetime, timezone
from typing import Any

import kopf

from .. import events as ev
from .. import metrics
from ..annotations import paused
from ..api.common import parse_spec
from ..api.kafka_cluster import KAFKA_CLUSTER, Certificates
from ..api.kafka_user import KAFKA_USER
from ..builders import certificates as certs
from ..builders import client_quota as cq
from ..builders import kafka_user as ku
from ..builders import orphans as orph
from ..builders.common import OPERATOR_USER
from ..clients import kafka_admin
from ..clients.certificates import clients_ca, user_certificate_from_cert_manager
from ..clients.kube import Kube
from ..status import condition, paused_status, same_status, stalled_condition
from . import orphans
from .client_quota import quota_owner
from .common import cluster_admin, emit, while_unreachable


async def _user_status(memo: kopf.Memo, body: dict[str, Any], ready: bool, reason: str, message: str,
                       extra: dict[str, Any] | None = None) -> None:
    meta = body["metadata"]
    previous = dict(body.get("status") or {})
    gen = int(meta.get("generation") or 1)
    now = datetime.now(timezone.utc)
    status: dict[str, Any] = {"observedGeneration": gen, "username": meta["name"], "conditions": [
        condition("Ready", ready, reason, message, generation=gen, now=now, previous=previous.get("conditions")),
        stalled_condition(None if ready else reason, message, generation=gen, now=now,
                          previous=previous.get("conditions")),
    ]}
    status.update(extra or {})
    if not same_status(previous, status):
        await memo["kube"].patch_status(KAFKA_USER.kind, meta["namespace"], meta["name"], status)
    await emit(memo["kube"], body, ev.user_events(previous, status))


async def _user_secret(kube: Kube, body: dict[str, Any]) -> tuple[str | None, bool, str]:
    """(password, new?, "") from the user's Secret, created once with a random password (or
    rewritten from a TLS user's); or (None, False, why) when a Secret of that name is not this
    KafkaUser's."""
    meta = body["metadata"]
    current = await kube.get("Secret", meta["namespace"], ku.secret_name(body))
    why = ku.foreign_secret(current, body)
    if why:
        return None, False, why
    if current is not None and ku.password_of(current):
        return ku.password_of(current), False, ""
    if current is not None:  # the user authenticated with a certificate until now
        return ku.password_of(await kube.replace({**ku.build_secret(body, ku.new_password()),
                                                 "metadata": {**current["metadata"]}})), True, ""
    created = await kube.create(ku.build_secret(body, ku.new_password()))
    if created is None:  # someone created it in between: read it again next time
        return None, False, f"Secret {ku.secret_name(body)} appeared while being created; retrying"
    return ku.password_of(created), True, ""


async def _user_certificate(kube: Kube, body: dict[str, Any]) -> tuple[str | None, str]:
    """(None, what was done) once the user's Secret holds a certificate from the cluster's clients
    CA that is not due for renewal (issued or renewed here); (the Ready reason, why) when it
    cannot: Conflict (a Secret of that name is not this KafkaUser's), Pending (retried)."""
    meta, cluster = body["metadata"], body["spec"]["clusterRef"]["name"]
    settings = _cluster_certificate_settings(await kube.get(KAFKA_CLUSTER.kind, meta["namespace"], cluster))
    if settings.issuer_ref is not None:
        return await user_certificate_from_cert_manager(kube, body, settings, ku.secret_name(body))
    current = await kube.get("Secret", meta["namespace"], ku.secret_name(body))
    why = ku.foreign_secret(current, body)
    if why:
        return "Conflict", why
    authority = await clients_ca(kube, meta["namespace"], cluster)
    if authority is None:
        return "Pending", (f"KafkaCluster {cluster} has no clients CA yet (it issues one for a listener with protocol SSL "
                       "and authentication tls)")
    ca, bundle = authority
    now = datetime.now(timezone.utc)
    held = certs.decoded(current)
    if not certs.user_certificate_due(held, ca, meta["name"], now=now, renew_before_days=settings.renew_before_days):
        if held.get("ca.crt") == bundle:
            return None, ""
        files = {**held, "ca.crt": bundle}  # the cluster CA was renewed: trust the new bundle
        what = "CA bundle updated"
    else:
        files = certs.user_certificate_files(ca, bundle, meta["name"], now=now, days=settings.validity_days)
        what = "certificate renewed" if held.get("user.crt") else "certificate issued"
    secret = ku.build_tls_secret(body, {k: v for k, v in files.items() if k != "username"})
    if current is None:
        if await kube.create(secret) is None:
            return "Pending", f"Secret {ku.secret_name(body)} appeared while being created; retrying"
    else:
        await kube.replace({**secret, "metadata": {**current["metadata"]}})
    return None, what


def _cluster_certificate_settings(kafka_cluster: dict[str, Any] | None) -> Certificates:
    try:
        return Certificates.model_validate(((kafka_cluster or {}).get("spec") or {}).get("certificates") or {})
    except ValueError:
        return Certificates()


async def reconcile_kafka_user(memo: kopf.Memo, namespace: str, name: str) -> None:
    """One run at a time per KafkaUser, on the latest object: the resync's listing can never apply
    an ACL an edit has just removed."""
    locks: dict[tuple, asyncio.Lock] = memo["locks"]
    async with locks.setdefault((KAFKA_USER.kind, namespace, name), asyncio.Lock()):
        body = await memo["kube"].get(KAFKA_USER.kind, namespace, name)
        if body is not None and not body["metadata"].get("deletionTimestamp"):
            await _reconcile_kafka_user(memo, body)


async def _reconcile_kafka_user(memo: kopf.Memo, body: dict[str, Any]) -> None:
    """Secret, SCRAM credential, ACLs (diffed against DescribeAcls) and quotas, then the status."""
    meta, spec = body["metadata"], dict(body.get("spec") or {})
    kube: Kube = memo["kube"]
    if paused(meta):
        previous = dict(body.get("status") or {})
        status = paused_status(previous, generation=int(meta.get("generation") or 1))
        if not same_status(previous, status):
            await kube.patch_status(KAFKA_USER.kind, meta["namespace"], meta["name"], status)
        await emit(kube, body, ev.pause_events(previous, status))
        return
    with metrics.observe(KAFKA_USER.kind):
        try:
            parse_spec(KAFKA_USER, spec)
            if meta["name"] == OPERATOR_USER:  # the CRD refuses it too
                raise ValueError(f"metadata.name: {OPERATOR_USER} is the operator's own user")
        except ValueError as exc:
            await _user_status(memo, body, False, "Invalid", str(exc))
            return
        user, previous = meta["name"], dict(body.get("status") or {})
        bootstrap, auth, why = await cluster_admin(memo, meta["namespace"], spec["clusterRef"]["name"],
                                                   require_ready=False)
        if not bootstrap:
            await _user_status(memo, body, False, "Pending", why)
            return
        tls = ku.authentication(body) == "tls"
        if tls:
            refused, what = await _user_certificate(kube, body)
            if refused:
                await _user_status(memo, body, False, refused, what)
                return
        else:
            password, new, why = await _user_secret(kube, body)
            if password is None:
                await _user_status(memo, body, False, "Conflict", why)
                return
        extra: dict[str, Any] = {"secret": ku.secret_name(body)}
        cluster = spec["clusterRef"]["name"]
        owner = await quota_owner(kube, KAFKA_USER.kind, body)
        conflict = None if owner == (KAFKA_USER.kind, user) else (
            f"quotas not applied: {owner[0]} {owner[1]} already sets the quota of user {user} in cluster "
            f"{cluster} (the oldest resource owns an entity)")
        ops = None if conflict else ku.quota_ops(spec, previously_managed=bool(previous.get("quotas")))
        try:  # recorded before anything is applied: the orphan pass removes it if the user goes unseen
            await orphans.record(kube, meta["namespace"], cluster, orph.user_entry(body, quota=ops is not None))
        except orphans.RecordError as exc:
            await _user_status(memo, body, False, "Pending", str(exc), extra)
            return
        try:
            held_mechanisms = await kafka_admin.scram_mechanisms(bootstrap, user, auth)
            if tls:
                if ku.MECHANISM_CODE in held_mechanisms:  # a SCRAM user until now: its password goes
                    await kafka_admin.alter_scram_credential(bootstrap, user, ku.MECHANISM_CODE, None, auth)
            elif new or ku.MECHANISM_CODE not in held_mechanisms:
                await kafka_admin.alter_scram_credential(bootstrap, user, ku.MECHANISM_CODE,
                                                         ku.salted_upsertion(password), auth)
            desired = ku.desired_acls(user, spec)
            create, delete = ku.acl_changes(desired, map(ku.AclBinding._make,
                                                          await kafka_admin.describe_acls(bootstrap, ku.principal(user), auth)))
            await kafka_admin.delete_acls(bootstrap, delete, auth)
            await kafka_admin.create_acls(bootstrap, create, auth)
            if ops is not None:
                await kafka_admin.alter_client_quota(bootstrap, {"user": user}, ops, auth)
        except kafka_admin.AdminError as exc:
            await _user_status(memo, body, False, "Unreachable", str(exc), extra)
            return
        extra.update({"acls": len(desired), "quotas": ku.applied_quotas(ops), "quotaConflict": conflict})
        changes = f"; {len(create)} ACL(s) created, {len(delete)} deleted" if create or delete else ""
        kind = "TLS" if tls else "SCRAM-SHA-512"
        await _user_status(memo, body, True, "Applied",
                           f"{kind} user {user} with {len(desired)} ACL(s){changes}" +
                           (f"; {conflict}" if conflict else ""), extra)


async def remove_kafka_user(memo: kopf.Memo, body: kopf.Body) -> None:
    """A deleted KafkaUser's credential, ACLs and quotas (if it owned them), removed from its
    cluster, then dropped from the cluster's record; retried while the cluster is briefly
    unreachable, then the last AdminError (or ApiError) is raised and the orphan pass
    (reconcilers/orphans.py) retries. The garbage collector deletes its Secret."""
    metrics.forget_resource(KAFKA_USER.kind, body["metadata"]["namespace"], body["metadata"]["name"])
    meta, spec = body["metadata"], dict(body.get("spec") or {})
    user = meta["name"]
    try:
        parse_spec(KAFKA_USER, spec)
    except ValueError:
        return
    bootstrap, auth, _ = await cluster_admin(memo, meta["namespace"], spec["clusterRef"]["name"], require_ready=False)
    if not bootstrap:
        return  # no cluster to hold it

    async def remove() -> list[tuple]:
        await kafka_admin.alter_scram_credential(bootstrap, user, ku.MECHANISM_CODE, None, auth)
        held = await kafka_admin.describe_acls(bootstrap, ku.principal(user), auth)
        await kafka_admin.delete_acls(bootstrap, held, auth)
        if (spec.get("quotas") or (body.get("status") or {}).get("quotas")) and await quota_owner(
                memo["kube"], KAFKA_USER.kind, dict(body)) == (KAFKA_USER.kind, user):
            await kafka_admin.alter_client_quota(bootstrap, {"user": user}, cq.removal_ops(), auth)
        return held

    held = await while_unreachable(remove)
    await orphans.forget(memo["kube"], meta["namespace"], spec["clusterRef"]["name"], meta["uid"])
    await emit(memo["kube"], dict(body), [ev.Event(ev.NORMAL, ev.USER_REMOVED,
                                                   f"credential, {len(held)} ACL(s) and quotas of {user} removed")])
