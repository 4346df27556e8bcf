"""Why a KafkaCluster's brokers are not running, read from their pods and claims. Pure: no I/O.

`diagnose` turns the broker pods and PersistentVolumeClaims (as the API returns them) into a list
of `PodProblem`s, the causes a user would otherwise dig out of `kubectl describe pod`:

- ImagePullFailed: a container waits in ErrImagePull, ImagePullBackOff, InvalidImageName or
  ErrImageNeverPull; names the image and the kubelet's message;
- Unschedulable: the pod's PodScheduled condition is False with reason Unschedulable; carries the
  scheduler's message ("0/1 nodes are available: 1 Insufficient cpu. ...");
- ClaimPending: a broker's claim has been Pending for CLAIM_GRACE_S or more (with
  WaitForFirstConsumer a claim is Pending until its pod is scheduled, so a fresh one is no
  problem) while its pod is not running;
- CrashLoop: a container waits in CrashLoopBackOff; names the last exit code and reason and the
  last line the container wrote (its termination message, else the log tail the caller read:
  `needs_log_tail` says for which pods that is worth a read).

status.py puts them into the Ready and Degraded conditions; events.py raises a Warning Event for
each one that appears. Like Strimzi's pod-level conditions, but computed by the operator from the
objects it already lists rather than from the kubelet's Events.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any, Iterable, Mapping

from .common import parse_time

IMAGE_PULL_FAILED = "ImagePullFailed"
UNSCHEDULABLE = "Unschedulable"
CLAIM_PENDING = "ClaimPending"
CRASH_LOOP = "CrashLoop"
#: In the order they are reported: what blocks a pod earliest first.
REASONS = (UNSCHEDULABLE, CLAIM_PENDING, IMAGE_PULL_FAILED, CRASH_LOOP)

IMAGE_PULL_WAITING = frozenset({"ErrImagePull", "ImagePullBackOff", "InvalidImageName", "ErrImageNeverPull"})
CRASH_LOOP_WAITING = "CrashLoopBackOff"
CLAIM_GRACE_S = 60.0
MESSAGE_LIMIT = 300  # of each kubelet or scheduler message quoted, and of a log line


@dataclass(frozen=True)
class PodProblem:
    reason: str  # one of REASONS
    pod: str  # the pod's name (a claim's pod for ClaimPending)
    message: str

    @property
    def key(self) -> tuple[str, str]:
        """What identifies the problem across runs (the message may change: restart counts)."""
        return self.reason, self.pod


def _clip(text: str | None) -> str:
    text = " ".join((text or "").split())
    return text if len(text) <= MESSAGE_LIMIT else text[:MESSAGE_LIMIT - 3] + "..."


def _last_line(text: str | None) -> str:
    lines = [line for line in (text or "").splitlines() if line.strip()]
    return _clip(lines[-1]) if lines else ""


def _container_statuses(pod: Mapping[str, Any]) -> list[dict[str, Any]]:
    status = pod.get("status") or {}
    return list(status.get("initContainerStatuses") or []) + list(status.get("containerStatuses") or [])


def _spec_image(pod: Mapping[str, Any], container: str) -> str | None:
    spec = pod.get("spec") or {}
    for c in list(spec.get("initContainers") or []) + list(spec.get("containers") or []):
        if c.get("name") == container:
            return c.get("image")
    return None


def _name(obj: Mapping[str, Any]) -> str:
    return str((obj.get("metadata") or {}).get("name") or "")


def _running(pod: Mapping[str, Any] | None) -> bool:
    return bool(pod) and ((pod or {}).get("status") or {}).get("phase") == "Running"


def unschedulable(pod: Mapping[str, Any]) -> PodProblem | None:
    for c in (pod.get("status") or {}).get("conditions") or ():
        if c.get("type") == "PodScheduled" and c.get("status") == "False" and c.get("reason") == "Unschedulable":
            return PodProblem(UNSCHEDULABLE, _name(pod), f"pod {_name(pod)} cannot be scheduled: "
                              f"{_clip(c.get('message')) or 'the scheduler gave no reason'}")
    return None


def image_pull_failures(pod: Mapping[str, Any]) -> list[PodProblem]:
    out = []
    for cs in _container_statuses(pod):
        waiting = (cs.get("state") or {}).get("waiting") or {}
        if waiting.get("reason") in IMAGE_PULL_WAITING:
            # The spec's image: the status may hold a resolved or empty one while nothing was pulled.
            image = _spec_image(pod, cs.get("name", "")) or cs.get("image") or "(unknown image)"
            detail = _clip(waiting.get("message"))
            out.append(PodProblem(IMAGE_PULL_FAILED, _name(pod), (
                f"pod {_name(pod)}: image {image} cannot be pulled ({waiting['reason']}"
                + (f": {detail})" if detail else ")"))))
    return out


def _crash_looping(pod: Mapping[str, Any]) -> list[dict[str, Any]]:
    return [cs for cs in _container_statuses(pod)
            if ((cs.get("state") or {}).get("waiting") or {}).get("reason") == CRASH_LOOP_WAITING]


def needs_log_tail(pod: Mapping[str, Any]) -> str | None:
    """The container of `pod` whose last log line would complete a CrashLoop problem (it crash-loops
    and its last termination left no message), or None: the caller reads the previous container's
    log only then."""
    for cs in _crash_looping(pod):
        terminated = (cs.get("lastState") or {}).get("terminated") or {}
        if not _last_line(terminated.get("message")):
            return cs.get("name")
    return None


def crash_loops(pod: Mapping[str, Any], log_tail: str | None = None) -> list[PodProblem]:
    out = []
    for cs in _crash_looping(pod):
        terminated = (cs.get("lastState") or {}).get("terminated") or {}
        code = terminated.get("exitCode")
        restarts = int(cs.get("restartCount") or 0)
        message = (f"pod {_name(pod)}: container {cs.get('name')} is crash-looping "
                   f"(restarted {restarts} time{'' if restarts == 1 else 's'})")
        if code is not None:
            message += f", last exit code {code}"
            if terminated.get("reason"):
                message += f" ({terminated['reason']})"
        line = _last_line(terminated.get("message")) or _last_line(log_tail)
        if line:
            message += f"; last output: {line}"
        out.append(PodProblem(CRASH_LOOP, _name(pod), message))
    return out


def claim_pending(claim: Mapping[str, Any], pod: Mapping[str, Any] | None, now: datetime) -> PodProblem | None:
    """A claim Pending for CLAIM_GRACE_S or more while its pod does not run."""
    if ((claim.get("status") or {}).get("phase")) != "Pending" or _running(pod):
        return None
    created = parse_time((claim.get("metadata") or {}).get("creationTimestamp"))
    if created is None or (now - created).total_seconds() < CLAIM_GRACE_S:
        return None
    spec = claim.get("spec") or {}
    size = ((spec.get("resources") or {}).get("requests") or {}).get("storage")
    klass = spec.get("storageClassName")
    detail = f"storage class {klass}" if klass else "the default storage class"
    if size:
        detail += f", {size}"
    pod_name = _name(pod) if pod else _claim_pod(_name(claim))
    return PodProblem(CLAIM_PENDING, pod_name, (
        f"PersistentVolumeClaim {_name(claim)} of pod {pod_name} is Pending ({detail}): "
        "no volume is bound to it (kubectl describe pvc says why)"))


def _claim_pod(claim: str) -> str:
    """A StatefulSet claim's pod: `<template>-<pod>` (data-fleet-broker-0 -> fleet-broker-0)."""
    return claim.split("-", 1)[1] if "-" in claim else claim


def diagnose(pods: Iterable[Mapping[str, Any]], claims: Iterable[Mapping[str, Any]], *, now: datetime,
             log_tails: Mapping[str, str] | None = None) -> list[PodProblem]:
    """Every problem of the broker `pods` and their `claims`, in REASONS order then by pod name.
    A deleted pod (deletionTimestamp) counts for nothing: its successor is what matters.
    `log_tails`: pod name -> the end of its crash-looping container's previous log."""
    live = [p for p in pods if not (p.get("metadata") or {}).get("deletionTimestamp")]
    by_name = {_name(p): p for p in live}
    found: list[PodProblem] = []
    for pod in live:
        problem = unschedulable(pod)
        if problem:
            found.append(problem)
        found += image_pull_failures(pod)
        found += crash_loops(pod, (log_tails or {}).get(_name(pod)))
    for claim in claims:
        problem = claim_pending(claim, by_name.get(_claim_pod(_name(claim))), now)
        if problem:
            found.append(problem)
    return sorted(found, key=lambda p: (REASONS.index(p.reason), p.pod))


def summary(problems: list[PodProblem], limit: int = 3) -> str:
    """The problems as one condition message: the first `limit`, then how many more."""
    text = "; ".join(p.message for p in problems[:limit])
    if len(problems) > limit:
        text += f"; and {len(problems) - limit} more"
    return text
