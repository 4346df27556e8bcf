"""Workload: one unthrottled producer beside 100 throttled client-ids (KIP-13).

100 neighbours (bench/clients/quota_neighbours.py, one connection and client-id each) produce 16 KiB
batches against a per-client-id quota of 10 KiB/s, set with AlterClientQuotas on both brokers; a
librdkafka producer under a client-id no quota names then sends 1 KiB records as fast as it can.
Its throughput, and the broker CPU per GB it costs, say what throttled neighbours cost the clients
that are not throttled (sensor bookkeeping, muted connections, throttle times on every answer).
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from typing import Any

from bench import REPO_ROOT
from bench.workloads.base import MB, THROUGHPUT_SECONDARY, Case, Config, Context, Metric, Workload, \
    with_window, register

NEIGHBOURS = 100
NEIGHBOUR_QUOTA = 10 * 1024  # bytes/s per throttled client-id


def set_quotas(bootstrap: str, client_ids: list[str], rate: int) -> None:
    from kio.schema.alter_client_quotas.v1.request import AlterClientQuotasRequest, EntityData, EntryData, OpData

    from flotilla.testenv import kafka_wire

    req = AlterClientQuotasRequest(validate_only=False, entries=tuple(
        EntryData(entity=(EntityData(entity_type="client-id", entity_name=c),),
                  ops=(OpData(key="producer_byte_rate", value=float(rate), remove=False),))
        for c in client_ids))
    with kafka_wire.connect(bootstrap) as conn:
        resp = conn.request(req)
    bad = [e for e in resp.entries if int(e.error_code) != 0]
    if bad:
        raise RuntimeError(f"AlterClientQuotas refused: {bad[:3]}")


@register
class QuotaNeighbours(Workload):
    name = "quota-neighbours"
    description = (
        f"Quotas (KIP-13): a librdkafka producer (1 KiB records, acks=1) under a client-id no quota names, "
        f"while {NEIGHBOURS} other client-ids, each on its own connection, produce against a "
        f"{NEIGHBOUR_QUOTA // 1024} KiB/s quota each and wait out their throttle times."
    )
    order = 45

    def cases(self, cfg: Config) -> list[Case]:
        p = cfg.partitions[0]
        return [Case(self, f"quota-neighbours-1KiB-p{p}-librdkafka",
                     f"produce 1 KiB beside {NEIGHBOURS} throttled client-ids, {p} partition{'s' if p > 1 else ''}, "
                     f"librdkafka", {"record_size": 1024, "neighbours": NEIGHBOURS}, p, client="librdkafka")]

    def metrics(self, case: Case) -> list[Metric]:
        return [Metric("mb_per_sec", "throughput", "MB/s", "higher"),
                Metric("neighbour_throttled_pct", "neighbour answers throttled", "%", "higher", primary=False),
                *THROUGHPUT_SECONDARY]

    def available(self, case: Case, tools: bool) -> str | None:
        return None

    def run(self, ctx: Context, case: Case) -> dict[str, Any]:
        size, n = case.params["record_size"], case.params["neighbours"]
        records = ctx.sizes.records_for(ctx.sizes.produce_bytes * 2, size)  # 256 MB: about a second or more
        prefix = f"neighbour-{int(time.time())}-"
        set_quotas(ctx.bootstrap, [f"{prefix}{i}" for i in range(n)], NEIGHBOUR_QUOTA)
        side = ctx.new_topic("neighbours", 1)
        topic = ctx.new_topic("unthrottled", case.partitions or 1)
        neighbours = subprocess.Popen(
            [sys.executable, "-m", "bench.clients.quota_neighbours", ctx.bootstrap, side, "--count", str(n), "--prefix", prefix,
             "--seconds", str(ctx.sizes.timeout)], cwd=REPO_ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            time.sleep(3)  # every neighbour connected and past its first burst window
            ctx.session.sampler.open()
            try:
                r = ctx.rdkafka("produce", ctx.bootstrap, topic, str(records), str(size), "--acks", "1")
            finally:
                window = ctx.session.sampler.close().summary()
        finally:
            neighbours.terminate()
            out, err = neighbours.communicate(timeout=60)
        stats = json.loads(out.strip().splitlines()[-1]) if out.strip() else {"requests": 0, "throttled": 0,
                                                                                "errors": [err[-500:]]}
        r["neighbours"] = stats
        r["neighbour_throttled_pct"] = 100.0 * stats["throttled"] / max(1, stats["requests"])
        return with_window(ctx, r, window, records * size)
