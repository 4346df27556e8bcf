"""Workload: transactions (KIP-98) through one broker, with librdkafka's transactional producer.

- `txn-produce`: one transactional producer commits transactions of 100 records of 1 KiB as fast
  as it can (begin, 100 sends, commit_transaction, which flushes and then waits for EndTxn): what
  the coordinator's replicated state writes and the markers cost per transaction. Throughput in
  MB/s and transactions/s; the commit call's p50/p99 and the broker's CPU per GB beside them.
- `txn-latency`: transactions of 100 records of 1 KiB started at a fixed rate (the same on both
  brokers) and committed, read by a read_committed consumer in the same process: from a record's
  send to its arrival, which includes the commit and the last stable offset passing it.
"""

from __future__ import annotations

from typing import Any

from bench.workloads.base import THROUGHPUT_SECONDARY, Case, Config, Context, Metric, Workload, with_window, register

PER_TXN = 100
RECORD_SIZE = 1024
LATENCY_TXN_RATE = 10  # transactions/s offered in the latency case (1,000 records/s)


@register
class Transactions(Workload):
    name = "transactions"
    description = (
        f"Transactions (KIP-98), librdkafka: one transactional producer committing transactions of {PER_TXN} "
        f"records of 1 KiB as fast as it can; and read_committed end-to-end latency (send to a read_committed "
        f"consumer) of such transactions started at {LATENCY_TXN_RATE}/s."
    )
    order = 38

    def cases(self, cfg: Config) -> list[Case]:
        p = cfg.partitions[0]
        parts = f"{p} partition{'s' if p > 1 else ''}"
        return [
            Case(self, f"txn-produce-1KiB-p{p}-librdkafka", f"transactions of {PER_TXN} × 1 KiB, {parts}, librdkafka",
                 {"kind": "produce"}, p, client="librdkafka"),
            Case(self, f"txn-latency-1KiB-p{p}-librdkafka",
                 f"read_committed end-to-end latency, {LATENCY_TXN_RATE} transactions/s of {PER_TXN} × 1 KiB, {parts}, "
                 f"librdkafka", {"kind": "latency"}, p, client="librdkafka"),
        ]

    def metrics(self, case: Case) -> list[Metric]:
        if case.params["kind"] == "produce":
            return [Metric("mb_per_sec", "throughput", "MB/s", "higher"),
                    Metric("txn_per_sec", "transactions", "txn/s", "higher", primary=False),
                    Metric("commit_p99_ms", "commit_transaction p99", "ms", "lower", primary=False),
                    *THROUGHPUT_SECONDARY]
        return [Metric("latency_p50_ms", "latency p50", "ms", "lower"),
                Metric("latency_p99_ms", "latency p99", "ms", "lower"),
                Metric("latency_p999_ms", "latency p99.9", "ms", "lower", primary=False),
                Metric("broker_rss_peak_mb", "broker peak RSS", "MB", "lower", primary=False)]

    def available(self, case: Case, tools: bool) -> str | None:
        return None

    def run(self, ctx: Context, case: Case) -> dict[str, Any]:
        topic = ctx.new_topic("txn", case.partitions or 1)
        if case.params["kind"] == "produce":
            txns = max(10, ctx.sizes.produce_bytes // 2 // (PER_TXN * RECORD_SIZE))
            args = ("txn-produce", ctx.bootstrap, topic, str(txns), str(RECORD_SIZE), "--per-txn", str(PER_TXN))
        else:
            txns = max(10, int(LATENCY_TXN_RATE * ctx.sizes.latency_seconds * 2))
            args = ("txn-latency", ctx.bootstrap, topic, str(txns), str(RECORD_SIZE), "--per-txn", str(PER_TXN),
                    "--rate", str(LATENCY_TXN_RATE))
        ctx.session.sampler.open()
        try:
            r = ctx.rdkafka(*args)
        finally:
            window = ctx.session.sampler.close().summary()
        return with_window(ctx, r, window, txns * PER_TXN * RECORD_SIZE)


