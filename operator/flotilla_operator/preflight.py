"""Check a rendered server.properties with the broker's own parser before any broker sees it.

The CRD schema cannot know every broker key and its type; the broker does (`broker.config`, which
ships in the same image). An unknown key or a bad value found here stops the roll before it
starts: the running brokers keep their configuration and the KafkaCluster reports the problem,
instead of a broker crash-looping halfway through a rolling update.
"""

from __future__ import annotations

# Per-pod keys the broker gets as --override; any valid value will do for the check
# (advertised.listeners: every listener of the file, as builders/statefulset.py advertises them).
_POD_OVERRIDES = {"node.id": "0"}


def _advertised(listeners: str) -> str:
    names = [item.split("://", 1)[0].strip() for item in listeners.split(",") if "://" in item]
    return ",".join(f"{name}://broker-0.example.svc:{9092 + i}" for i, name in enumerate(names)) \
        or "PLAINTEXT://broker-0.example.svc:9092"


def check_server_properties(text: str) -> str | None:
    """None if the broker would accept `text` (plus its per-pod overrides), else the broker's message."""
    try:
        from broker.config import ConfigError, parse_config, parse_properties
    except ImportError:  # pragma: no cover - an operator-only install: the brokers will tell
        return None
    try:
        raw = parse_properties(text)
        raw.update(_POD_OVERRIDES)
        raw["advertised.listeners"] = _advertised(raw.get("listeners", ""))
        parse_config(raw)
    except ConfigError as exc:
        return str(exc)
    return None
