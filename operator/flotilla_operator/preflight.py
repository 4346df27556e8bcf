"""Check a rendered server.properties with the broker's own parser before any broker sees it.

The CRD schema cannot know every broker key and its type; the broker does (`broker.config`, which
ships in the same image). An unknown key or a bad value found here stops the roll before it
starts: the running brokers keep their configuration and the KafkaCluster reports the problem,
instead of a broker crash-looping halfway through a rolling update.
"""

from __future__ import annotations

# Per-pod keys the broker gets as --override; any valid value will do for the check.
_POD_OVERRIDES = {"node.id": "0", "advertised.listeners": "PLAINTEXT://broker-0.example.svc:9092"}


def check_server_properties(text: str) -> str | None:
    """None if the broker would accept `text` (plus its per-pod overrides), else the broker's message."""
    try:
        from broker.config import ConfigError, parse_config, parse_properties
    except ImportError:  # pragma: no cover - an operator-only install: the brokers will tell
        return None
    try:
        raw = parse_properties(text)
        raw.update(_POD_OVERRIDES)
        parse_config(raw)
    except ConfigError as exc:
        return str(exc)
    return None
