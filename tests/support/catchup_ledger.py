"""The ledger tests/support/catchup_app.py writes, read back life by life, and what it says about
duplicates after kill -9 (tests/e2e/test_catchup_kill9.py)."""

from __future__ import annotations

import json
from pathlib import Path


class Ledger:
    """What the application wrote, life by life (a life starts at each `start` line)."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def lives(self) -> list[list[tuple]]:
        lives: list[list[tuple]] = []
        if not self.path.exists():
            return lives
        for line in self.path.read_text().splitlines():
            kind, _, rest = line.partition(" ")
            if kind == "start":
                lives.append([])
            elif kind in ("ranges", "assigned", "ack") and lives:
                try:
                    lives[-1].append((kind, json.loads(rest)))
                except ValueError:
                    pass  # a torn last line
            elif kind == "rec" and lives and len(rest.split()) == 4:  # a torn last line is skipped
                source, partition, offset, value = rest.split()
                lives[-1].append(("rec", source, int(partition), int(offset), int(value)))
        return lives

    def values(self) -> list[int]:
        return [e[4] for life in self.lives() for e in life if e[0] == "rec"]


def checkpoint_analysis(lives: list[list[tuple]]) -> tuple[list[str], list[dict[str, int]]]:
    """Where duplicates come from. At-least-once allows one source only: records processed after
    the last commit the coordinator acknowledged, whose checkpoint the kill lost (in flight or not
    sent yet). Anything else is a bug: a record processed again although an acknowledged commit
    had checkpointed it (a range read twice, a token not removed, an offset moved back), or twice
    within one assignment. Returns those problems, and per life: records processed, commits
    acknowledged, and records not covered by the last acknowledged commit when the life ended
    (what a kill at that moment may redeliver) and at each later assignment within the life."""
    from flotilla.catchup.ranges import PartitionRanges

    acked: dict[int, tuple[int, list[tuple[int, int]]]] = {}  # partition -> (offset, [(next, end)])

    def covered(p: int, o: int) -> bool:
        if p not in acked:
            return False
        offset, open_spans = acked[p]
        return o < offset and not any(nxt <= o < end for nxt, end in open_spans)

    problems: list[str] = []
    per_life: list[dict[str, int]] = []
    for n, life in enumerate(lives, start=1):
        epoch: set[tuple[int, int]] = set()
        recs: list[tuple[int, int]] = []
        acks = at_reassignments = 0
        for e in life:
            if e[0] == "assigned":
                if epoch:  # a rebalance inside the life: the same rule as a kill
                    at_reassignments += len({k for k in recs if not covered(*k)})
                epoch = set()
            elif e[0] == "ack":
                p, offset, meta = e[1]
                acks += 1
                state = PartitionRanges.from_commit(offset, meta)
                acked[p] = (offset, [(r.next, r.end) for r in state.ranges])
            elif e[0] == "rec":
                _, source, p, o, _v = e
                if (p, o) in epoch:
                    problems.append(f"life {n}: {p}:{o} processed twice in one assignment")
                if covered(p, o):
                    problems.append(f"life {n}: {source} processed {p}:{o} although an acknowledged commit "
                                    f"had checkpointed it ({acked[p]})")
                epoch.add((p, o))
                recs.append((p, o))
        unacked = {k for k in recs if not covered(*k)}
        per_life.append({"life": n, "processed": len(recs), "acks": acks, "unacknowledged_at_end": len(unacked),
                         "unacknowledged_at_reassignments": at_reassignments})
    return problems, per_life
