"""The events the generator writes: JSON clicks and purchases, keyed by user, with event times.

Everything here is a pure function of (seed, index), so a run can be reproduced and a test can
say which events were written, which were malformed, and what the aggregates must be, without
reading anything back. Event times come from a simulated clock (`step_ms` per event, with up to
`disorder_ms` of lateness), not from the wall clock: windows and watermarks then behave the same
however fast or slow the machine is.

Wire format of a valid event (the record key is the user id):

    {"event_id": "e-000042", "user_id": "u-007", "type": "purchase",
     "product_id": "p-03", "quantity": 2, "ts": 1767225602100}

`ts` is milliseconds since the epoch (UTC); `quantity` is present and positive for purchases only.
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass

from pipeline.catalog import PRODUCTS

# 2026-01-01T00:00:00Z: the simulated clock starts here unless told otherwise.
DEFAULT_START_MS = 1_767_225_600_000
USERS = 50

# Each malformed kind, and what is wrong with it (the dead-letter reason says the same in its words).
MALFORMED_KINDS = {
    "truncated-json": "the JSON text is cut off",
    "not-utf8": "the value is not UTF-8 text",
    "missing-ts": "the event time field is missing",
    "unknown-type": "the event type is neither click nor purchase",
    "bad-quantity": "a purchase with quantity 0",
    "unknown-product": "a product id not in the catalogue",
    "wrong-type": "the event time is a string, not a number",
    "null-value": "the record has no value at all",
}


@dataclass(frozen=True)
class GeneratorSettings:
    seed: int = 1
    start_ms: int = DEFAULT_START_MS
    step_ms: int = 50  # simulated time between consecutive events
    disorder_ms: int = 3000  # an event's time is up to this much before its position's time
    malformed_every: int = 0  # every n-th event (by a seeded draw, 1 in n on average) is malformed; 0: none
    purchase_ratio: float = 0.3


@dataclass(frozen=True)
class Event:
    index: int
    key: bytes
    value: bytes | None
    malformed: str | None  # kind from MALFORMED_KINDS, or None for a valid event
    # The fields of a valid event, for computing expectations without parsing the value again.
    user_id: str = ""
    type: str = ""
    product_id: str = ""
    quantity: int | None = None
    ts: int = 0


def make_event(settings: GeneratorSettings, index: int) -> Event:
    """Event number `index` of the stream that `settings` describes."""
    rng = random.Random(f"{settings.seed}:{index}")
    user_id = f"u-{rng.randrange(USERS):03d}"
    product = rng.choice(PRODUCTS)
    kind = "purchase" if rng.random() < settings.purchase_ratio else "click"
    quantity = rng.randint(1, 5) if kind == "purchase" else None
    ts = settings.start_ms + index * settings.step_ms - rng.randrange(settings.disorder_ms + 1)
    body: dict[str, object] = {
        "event_id": f"e-{index:06d}",
        "user_id": user_id,
        "type": kind,
        "product_id": product.product_id,
    }
    if quantity is not None:
        body["quantity"] = quantity
    body["ts"] = ts
    key = user_id.encode()

    malformed = None
    if settings.malformed_every and rng.randrange(settings.malformed_every) == 0:
        malformed = sorted(MALFORMED_KINDS)[rng.randrange(len(MALFORMED_KINDS))]
        return Event(index, key, _corrupt(malformed, body), malformed)
    return Event(index, key, json.dumps(body).encode(), None, user_id, kind, product.product_id, quantity, ts)


def _corrupt(kind: str, body: dict[str, object]) -> bytes | None:
    if kind == "truncated-json":
        text = json.dumps(body)
        return text[: len(text) // 2].encode()
    if kind == "not-utf8":
        return b"\xff\xfe" + json.dumps(body).encode("utf-16-le")
    if kind == "missing-ts":
        return json.dumps({k: v for k, v in body.items() if k != "ts"}).encode()
    if kind == "unknown-type":
        return json.dumps({**body, "type": "refund"}).encode()
    if kind == "bad-quantity":
        return json.dumps({**body, "type": "purchase", "quantity": 0}).encode()
    if kind == "unknown-product":
        return json.dumps({**body, "product_id": "p-999"}).encode()
    if kind == "wrong-type":
        return json.dumps({**body, "ts": "yesterday"}).encode()
    if kind == "null-value":
        return None
    raise ValueError(f"unknown malformed kind {kind!r}")


def make_events(settings: GeneratorSettings, first: int, count: int) -> list[Event]:
    return [make_event(settings, i) for i in range(first, first + count)]
