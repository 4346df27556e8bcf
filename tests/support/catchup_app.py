"""A consumer application in KIP-333 catch-up mode, for tests that kill -9 it.

    python -m tests.support.catchup_app BOOTSTRAP TOPIC GROUP LEDGER [GAP_DELAY_MS]

It appends to LEDGER, flushed before each commit (so what it committed it has written):
`start PID` once, `ranges JSON` whenever its open ranges change, `assigned JSON` at each
assignment (per partition: where the primary starts and the open ranges `[start, end, next]` as
read back from the group, i.e. what the last durable commit left unprocessed), `rec SOURCE
PARTITION OFFSET VALUE` per record processed, and `ack JSON` per partition of each commit the
coordinator acknowledged (offset and range token). Every record is committed (asynchronously)
right after it is written. GAP_DELAY_MS makes processing a gap record slow, standing in for real
work so that a gap stays open long enough to be killed in. SIGTERM closes it cleanly.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time

from flotilla.catchup import CatchUpConsumer


def main(argv: list[str]) -> int:
    bootstrap, topic, group, ledger_path = argv[:4]
    gap_delay = float(argv[4]) / 1000.0 if len(argv) > 4 else 0.0
    stop = []
    signal.signal(signal.SIGTERM, lambda *_: stop.append(1))
    ledger = open(ledger_path, "a", buffering=1)
    ledger.write(f"start {os.getpid()}\n")

    def on_commit(err, partitions) -> None:
        if err is not None:
            ledger.write(f"ackerr {json.dumps(str(err))}\n")
            return
        for tp in partitions:
            if tp.error is None:
                ledger.write(f"ack {json.dumps([tp.partition, tp.offset, tp.metadata or ''])}\n")

    def on_assign(consumer, partitions) -> None:
        ranges = consumer.open_ranges()
        state = {str(tp.partition): {"primary": tp.offset, "ranges": [list(r) for r in ranges.get((tp.topic, tp.partition), [])]}
                 for tp in partitions}
        ledger.write(f"assigned {json.dumps(state)}\n")

    c = CatchUpConsumer({
        "bootstrap.servers": bootstrap, "group.id": group, "auto.offset.reset": "earliest",
        "enable.auto.commit": False, "session.timeout.ms": 6000, "heartbeat.interval.ms": 500,
        "enable.parallel.rebalance": True, "on_commit": on_commit,
    })
    c.subscribe([topic], on_assign=on_assign)
    ranges_seen = None
    with ledger:
        while not stop:
            msg = c.poll(0.1)
            ranges = {f"{t}:{p}": [[s, e] for s, e, _ in r] for (t, p), r in sorted(c.open_ranges().items())}
            if ranges != ranges_seen:
                ranges_seen = ranges
                ledger.write(f"ranges {json.dumps(ranges)}\n")
            if msg is None or msg.error() is not None:
                continue
            if c.last_source == "catchup" and gap_delay:
                time.sleep(gap_delay)
            ledger.write(f"rec {c.last_source} {msg.partition()} {msg.offset()} {msg.value().decode()}\n")
            ledger.flush()
            c.commit(message=msg, asynchronous=True)
        ledger.write(f"progress {c.progress_line()}\n")
        c.close()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
