"""A consumer application in KIP-333 catch-up mode, for tests that kill -9 it.

    python -m tests.support.catchup_app BOOTSTRAP TOPIC GROUP LEDGER [GAP_DELAY_MS]

It appends to LEDGER, flushed before each commit (so what it committed it has written):
`start PID` once, `ranges JSON` whenever its open ranges change, and `rec SOURCE PARTITION OFFSET
VALUE` per record processed. GAP_DELAY_MS makes processing a gap record slow, standing in for real
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
    c = CatchUpConsumer({
        "bootstrap.servers": bootstrap, "group.id": group, "auto.offset.reset": "earliest",
        "enable.auto.commit": False, "session.timeout.ms": 6000, "heartbeat.interval.ms": 500,
        "enable.parallel.rebalance": True,
    })
    c.subscribe([topic])
    ranges_seen = None
    with open(ledger_path, "a", buffering=1) as ledger:
        ledger.write(f"start {os.getpid()}\n")
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
