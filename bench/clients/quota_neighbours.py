"""Throttled neighbours for the quota workload: N connections, each with its own client-id, each
producing 16 KiB batches as fast as its quota lets it. Like any KIP-219 client, a neighbour waits
out the throttle time a response carries before sending again. Runs until stopped (SIGTERM) or
--seconds pass, then prints one JSON line: requests sent, throttled answers, errors."""

from __future__ import annotations

import argparse
import datetime
import json
import signal
import threading
import time

from flotilla.testenv import kafka_wire


def produce_request(topic: str, records: bytes):
    from kio.schema.produce.v9.request import PartitionProduceData, ProduceRequest, TopicProduceData
    from kio.static.primitive import i16, i32

    return ProduceRequest(transactional_id=None, acks=i16(1), timeout=datetime.timedelta(seconds=10), topic_data=(
        TopicProduceData(name=topic, partition_data=(PartitionProduceData(index=i32(0), records=records),)),))


def neighbour(bootstrap: str, topic: str, client_id: str, stop: threading.Event, stats: dict) -> None:
    request = produce_request(topic, kafka_wire.build_batch([(None, b"n" * 1024) for _ in range(16)]))
    try:
        with kafka_wire.KafkaConnection(bootstrap, client_id=client_id, timeout=60) as conn:
            while not stop.is_set():
                resp = conn.request(request)
                stats["requests"] += 1
                throttle_s = resp.throttle_time.total_seconds()
                if throttle_s > 0:
                    stats["throttled"] += 1
                    stop.wait(throttle_s)
    except Exception as e:  # a neighbour failing is reported, not fatal to the measurement
        if not stop.is_set():
            stats["errors"].append(f"{client_id}: {e}")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("bootstrap")
    ap.add_argument("topic")
    ap.add_argument("--count", type=int, default=100)
    ap.add_argument("--prefix", default="neighbour-")
    ap.add_argument("--seconds", type=float, default=600)
    ap.add_argument("--timeout", type=float, default=600)
    args = ap.parse_args()
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    stats = {"requests": 0, "throttled": 0, "errors": []}
    threads = [threading.Thread(target=neighbour, args=(args.bootstrap, args.topic, f"{args.prefix}{i}", stop, stats),
                                daemon=True) for i in range(args.count)]
    for t in threads:
        t.start()
    stop.wait(min(args.seconds, args.timeout))
    stop.set()
    for t in threads:
        t.join(5)
    stats["errors"] = stats["errors"][:5]
    print(json.dumps(stats), flush=True)


if __name__ == "__main__":
    main()
