"""Workload: a fetcher of 10,000 idle partitions, with and without KIP-227 fetch sessions.

The fetcher is flotilla.testenv.fetch_client.SessionFetcher (kio, Fetch v17 with topic ids, as the
Java client 3.x sends): in session mode it opens a session with one full request and then sends
empty incremental requests, as the Java client does when nothing changes; in sessionless mode it
sends the whole partition list every time, as librdkafka does. Nothing is produced, so every fetch
is idle. Measured on both brokers:

- bytes on the wire of one fetch request and its response, full (sessionless) vs incremental;
- broker CPU per fetch, for back-to-back fetches (max_wait 0) in each mode;
- broker CPU per second of idle polling in a session the way consumers poll (max_wait 500 ms,
  min_bytes 1: each request waits in the broker's purgatory, watched on all 10,000 partitions),
  and, for reference, the broker's CPU per second with no fetcher at all.

Untimed fetches of each kind run first (JIT warm-up for Kafka). The case runs in a broker session
of its own (it sets max.incremental.fetch.session.cache.slots explicitly), so its 10,000
partitions never weigh on other cases.
"""

from __future__ import annotations

import time
from typing import Any

from bench.workloads.base import Case, Config, Context, Metric, Workload, register


@register
class IdleFetchSessions(Workload):
    name = "fetch-sessions"
    description = (
        "Fetch sessions (KIP-227): a kio fetcher of 10,000 idle partitions (10 topics, Fetch v17) sends "
        "full sessionless requests and, in a session, empty incremental ones; bytes per request and "
        "response, broker CPU per fetch (back to back, max_wait 0), and broker CPU per second of "
        "consumer-style idle polling in a session (max_wait 500 ms, min_bytes 1)."
    )
    order = 40
    TOPICS = 10

    def cases(self, cfg: Config) -> list[Case]:
        if cfg.smoke:
            params = {"partitions": 200, "fetches": 10, "poll_seconds": 2.0}
        else:
            params = {"partitions": 10_000, "fetches": 40, "poll_seconds": 10.0}
        n = params["partitions"]
        return [Case(self, f"fetch-sessions-idle-{n}p", f"idle fetch of {n:,} partitions, sessions vs none", params,
                     partitions=1, broker={"max.incremental.fetch.session.cache.slots": "1000"})]

    def metrics(self, case: Case) -> list[Metric]:
        return [
            Metric("incremental_bytes_pct", "idle incremental fetch, bytes as % of a full one", "%", "lower"),
            Metric("cpu_ms_per_incremental_fetch", "broker CPU per idle incremental fetch", "ms", "lower"),
            Metric("cpu_ms_per_full_fetch", "broker CPU per idle full (sessionless) fetch", "ms", "lower"),
            Metric("cpu_s_per_s_polling", "broker CPU per second of idle polling in a session", "CPU s/s", "lower"),
            Metric("full_request_bytes", "full fetch request", "bytes", "lower", primary=False),
            Metric("full_response_bytes", "full fetch response", "bytes", "lower", primary=False),
            Metric("incremental_request_bytes", "incremental fetch request", "bytes", "lower", primary=False),
            Metric("incremental_response_bytes", "incremental fetch response", "bytes", "lower", primary=False),
            Metric("polls_per_s", "idle polls answered per second (max_wait 500 ms)", "1/s", "lower", primary=False),
            Metric("idle_cpu_s_per_s", "broker CPU per second with no fetcher", "CPU s/s", "lower", primary=False),
        ]

    def available(self, case: Case, tools: bool) -> str | None:
        return None

    def run(self, ctx: Context, case: Case) -> dict[str, Any]:
        from bench.harness.targets import cpu_seconds
        from flotilla.testenv import kafka_wire
        from flotilla.testenv.fetch_client import SessionFetcher

        n, fetches, poll_s = case.params["partitions"], case.params["fetches"], case.params["poll_seconds"]
        per_topic = n // self.TOPICS
        pid = ctx.session.broker.pid
        names = [ctx.new_topic("idle", per_topic) for _ in range(self.TOPICS)]
        out: dict[str, Any] = {"partitions": per_topic * self.TOPICS, "topics": self.TOPICS}
        with kafka_wire.connect(ctx.bootstrap, timeout=60) as conn:
            ids = {t.name: t.topic_id for t in conn.metadata(names).topics}

            def fetcher(sessions: bool, max_wait_ms: int = 0) -> SessionFetcher:
                f = SessionFetcher(conn, version=17, sessions=sessions, max_wait_ms=max_wait_ms)
                for name in names:
                    f.add(ids[name], per_topic)
                return f

            self._wait_fetchable(fetcher(False))

            def measure(f: SessionFetcher, count: int) -> tuple[float, int, int]:
                """Broker CPU ms per fetch, and the bytes of the last request and response."""
                c0 = cpu_seconds(pid)
                for _ in range(count):
                    ex = f.fetch()
                    if ex.response.error_code != 0:
                        raise RuntimeError(f"fetch answered {ex.response.error_code!r}")
                return (cpu_seconds(pid) - c0) * 1000 / count, ex.request_bytes, ex.response_bytes

            full = fetcher(sessions=False)
            measure(full, max(2, fetches // 2))  # untimed
            cpu_full, out["full_request_bytes"], out["full_response_bytes"] = measure(full, fetches)

            inc = fetcher(sessions=True)
            inc.fetch()  # opens the session
            if inc.session_id == 0:
                raise RuntimeError("the broker created no fetch session")
            measure(inc, fetches)  # untimed
            cpu_inc, out["incremental_request_bytes"], out["incremental_response_bytes"] = measure(inc, fetches * 5)
            if inc.kinds.get("full") != 1:
                raise RuntimeError(f"the session was lost during the run: {inc.kinds}")
            out["cpu_ms_per_full_fetch"] = round(cpu_full, 3)
            out["cpu_ms_per_incremental_fetch"] = round(cpu_inc, 3)
            full_bytes = out["full_request_bytes"] + out["full_response_bytes"]
            inc_bytes = out["incremental_request_bytes"] + out["incremental_response_bytes"]
            out["incremental_bytes_pct"] = round(100 * inc_bytes / full_bytes, 4)

            # Consumer-style idle polling in the same session: each request long-polls 500 ms.
            inc.max_wait_ms = 500
            inc.fetch()
            c0, t0, polls = cpu_seconds(pid), time.monotonic(), 0
            while time.monotonic() - t0 < poll_s:
                inc.fetch()
                polls += 1
            elapsed = time.monotonic() - t0
            out["cpu_s_per_s_polling"] = round((cpu_seconds(pid) - c0) / elapsed, 4)
            out["polls_per_s"] = round(polls / elapsed, 2)

        # The same broker with nothing fetching, for reference (background work over 10,000 partitions).
        c0, t0 = cpu_seconds(pid), time.monotonic()
        time.sleep(poll_s)
        out["idle_cpu_s_per_s"] = round((cpu_seconds(pid) - c0) / (time.monotonic() - t0), 4)
        out["fetcher"] = "flotilla.testenv.fetch_client.SessionFetcher, Fetch v17"
        return out

    @staticmethod
    def _wait_fetchable(f, timeout: float = 120) -> None:
        """Until a full fetch answers every partition without error (Kafka's leaders settle after
        CreateTopics)."""
        deadline = time.monotonic() + timeout
        while True:
            ex = f.fetch()
            parts = ex.partitions
            bad = [k for k, p in parts.items() if p.error_code != 0]
            if ex.response.error_code == 0 and not bad and len(parts) == len(f.wanted):
                return
            if time.monotonic() > deadline:
                raise RuntimeError(f"{len(bad)} partitions still answer errors {timeout}s after creation")
            time.sleep(0.5)
