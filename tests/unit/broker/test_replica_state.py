"""The leader's view of its followers: high watermark over the ISR, ISR shrink/expand proposals,
acks=all checks (pure state; times in ms are passed in)."""

import pytest

from broker.replica.replica_state import FollowerState, LeaderReplicaState

T = 1_700_000_000_000  # wall-clock ms, as the broker passes them: a follower never caught up is ages behind


def leader(isr=(1, 2, 3), hw=0, leo=10, now=1_000, lag=30_000):
    return LeaderReplicaState.become_leader(1, (1, 2, 3), frozenset(isr), hw, leo, T + now, lag)


def test_high_watermark_is_the_least_log_end_over_the_isr_and_only_grows():
    s = leader()
    assert not s.update_follower(2, 10, 0, 10, T + 1_100)  # broker 3 has not fetched: unknown
    assert s.high_watermark == 0
    assert s.update_follower(3, 7, 0, 10, T + 1_200)
    assert s.high_watermark == 7
    assert s.update_follower(3, 10, 0, 12, T + 1_300)
    assert s.high_watermark == 10  # broker 2 has 10, broker 3 has 10, leader 12
    # a follower reporting less (it truncated) never moves the high watermark back
    assert not s.update_follower(2, 4, 0, 12, T + 1_400)
    assert s.high_watermark == 10
    with pytest.raises(KeyError):
        s.update_follower(9, 10, 0, 12, T + 1_500)


def test_a_follower_outside_the_isr_holds_the_watermark_only_while_caught_up():
    s = leader(isr=(1, 2), lag=1_000)
    s.update_follower(3, 15, 0, 20, T + 900)  # behind and never caught up
    s.update_follower(2, 20, 0, 20, T + 1_000)
    assert s.high_watermark == 20  # broker 3 is not counted
    s.update_follower(3, 20, 0, 20, T + 1_100)  # caught up with the leader
    s.update_follower(2, 30, 0, 30, T + 1_150)
    assert s.high_watermark == 20  # broker 3 (caught up, about to join) holds it at 20
    s.update_follower(3, 30, 0, 30, T + 1_200)
    assert s.high_watermark == 30
    s.update_follower(2, 40, 0, 40, T + 1_300)
    assert s.high_watermark == 30
    s.update_follower(2, 40, 0, 40, T + 2_300)  # broker 3 silent past the lag time: no longer held back
    assert s.high_watermark == 40


def test_caught_up_time_follows_kafkas_rule():
    f = FollowerState(2)
    f.update_fetch(5, 0, 10, now_ms=100)  # behind: never caught up
    assert f.last_caught_up_time_ms == 0
    f.update_fetch(10, 0, 15, now_ms=200)  # reached what the leader had at the previous fetch
    assert f.last_caught_up_time_ms == 100
    f.update_fetch(15, 0, 15, now_ms=300)  # reached the leader's end
    assert f.last_caught_up_time_ms == 300
    assert f.is_caught_up(15, 10_000, 30_000)
    assert not f.is_caught_up(16, 40_000, 30_000)
    assert f.is_caught_up(15, 40_000, 30_000)  # at the end: in sync however long ago


def test_isr_shrinks_after_the_lag_time_and_the_change_is_a_proposal():
    s = leader(lag=1_000)
    s.update_follower(2, 10, 0, 10, T + 1_500)
    s.update_follower(3, 4, 0, 10, T + 1_500)
    assert s.propose_shrink(10, T + 1_900) is None  # broker 3 still within its lag time (became leader at 1000)
    assert s.propose_shrink(10, T + 2_100) == frozenset({1, 2})
    assert s.pending_isr == frozenset({1, 2})
    assert s.maximal_isr == frozenset({1, 2, 3})
    assert s.high_watermark == 4  # broker 3 still counts until the write lands
    assert s.propose_shrink(10, T + 2_200) is None  # one change in flight at a time
    s.isr_committed(frozenset({1, 2}))
    assert s.maybe_increment_high_watermark(10, T + 2_300)
    assert s.high_watermark == 10
    # a lost compare-and-set leaves the ISR as it was
    s.update_follower(2, 10, 0, 12, T + 2_400)
    assert s.propose_shrink(12, T + 5_000) == frozenset({1})
    s.isr_rejected()
    assert s.isr == frozenset({1, 2}) and s.pending_isr is None


def test_isr_expands_once_the_follower_reached_the_watermark_and_this_epoch():
    s = LeaderReplicaState.become_leader(1, (1, 2, 3), frozenset({1, 2}), 8, 10, T + 1_000)
    s.update_follower(2, 10, 0, 10, T + 1_100)
    assert s.high_watermark == 10
    s.update_follower(3, 9, 0, 10, T + 1_200)
    assert s.propose_expand(3) is None  # below the high watermark
    s.update_follower(3, 10, 0, 10, T + 1_300)
    assert s.propose_expand(3) == frozenset({1, 2, 3})
    s.isr_committed(frozenset({1, 2, 3}))
    assert s.isr == frozenset({1, 2, 3})
    assert s.propose_expand(3) is None  # already in


def test_expand_waits_for_the_leaders_epoch_start():
    # this leader's epoch began at 20; a follower at 15 may hold an old leader's records there
    s = LeaderReplicaState.become_leader(1, (1, 2, 3), frozenset({1, 3}), 12, 20, T + 1_000)
    s.update_follower(3, 12, 0, 20, T + 1_050)
    s.update_follower(2, 15, 0, 20, T + 1_100)
    assert s.high_watermark == 12
    assert s.propose_expand(2) is None  # above the high watermark but below this epoch's start
    s.update_follower(2, 20, 0, 20, T + 1_200)
    assert s.propose_expand(2) == frozenset({1, 2, 3})


def test_acks_all_checks():
    s = leader()
    assert s.has_min_isr(2)
    s.update_follower(2, 10, 0, 10, T + 1_100)
    s.update_follower(3, 10, 0, 10, T + 1_100)
    assert s.enough_replicas_reached(11, 2) == (False, True)
    assert s.enough_replicas_reached(10, 2) == (True, True)
    s.isr_committed(frozenset({1}))
    assert not s.has_min_isr(2)
    assert s.enough_replicas_reached(10, 2) == (True, False)  # NOT_ENOUGH_REPLICAS_AFTER_APPEND


def test_a_replica_added_by_a_reassignment_counts_only_once_caught_up():
    s = leader(isr=(1, 2, 3), hw=10, leo=10)
    s.update_follower(2, 10, 0, 10, T + 1_100)
    s.update_follower(3, 10, 0, 10, T + 1_100)
    s.set_replicas((1, 2, 3, 4))  # KIP-455: broker 4 joins as a follower at the same epoch
    assert 4 in s.followers and s.followers[4].log_end_offset == -1
    assert s.propose_expand(4) is None  # knows nothing yet: not in sync
    # The leader appends; the new follower (at 0) does not hold the high watermark back.
    assert s.update_follower(2, 20, 0, 20, T + 1_200) is False
    assert s.update_follower(3, 20, 0, 20, T + 1_200) and s.high_watermark == 20
    s.update_follower(4, 5, 0, 20, T + 1_300)
    assert s.high_watermark == 20 and s.propose_expand(4) is None
    s.update_follower(4, 20, 0, 20, T + 1_400)
    assert s.propose_expand(4) == frozenset({1, 2, 3, 4})
    s.isr_committed(frozenset({1, 2, 3, 4}))
    s.set_replicas((1, 2, 4))  # broker 3 removed: forgotten, no longer counted
    assert 3 not in s.followers and s.replicas == (1, 2, 4)
