"""Where a request's time goes, stage by stage, as Kafka's RequestMetrics splits it.

    total = queue + local + remote + response queue + send

- queue (Kafka's RequestQueueTimeMs): from the frame read to the handler's start (parsing, the
  authorizer session). Kafka hands a request from its network thread to a handler thread here;
  a request waiting for the event loop is not seen yet (see `loop_lag`).
- local (LocalTimeMs): the handler's own work, the append included, without the waits below.
- remote (RemoteTimeMs): parked in a purgatory (replica/purgatory.py) until the event that
  completes it: for an acks=all produce, until the last needed follower's fetch moves the high
  watermark; for a long-poll fetch, until an append or max_wait.
- response queue (ResponseQueueTimeMs): from that event until the request's task runs again, and
  from the handler's end until its answer starts out (the event loop busy with others).
- send (ResponseSendTimeMs): writing the answer to the socket until it is drained.

`RequestStages` is made per request by the dispatcher and observed once the answer is sent
(`Response.on_sent`), or at once for a request that gets no answer (acks=0).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from broker.replica.purgatory import ParkedTime

STAGES = ("queue", "local", "remote", "response_queue", "send", "total")


@dataclass(frozen=True, slots=True)
class StageHistograms:
    """One API's histogram children, one per stage (broker/server/metrics.py makes them)."""

    queue: Any
    local: Any
    remote: Any
    response_queue: Any
    send: Any
    total: Any


class RequestStages:
    """The timestamps of one request (perf_counter_ns) and the split of its time."""

    __slots__ = ("histograms", "received_ns", "started_ns", "ended_ns", "parked")

    def __init__(self, histograms: StageHistograms | None, received_ns: int) -> None:
        self.histograms = histograms
        self.received_ns = received_ns
        self.started_ns = received_ns
        self.ended_ns = received_ns
        self.parked = ParkedTime()

    def handler_started(self) -> None:
        self.started_ns = time.perf_counter_ns()

    def handler_ended(self) -> None:
        self.ended_ns = time.perf_counter_ns()

    def split(self, send_started_ns: int, sent_ns: int) -> dict[str, int]:
        """{stage: nanoseconds}; the stages add up to the total."""
        handler = max(0, self.ended_ns - self.started_ns)
        remote = min(self.parked.remote_ns, handler)
        resume = min(self.parked.resume_ns, handler - remote)
        return {
            "queue": max(0, self.started_ns - self.received_ns),
            "local": handler - remote - resume,
            "remote": remote,
            "response_queue": resume + max(0, send_started_ns - self.ended_ns),
            "send": max(0, sent_ns - send_started_ns),
            "total": max(0, sent_ns - self.received_ns),
        }

    def sent(self, send_started_ns: int, sent_ns: int) -> None:
        """The answer is on the wire: observe every stage."""
        h = self.histograms
        if h is None:
            return
        for stage, ns in self.split(send_started_ns, sent_ns).items():
            getattr(h, stage).observe(ns / 1e9)

    def unanswered(self) -> None:
        """A request without an answer (acks=0 produce): it ends with its handler."""
        self.sent(self.ended_ns, self.ended_ns)
