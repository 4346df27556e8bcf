"""Workload `catch-up`: the KIP-333 catch-up consumer (flotilla.catchup) against a plain consumer.

Two cases, both with librdkafka underneath (bench/clients/catchup_client.py runs each consumer in a child
process of its own):

- restart: a group's last commit is offset 0 and `catchup_backlog` records (100 bytes) lie
  behind it (500,000 by default) when its consumer restarts, while a producer goes on writing
  `catchup_rate` records/s. Run once with a plain consumer (`enable.parallel.rebalance` false) and
  once in the parallel mode, on the same broker, in alternating order per round. Measured: p50/p99
  age at delivery of the records written after the restart while the backlog was open, the time
  until the backlog is delivered, and the consumer process's CPU time; and the ratios of the mode
  to the plain consumer, which is what this case is for (the Flotilla/Kafka ratio beside them only
  says whether the broker changes the picture).
- mode off: a plain `confluent_kafka.Consumer` and a `CatchUpConsumer` with the mode off read the
  same warm topic (`catchup_backlog` records) with poll(), three times each, alternating; records/s
  and the ratio of their medians (the issue asks for the mode off within 5 %).
"""

from __future__ import annotations

import statistics
from typing import Any

from bench.workloads.base import Case, Config, Context, Metric, Workload, register

RECORD_SIZE = 100


@register
class CatchUp(Workload):
    name = "catch-up"
    description = (
        "KIP-333 catch-up consumer (flotilla.catchup): a consumer restarts with a backlog of N records "
        "(500,000; --catchup-records) behind its committed offset while a producer writes a steady rate; "
        "p50/p99 age of records written after the restart when delivered, time until the backlog is "
        "delivered, consumer CPU, plain consumer vs the parallel mode (ratios). And the mode off vs a "
        "plain confluent_kafka.Consumer reading the same warm topic with poll() (throughput ratio)."
    )
    order = 38

    def cases(self, cfg: Config) -> list[Case]:
        p, n = cfg.partitions[0], cfg.sizes.catchup_backlog
        ps = f"{p} partition{'s' if p > 1 else ''}"
        return [
            Case(self, f"catch-up-restart-p{p}", f"catch-up: restart with {n:,} records behind, "
                 f"{cfg.sizes.catchup_rate:,} records/s produced, {ps}",
                 {"backlog": n, "rate": cfg.sizes.catchup_rate, "record_size": RECORD_SIZE}, p, client="librdkafka"),
            Case(self, f"catch-up-mode-off-p{p}", f"catch-up: mode off vs plain Consumer, poll() over {n:,} "
                 f"records, {ps}", {"records": n, "record_size": RECORD_SIZE, "runs": 3}, p, client="librdkafka"),
        ]

    def metrics(self, case: Case) -> list[Metric]:
        if case.id.startswith("catch-up-restart"):
            return [
                Metric("fresh_age_p50_ratio", "fresh-record age p50, parallel / plain", "×", "lower"),
                Metric("fresh_age_p99_ratio", "fresh-record age p99, parallel / plain", "×", "lower"),
                Metric("backlog_seconds_ratio", "time to finish the backlog, parallel / plain", "×", "lower"),
                Metric("consumer_cpu_ratio", "consumer CPU per record, parallel / plain", "×", "lower"),
                Metric("parallel_fresh_age_p50_ms", "parallel: fresh-record age p50", "ms", "lower"),
                Metric("parallel_fresh_age_p99_ms", "parallel: fresh-record age p99", "ms", "lower"),
                Metric("plain_fresh_age_p50_ms", "plain: fresh-record age p50", "ms", "lower"),
                Metric("plain_fresh_age_p99_ms", "plain: fresh-record age p99", "ms", "lower"),
                Metric("parallel_backlog_seconds", "parallel: time to finish the backlog", "s", "lower"),
                Metric("plain_backlog_seconds", "plain: time to finish the backlog", "s", "lower"),
                Metric("parallel_fresh_age_p90_ms", "parallel: fresh-record age p90", "ms", "lower", primary=False),
                Metric("plain_fresh_age_p90_ms", "plain: fresh-record age p90", "ms", "lower", primary=False),
                Metric("parallel_fresh_from_gap_pct", "parallel: fresh records that fell in the gap", "%", "lower",
                       primary=False),
                Metric("parallel_first_fresh_seconds", "parallel: first fresh record after", "s", "lower",
                       primary=False),
                Metric("plain_first_fresh_seconds", "plain: first fresh record after", "s", "lower", primary=False),
                Metric("parallel_consumer_cpu_seconds", "parallel: consumer CPU", "CPU s", "lower", primary=False),
                Metric("plain_consumer_cpu_seconds", "plain: consumer CPU", "CPU s", "lower", primary=False),
                Metric("worker_extra_cpu_seconds", "extra consumer CPU of the parallel mode", "CPU s", "lower",
                       primary=False),
                Metric("broker_cpu_seconds", "broker CPU, both runs", "CPU s", "lower", primary=False),
            ]
        return [
            Metric("mode_off_throughput_ratio", "mode off / plain Consumer throughput", "×", "higher"),
            Metric("off_records_per_sec", "mode off: throughput", "records/s", "higher"),
            Metric("plain_records_per_sec", "plain Consumer: throughput", "records/s", "higher"),
        ]

    def available(self, case: Case, tools: bool) -> str | None:
        import importlib.util

        return None if importlib.util.find_spec("confluent_kafka") else "confluent-kafka not installed"

    def run(self, ctx: Context, case: Case) -> dict[str, Any]:
        if case.id.startswith("catch-up-restart"):
            return self._restart(ctx, case)
        return self._mode_off(ctx, case)

    def _fill(self, ctx: Context, case: Case, records: int) -> str:
        topic = ctx.new_topic("catchup", case.partitions or 1)
        ctx.rdkafka("produce", ctx.bootstrap, topic, str(records), str(RECORD_SIZE), "--acks", "1")
        return topic

    def _restart(self, ctx: Context, case: Case) -> dict[str, Any]:
        n, rate = case.params["backlog"], case.params["rate"]
        # Alternate which mode goes first, so that a broker warming up or the machine's drift does
        # not always favour the same one.
        order = ["plain", "parallel"] if ctx.round % 2 else ["parallel", "plain"]
        runs: dict[str, dict[str, Any]] = {}
        ctx.session.sampler.open()
        try:
            for mode in order:
                topic = self._fill(ctx, case, n)
                lead = "0.3" if n < 50_000 else "1.0"
                runs[mode] = ctx.client("bench.clients.catchup_client", "restart", ctx.bootstrap, topic, "--mode", mode,
                                        "--rate", str(rate), "--size", str(RECORD_SIZE), "--lead", lead)
        finally:
            window = ctx.session.sampler.close().summary()
        par, plain = runs["parallel"], runs["plain"]
        if not par["catchup_worker_created"]:
            raise RuntimeError("the parallel run never started its catch-up worker: no gap was seen")

        def ratio(key: str) -> float | None:
            a, b = par.get(key), plain.get(key)
            return a / b if isinstance(a, (int, float)) and b else None

        out: dict[str, Any] = {
            "fresh_age_p50_ratio": ratio("fresh_age_p50_ms"), "fresh_age_p99_ratio": ratio("fresh_age_p99_ms"),
            "backlog_seconds_ratio": ratio("backlog_seconds"),
            "consumer_cpu_ratio": ratio("consumer_cpu_us_per_record"),
            "worker_extra_cpu_seconds": par["consumer_cpu_seconds"] - plain["consumer_cpu_seconds"],
            "order": order, "runs": runs,
        }
        for mode, r in runs.items():
            for key in ("fresh_age_p50_ms", "fresh_age_p90_ms", "fresh_age_p99_ms", "backlog_seconds",
                        "first_fresh_seconds", "consumer_cpu_seconds"):
                out[f"{mode}_{key}"] = r[key]
        if par["fresh_during_backlog"]:
            out["parallel_fresh_from_gap_pct"] = 100 * par["fresh_from_gap"] / par["fresh_records"]
        out.update(window)
        return out

    def _mode_off(self, ctx: Context, case: Case) -> dict[str, Any]:
        n = case.params["records"]
        topic = self._fill(ctx, case, n)
        ctx.client("bench.clients.catchup_client", "read", ctx.bootstrap, topic, str(n), "--mode", "plain")  # warms the cache
        runs: dict[str, list[dict[str, Any]]] = {"plain": [], "off": []}
        first = ["plain", "off"] if ctx.round % 2 else ["off", "plain"]
        for _ in range(case.params["runs"]):
            for mode in first:
                runs[mode].append(ctx.client("bench.clients.catchup_client", "read", ctx.bootstrap, topic, str(n),
                                             "--mode", mode))
        med = {m: statistics.median(r["records_per_sec"] for r in rs) for m, rs in runs.items()}
        return {"mode_off_throughput_ratio": med["off"] / med["plain"], "off_records_per_sec": med["off"],
                "plain_records_per_sec": med["plain"], "order": first,
                "runs": {m: [r["records_per_sec"] for r in rs] for m, rs in runs.items()}}
