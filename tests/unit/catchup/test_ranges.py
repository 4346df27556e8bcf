"""Range bookkeeping of the catch-up consumer: the KIP's examples, then properties over random
histories of produce / process / commit / crash / rebalance."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from flotilla.catchup.ranges import PartitionRanges, Range, RangeTokenError


def test_kip_first_crash_at_100_with_70_committed_and_log_at_120():
    # The primary processed up to 100 but committed 70, then crashed; at recovery the log is at 120.
    state = PartitionRanges.from_commit(70, "")
    assert state.recover(120) == 120          # the primary jumps to the log end
    assert [(r.start, r.end, r.next) for r in state.ranges] == [(70, 120, 70)]
    assert state.committed() == 70            # nothing of the gap is checkpointed yet
    assert state.commit(131) == "primary"     # fresh records go to the primary's log
    assert state.committed() == 70            # ... but committed() still waits for the gap
    assert state.commit(95) == "catchup"      # 70..94 processed by the worker
    assert state.committed() == 95
    assert state.records_left() == 25
    assert state.commit(120) == "catchup"     # the gap is done: its token goes
    assert state.ranges == [] and state.token() == ""
    assert state.committed() == 131


def test_kip_second_crash_at_170_with_140_committed_and_log_at_190():
    state = PartitionRanges.from_commit(70, "")
    state.recover(120)
    state.commit(140)                         # primary checkpointed 120..139
    state.commit(90)                          # worker got through 70..89 of the first gap
    # Second crash at 170, 140 committed, log at 190: a second range, processed after the first.
    state = PartitionRanges.from_commit(140, state.token())
    assert state.recover(190) == 190
    assert [(r.start, r.end, r.next) for r in state.ranges] == [(70, 120, 90), (140, 190, 140)]
    assert state.committed() == 90
    assert state.commit(120) == "catchup"     # the first range done
    assert state.committed() == 140           # the second range's start
    assert state.commit(160) == "catchup" and state.committed() == 160
    assert state.commit(200) == "primary" and state.committed() == 160
    assert state.commit(190) == "catchup"
    assert state.committed() == 200 and state.token() == ""


def test_worker_crash_resumes_from_its_own_progress():
    state = PartitionRanges.from_commit(70, "")
    state.recover(120)
    state.commit(101)
    again = PartitionRanges.from_commit(120, state.token())
    assert [(r.start, r.end, r.next) for r in again.ranges] == [(70, 120, 101)]
    assert again.recover(120) == 120 and len(again.ranges) == 1   # no new gap: same range goes on


def test_crash_before_the_primary_committed_anything_extends_the_open_range():
    state = PartitionRanges.from_commit(70, "")
    state.recover(120)
    state.commit(80)
    state = PartitionRanges.from_commit(120, state.token())
    state.recover(150)                         # the gap 120..150 touches 70..120: one range
    assert [(r.start, r.end, r.next) for r in state.ranges] == [(70, 150, 80)]


def test_late_commits_never_move_anything_back():
    state = PartitionRanges.from_commit(70, "")
    state.recover(120)
    state.commit(130)
    state.commit(100)
    assert state.commit(50) == "stale"        # below every range: checkpointed long ago
    assert state.commit(125) == "stale"       # a fresh record committed after a later one
    assert state.commit(90) == "catchup"      # inside the range, behind its progress
    assert (state.committed_primary, state.ranges) == (130, [Range(70, 120, 100)])
    state.commit(120)
    assert state.commit(110) == "stale"       # the range is gone: its records were checkpointed
    assert state.committed() == 130


@pytest.mark.parametrize("metadata", [
    "kip333/1:70-x@70", "kip333/1:70-120", "kip333/1:120-70@70", "kip333/1:70-120@130",
    "kip333/1:70-120@70,100-130@100", "kip333/1:70-200@70",
])
def test_bad_tokens_are_refused_clearly(metadata):
    with pytest.raises(RangeTokenError):
        PartitionRanges.from_commit(150, metadata)


def test_metadata_of_other_writers_means_no_ranges():
    assert PartitionRanges.from_commit(42, "some app's own note").ranges == []


def test_finish_closes_a_range_whose_tail_holds_no_records():
    state = PartitionRanges.from_commit(70, "")
    state.recover(120)
    r = state.ranges[0]
    state.commit(110)
    state.finish(r, 110)        # the worker read past 120 and saw nothing at 110..119
    assert state.ranges == [] and state.committed() == 120


# --- properties ----------------------------------------------------------------------------------

OPS = st.lists(
    st.tuples(
        st.sampled_from(["produce", "primary", "primary_nocommit", "worker", "crash", "rebalance", "late"]),
        st.integers(min_value=1, max_value=40),
    ),
    max_size=60,
)


class Model:
    """A log, the bookkeeping, and the truth: which offsets a worker processed and committed."""

    def __init__(self, committed: int, log_end: int) -> None:
        self.log_end = log_end
        self.checkpointed = set(range(committed))
        self.state = PartitionRanges.from_commit(committed, "")
        self.primary_pos = self.state.recover(log_end)

    def step(self, op: str, k: int) -> None:
        s = self.state
        if op == "produce":
            self.log_end += k
        elif op in ("primary", "primary_nocommit"):
            new = min(self.primary_pos + k, self.log_end)
            if new > s.committed_primary and op == "primary":
                # a commit covers everything the primary read before it, committed or not
                self.checkpointed.update(range(s.committed_primary, new))
                assert s.commit(new) == "primary"
            self.primary_pos = max(self.primary_pos, new)
        elif op == "worker" and s.ranges:
            r = s.ranges[0]
            new = min(r.next + k, r.end)
            self.checkpointed.update(range(r.next, new))
            assert s.commit(new) == "catchup"
        elif op == "late" and self.checkpointed:
            # a late commit of any record already processed changes nothing that was promised
            before = (s.committed(), s.token())
            done = sorted(self.checkpointed)
            s.commit(done[k % len(done)] + 1)
            assert (s.committed(), s.token()) == before
        elif op in ("crash", "rebalance"):
            # All that survives is the committed offset and its metadata; the new owner (the same
            # process after a crash, another member after a rebalance) reads them back.
            self.state = PartitionRanges.from_commit(s.committed_primary, s.token())
            self.primary_pos = self.state.recover(self.log_end)

    def check(self) -> None:
        s = self.state
        c = s.committed()
        assert all(o in self.checkpointed for o in range(c)), "committed() promised too much"
        for o in range(self.log_end):
            if o not in self.checkpointed:
                assert o >= s.committed_primary or any(r.next <= o < r.end for r in s.ranges), \
                    f"offset {o} lost: neither checkpointed nor left to a worker"
        for a, b in zip(s.ranges, s.ranges[1:]):
            assert a.end <= b.start
        assert all(not r.done for r in s.ranges)
        assert not s.ranges or s.ranges[-1].end <= s.committed_primary
        again = PartitionRanges.from_commit(s.committed_primary, s.token())
        assert again == s


@settings(max_examples=300, deadline=None)
@given(st.integers(0, 50), st.integers(0, 50), OPS)
def test_no_offset_is_lost_and_committed_never_overclaims(committed, extra, ops):
    m = Model(committed, committed + extra)
    m.check()
    for op, k in ops:
        m.step(op, k)
        m.check()


@settings(max_examples=200, deadline=None)
@given(st.integers(0, 50), st.integers(0, 50), OPS)
def test_every_record_is_processed_once_the_workers_run_to_the_end(committed, extra, ops):
    m = Model(committed, committed + extra)
    for op, k in ops:
        m.step(op, k)
    while m.state.ranges:
        m.step("worker", 1000)
    m.step("primary", 10**6)
    assert m.checkpointed >= set(range(m.log_end))
    assert m.state.committed() == m.log_end and m.state.token() == ""


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 1000), st.integers(1, 50), st.integers(0, 50)), max_size=8))
def test_token_round_trips(spans):
    ranges, pos = [], 0
    for gap, length, done in spans:
        start = pos + gap
        ranges.append(Range(start, start + length, start + min(done, length - 1)))
        pos = start + length
    state = PartitionRanges(pos + 5, ranges)
    assert PartitionRanges.from_commit(pos + 5, state.token()) == state
