"""RecordDeletion (KIP-107): an asyncio task per resource (schedules.py, started and stopped by its
watch events; a kopf daemon would put a finalizer on each) runs the deletion once per generation,
or every spec.interval: it resolves the policy (builders/record_deletion.py) and calls DeleteRecords
(clients/record_admin.py); failures back off; deleting the resource stops the task and deletes
nothing."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

import kopf

from .. import events as ev
from .. import metrics
from ..annotations import paused
from ..api.common import parse_spec
from ..api.record_deletion import RECORD_DELETION, RecordDeletionSpec
from ..builders import record_deletion as rd
from ..clients import record_admin
from ..clients.kube import Kube
from ..schedules import Schedule, Schedules
from ..status import is_paused, paused_status, resumed_status, same_status
from .common import cluster_admin, emit, log

RD_POLL_S = 1.0  # how often a waiting schedule looks at its (live) body for a new generation


def record_deletion_seen(memo: kopf.Memo, namespace: str, name: str, body: dict[str, Any], deleted: bool) -> None:
    """Start or feed the resource's schedule with its latest body; on deletion stop it (after its
    current run: nothing needs doing in Kafka) and forget its metrics."""
    schedules: Schedules = memo["rd_schedules"]
    key = (namespace, name)
    if deleted or body.get("metadata", {}).get("deletionTimestamp"):
        schedules.gone(key)
        metrics.forget_record_deletion(namespace, name)
        memo.setdefault("rd_failures", {}).pop(key, None)
        return
    schedules.seen(key, body, lambda s: _record_deletion_schedule(memo, namespace, name, s))


@dataclass
class _DeletionSchedule:
    """A schedule's memory between runs (the status written may not have come back yet)."""

    generation: int | None = None
    due: datetime | None = None
    paused: bool | None = None


async def run_record_deletion(memo: kopf.Memo, namespace: str, name: str, now: datetime) -> datetime | None:
    """One attempt: read the latest object, delete what its policy names, write the status.
    Returns when the next attempt is due (None: not until the spec changes)."""
    kube: Kube = memo["kube"]
    with metrics.observe(RECORD_DELETION.kind):
        body = await kube.get(RECORD_DELETION.kind, namespace, name)
        if body is None or body["metadata"].get("deletionTimestamp"):
            return None
        gen = int(body["metadata"].get("generation") or 1)
        previous = body.get("status") or {}
        if paused(body["metadata"]):
            status = paused_status(previous, generation=gen, now=now)
            if not same_status(previous, status):
                await kube.patch_status(RECORD_DELETION.kind, namespace, name, status)
            await emit(kube, body, ev.pause_events(previous, status))
            return None  # the daemon notices the annotation's removal
        spec, policy, interval = None, None, None
        try:
            spec = parse_spec(RECORD_DELETION, dict(body.get("spec") or {}))
            assert isinstance(spec, RecordDeletionSpec)
            policy = rd.policy_summary(spec)
            interval = rd.interval_of(spec)
        except ValueError as exc:
            error = rd.PlanError("InvalidSpec", str(exc), retry=False)
        except rd.PlanError as exc:
            error = exc
        else:
            error = None
        result, ran = record_admin.RunResult(), False
        if error is None:
            bootstrap, auth, why = await cluster_admin(memo, namespace, spec.cluster_ref.name, require_ready=True)
            if bootstrap is None:
                error = rd.PlanError("ClusterNotReady", why)
            else:
                result = await asyncio.to_thread(record_admin.run, bootstrap, spec, now, auth)
                error, ran = result.error, True
        failures: dict[tuple[str, str], int] = memo.setdefault("rd_failures", {})
        key = (namespace, name)
        if error is None:
            failures.pop(key, None)
            next_time = None if interval is None else now + interval
        elif error.retry:
            failures[key] = failures.get(key, 0) + 1
            next_time = now + rd.backoff(failures[key], interval)
        else:
            next_time = None
        status = rd.run_status(previous=previous, generation=gen, policy=policy, now=now, ran=ran,
                               rows=result.rows, deleted=result.deleted, error=error, next_time=next_time)
        await kube.patch_status(RECORD_DELETION.kind, namespace, name, status)
        await emit(kube, body, ev.pause_events(previous, status) + ev.deletion_events(
            previous, status, ran=ran, deleted=result.deleted, topic=getattr(spec, "topic", None)))
        if result.deleted:
            metrics.RECORDS_DELETED.labels(namespace, name).inc(result.deleted)
        if error is None:
            metrics.DELETION_LAST_SUCCESS.labels(namespace, name).set(now.timestamp())
        log.info("RecordDeletion %s/%s: %s", namespace, name, status["conditions"][0]["message"])
        return next_time


async def _resume_record_deletion(memo: kopf.Memo, namespace: str, name: str) -> None:
    """The pause annotation is gone: drop ReconciliationPaused now (the next run may be far off)."""
    kube: Kube = memo["kube"]
    fresh = await kube.get(RECORD_DELETION.kind, namespace, name)
    previous = (fresh or {}).get("status") or {}
    if fresh is None or not is_paused(previous):
        return
    status = resumed_status(previous)
    await kube.patch_status(RECORD_DELETION.kind, namespace, name, status)
    await emit(kube, fresh, ev.pause_events(previous, status))


async def _record_deletion_schedule(memo: kopf.Memo, namespace: str, name: str, schedule: Schedule) -> None:
    """Run when a generation is new (or its last run failed), then every interval; wait otherwise.
    schedule.body is the latest watched object: a spec change is noticed within RD_POLL_S."""
    state = _DeletionSchedule()
    key = (namespace, name)
    failures: dict[tuple[str, str], int] = memo.setdefault("rd_failures", {})
    while not schedule.stopped.is_set():
        now = datetime.now(timezone.utc)
        body = schedule.body
        gen = int(body.get("metadata", {}).get("generation") or 1)
        hold = paused(body.get("metadata"))
        flipped = hold != state.paused
        if flipped and state.paused:
            # Resumed: the paused condition goes now; runs are due as the stored status says.
            state.generation = None
            await _resume_record_deletion(memo, namespace, name)
        state.paused = hold
        if state.generation != gen:
            fresh = await memo["kube"].get(RECORD_DELETION.kind, namespace, name)
            status = (fresh or {}).get("status") or {}
            try:
                spec = parse_spec(RECORD_DELETION, dict((fresh or {}).get("spec") or {}))
                interval = rd.interval_of(spec)  # type: ignore[arg-type]
                # First look at this generation: the stored status says whether it already ran.
                first = state.generation is None
                state.due = rd.next_run(interval=interval, generation=gen, status=status, now=now) if first else now
            except (ValueError, rd.PlanError):
                state.due = now  # the run reports the invalid spec, once
            state.generation = gen
        if flipped and hold:
            state.due = now  # one run writes the paused status (and runs nothing)
        if state.due is not None and state.due <= now:
            try:
                state.due = await run_record_deletion(memo, namespace, name, now)
            except Exception as exc:  # an API hiccup: try again after the backoff
                failures[key] = failures.get(key, 0) + 1
                log.warning("RecordDeletion %s/%s: %s", namespace, name, exc)
                state.due = now + rd.backoff(failures[key], None)
            continue
        wait = RD_POLL_S if state.due is None else min(RD_POLL_S, (state.due - now).total_seconds())
        try:
            await asyncio.wait_for(schedule.stopped.wait(), max(0.05, wait))
        except asyncio.TimeoutError:
            pass
