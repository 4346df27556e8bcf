"""The annotations a user sets on our resources to steer the operator (Strimzi's conventions,
under our own prefix). Pure: they read metadata and say what it asks for.

- `flotilla.io/pause-reconciliation: "true"` on a KafkaCluster, ClientQuota or RecordDeletion:
  the operator changes nothing for it (no apply, no quota call, no deletion run) and reports a
  ReconciliationPaused condition until the annotation is removed or set to anything else.
- `flotilla.io/manual-rolling-update: "true"` on a KafkaCluster: restart every broker, one at a
  time through the usual roll gate; the operator removes the annotation once the restart is
  under way (the new pod template is applied).
"""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any, Mapping

PAUSE_RECONCILIATION = "flotilla.io/pause-reconciliation"
MANUAL_ROLLING_UPDATE = "flotilla.io/manual-rolling-update"
#: On the brokers' pod template: a new value restarts every broker (a manual rolling update).
RESTART_TOKEN = "flotilla.io/restarted-at"


def _flag(meta: Mapping[str, Any] | None, key: str) -> bool:
    value = ((meta or {}).get("annotations") or {}).get(key)
    return isinstance(value, str) and value.strip().lower() == "true"


def paused(meta: Mapping[str, Any] | None) -> bool:
    """True when the resource asks the operator to leave it alone."""
    return _flag(meta, PAUSE_RECONCILIATION)


def rolling_update_requested(meta: Mapping[str, Any] | None) -> bool:
    return _flag(meta, MANUAL_ROLLING_UPDATE)


def live_restart_token(statefulset: Mapping[str, Any] | None) -> str | None:
    """The restart token the brokers' StatefulSet carries now: kept on every apply, so that a
    manual rolling update happens once, not again on the next reconcile."""
    template = ((statefulset or {}).get("spec") or {}).get("template") or {}
    return ((template.get("metadata") or {}).get("annotations") or {}).get(RESTART_TOKEN)


def restart_token(meta: Mapping[str, Any] | None, statefulset: Mapping[str, Any] | None,
                  now: datetime) -> tuple[str | None, bool]:
    """(the token to render, whether this is a new restart): a new token when the annotation
    asks for a restart, the live one otherwise."""
    if rolling_update_requested(meta):
        return now.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"), True
    return live_restart_token(statefulset), False


def acknowledge_patch() -> dict[str, Any]:
    """The merge patch that removes the manual-rolling-update annotation once acted upon."""
    return {"metadata": {"annotations": {MANUAL_ROLLING_UPDATE: None}}}
