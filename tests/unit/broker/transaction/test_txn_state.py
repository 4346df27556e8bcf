"""The transaction state machine (broker/coordinator/transaction/state.py): one test per
transition and per error Kafka 4.1's TransactionCoordinator answers."""

from __future__ import annotations

import pytest
from kio.schema.errors import ErrorCode

from broker.coordinator.transaction import state as st
from broker.coordinator.transaction.state import IllegalTransition, TxnError, TxnMetadata, TxnState

S = TxnState
P0, P1 = ("t", 0), ("t", 1)


def meta(state: TxnState = S.EMPTY, epoch: int = 0, partitions=(), pid: int = 7) -> TxnMetadata:
    return TxnMetadata("tx", pid, epoch, 60000, state, set(partitions), 100 if state == S.ONGOING else -1, 100)


def applied(m: TxnMetadata, t: st.Transit | None) -> TxnMetadata:
    assert t is not None
    assert m.pending == t.state
    m.complete(t)
    assert m.pending is None
    return m


def refused(code: ErrorCode, fn, *args, **kw) -> None:
    with pytest.raises(TxnError) as e:
        fn(*args, **kw)
    assert e.value.code == code


# -- InitProducerId ------------------------------------------------------------------------------

def test_init_of_a_new_id_gives_epoch_0() -> None:
    m = TxnMetadata("tx", 7)
    t = st.prepare_init(m, 30000, 200)
    assert (t.state, t.producer_id, t.producer_epoch, t.timeout_ms) == (S.EMPTY, 7, 0, 30000)
    assert applied(m, t).producer_epoch == 0


@pytest.mark.parametrize("state", [S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT])
def test_init_after_a_finished_transaction_bumps_the_epoch(state: TxnState) -> None:
    m = meta(state, epoch=3)
    t = st.prepare_init(m, 1000, 200)
    assert (t.state, t.producer_epoch, t.partitions) == (S.EMPTY, 4, frozenset())


def test_init_during_an_ongoing_transaction_fences_it_first() -> None:
    m = meta(S.ONGOING, epoch=3, partitions=[P0])
    t = st.prepare_init(m, 1000, 200)
    assert (t.state, t.producer_epoch) == (S.PREPARE_EPOCH_FENCE, 4)
    assert m.pending == S.PREPARE_EPOCH_FENCE and m.state == S.ONGOING
    abort = st.prepare_end(m, 7, t.producer_epoch, commit=False, now_ms=201, from_client=False)
    assert (abort.state, abort.producer_epoch, abort.partitions) == (S.PREPARE_ABORT, 4, frozenset({P0}))
    assert applied(m, abort).state == S.PREPARE_ABORT


@pytest.mark.parametrize("state", [S.PREPARE_COMMIT, S.PREPARE_ABORT])
def test_init_while_completing_is_concurrent_transactions(state: TxnState) -> None:
    refused(ErrorCode.concurrent_transactions, st.prepare_init, meta(state), 1000, 200)


def test_init_with_a_pending_transition_is_concurrent_transactions() -> None:
    m = meta(S.EMPTY)
    st.prepare_add_partitions(m, 7, 0, {P0}, 200)
    refused(ErrorCode.concurrent_transactions, st.prepare_init, m, 1000, 201)


def test_init_with_an_exhausted_epoch_rotates_the_producer_id() -> None:
    m = meta(S.COMPLETE_COMMIT, epoch=st.MAX_EPOCH - 1)
    assert st.needs_new_producer_id(m, None)
    t = st.prepare_init(m, 1000, 200, new_producer_id=99)
    assert (t.producer_id, t.producer_epoch, t.last_producer_id) == (99, 0, 7)


def test_kip360_init_with_the_current_epoch_bumps_it() -> None:
    m = meta(S.EMPTY, epoch=5)
    t = st.prepare_init(m, 1000, 200, expected=(7, 5))
    assert (t.producer_epoch, t.last_producer_epoch) == (6, 5)


def test_kip360_retry_of_a_bump_returns_the_same_epoch() -> None:
    m = meta(S.EMPTY, epoch=5)
    applied(m, st.prepare_init(m, 1000, 200, expected=(7, 5)))
    t = st.prepare_init(m, 1000, 201, expected=(7, 5))
    assert t.producer_epoch == 6


def test_kip360_with_an_old_epoch_is_fenced() -> None:
    refused(ErrorCode.producer_fenced, st.prepare_init, meta(S.EMPTY, epoch=5), 1000, 200, expected=(7, 2))


def test_kip360_with_another_producer_id_is_fenced() -> None:
    refused(ErrorCode.producer_fenced, st.prepare_init, meta(S.EMPTY, epoch=5), 1000, 200, expected=(8, 5))


def test_timeout_bounds() -> None:
    assert st.valid_timeout(900000, 900000) and not st.valid_timeout(900001, 900000)
    assert not st.valid_timeout(0, 900000)


# -- AddPartitionsToTxn ----------------------------------------------------------------------------

@pytest.mark.parametrize("state", [S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT])
def test_add_partitions_starts_a_transaction(state: TxnState) -> None:
    m = meta(state)
    t = st.prepare_add_partitions(m, 7, 0, {P0}, 500)
    assert (t.state, t.partitions, t.start_ms) == (S.ONGOING, frozenset({P0}), 500)


def test_add_partitions_to_an_ongoing_transaction_keeps_its_start() -> None:
    m = meta(S.ONGOING, partitions=[P0])
    t = st.prepare_add_partitions(m, 7, 0, {P1}, 500)
    assert (t.partitions, t.start_ms) == (frozenset({P0, P1}), 100)


def test_add_partitions_already_included_writes_nothing() -> None:
    m = meta(S.ONGOING, partitions=[P0, P1])
    assert st.prepare_add_partitions(m, 7, 0, {P0}, 500) is None
    assert m.pending is None


def test_add_partitions_with_another_producer_id() -> None:
    refused(ErrorCode.invalid_producer_id_mapping, st.prepare_add_partitions, meta(S.EMPTY), 8, 0, {P0}, 1)


def test_add_partitions_with_an_old_epoch_is_fenced() -> None:
    refused(ErrorCode.producer_fenced, st.prepare_add_partitions, meta(S.EMPTY, epoch=2), 7, 1, {P0}, 1)


@pytest.mark.parametrize("state", [S.PREPARE_COMMIT, S.PREPARE_ABORT])
def test_add_partitions_while_completing_is_concurrent(state: TxnState) -> None:
    refused(ErrorCode.concurrent_transactions, st.prepare_add_partitions, meta(state), 7, 0, {P0}, 1)


def test_verify_partitions_of_the_broker_form() -> None:
    m = meta(S.ONGOING, partitions=[P0])
    assert st.verify_partitions(m, 7, 0, {P0, P1}) == {P0: ErrorCode.none, P1: ErrorCode.transaction_abortable}
    refused(ErrorCode.producer_fenced, st.verify_partitions, m, 7, 1, {P0})
    refused(ErrorCode.invalid_producer_id_mapping, st.verify_partitions, m, 9, 0, {P0})
    refused(ErrorCode.concurrent_transactions, st.verify_partitions, meta(S.PREPARE_COMMIT), 7, 0, {P0})


# -- EndTxn ----------------------------------------------------------------------------------------

@pytest.mark.parametrize("commit,target", [(True, S.PREPARE_COMMIT), (False, S.PREPARE_ABORT)])
def test_end_of_an_ongoing_transaction_prepares(commit: bool, target: TxnState) -> None:
    m = meta(S.ONGOING, partitions=[P0])
    t = st.prepare_end(m, 7, 0, commit, 500)
    assert (t.state, t.partitions) == (target, frozenset({P0}))


@pytest.mark.parametrize("prepared,complete", [(S.PREPARE_COMMIT, S.COMPLETE_COMMIT),
                                               (S.PREPARE_ABORT, S.COMPLETE_ABORT)])
def test_markers_written_complete_the_transaction(prepared: TxnState, complete: TxnState) -> None:
    m = meta(prepared, partitions=[P0])
    t = st.prepare_complete(m, 600)
    assert (t.state, t.partitions) == (complete, frozenset())
    assert applied(m, t).state == complete


@pytest.mark.parametrize("state,commit", [(S.COMPLETE_COMMIT, True), (S.COMPLETE_ABORT, False)])
def test_end_retried_after_completion_is_ok(state: TxnState, commit: bool) -> None:
    assert st.prepare_end(meta(state), 7, 0, commit, 1) is None


@pytest.mark.parametrize("state,commit", [(S.PREPARE_COMMIT, True), (S.PREPARE_ABORT, False)])
def test_end_retried_while_completing_is_concurrent(state: TxnState, commit: bool) -> None:
    refused(ErrorCode.concurrent_transactions, st.prepare_end, meta(state), 7, 0, commit, 1)


@pytest.mark.parametrize("state,commit", [
    (S.EMPTY, True), (S.EMPTY, False), (S.COMPLETE_COMMIT, False), (S.COMPLETE_ABORT, True),
    (S.PREPARE_COMMIT, False), (S.PREPARE_ABORT, True)])
def test_end_the_other_way_is_invalid_txn_state(state: TxnState, commit: bool) -> None:
    refused(ErrorCode.invalid_txn_state, st.prepare_end, meta(state), 7, 0, commit, 1)


def test_end_with_an_old_epoch_is_fenced() -> None:
    refused(ErrorCode.producer_fenced, st.prepare_end, meta(S.ONGOING, epoch=3), 7, 2, True, 1)


def test_end_from_a_client_with_a_newer_epoch_is_fenced() -> None:
    refused(ErrorCode.producer_fenced, st.prepare_end, meta(S.ONGOING, epoch=3), 7, 4, True, 1)


def test_end_with_another_producer_id() -> None:
    refused(ErrorCode.invalid_producer_id_mapping, st.prepare_end, meta(S.ONGOING), 8, 0, True, 1)


def test_end_with_a_pending_write_is_concurrent() -> None:
    m = meta(S.ONGOING, partitions=[P0])
    st.prepare_end(m, 7, 0, True, 1)
    refused(ErrorCode.concurrent_transactions, st.prepare_end, m, 7, 0, True, 2)


def test_fenced_producer_cannot_commit_after_the_fence() -> None:
    m = meta(S.ONGOING, epoch=3, partitions=[P0])
    fence = st.prepare_init(m, 1000, 1)
    applied(m, st.prepare_end(m, 7, fence.producer_epoch, False, 2, from_client=False))
    refused(ErrorCode.producer_fenced, st.prepare_end, m, 7, 3, True, 3)
    refused(ErrorCode.producer_fenced, st.prepare_add_partitions, m, 7, 3, {P1}, 3)


# -- timeouts, expiry, failed writes, illegal transitions -------------------------------------------

def test_timed_out_only_when_ongoing_past_its_timeout() -> None:
    m = meta(S.ONGOING, partitions=[P0])  # started at 100, timeout 60000
    assert not st.timed_out(m, 60100) and st.timed_out(m, 60101)
    assert not st.timed_out(meta(S.PREPARE_COMMIT), 10**9)


def test_expired_ids_become_dead() -> None:
    m = meta(S.COMPLETE_COMMIT)
    assert st.expired(m, 1100, 1000) and not st.expired(meta(S.ONGOING), 10**9, 1000)
    assert st.prepare_dead(m, 1100).state == S.DEAD


def test_a_failed_write_leaves_the_state_unchanged() -> None:
    m = meta(S.ONGOING, partitions=[P0])
    st.prepare_end(m, 7, 0, True, 1)
    m.abandon()
    assert (m.state, m.pending) == (S.ONGOING, None)
    assert st.prepare_end(m, 7, 0, True, 2).state == S.PREPARE_COMMIT


def test_a_failed_fence_is_not_bumped_twice() -> None:
    m = meta(S.ONGOING, epoch=3, partitions=[P0])
    assert st.prepare_fence(m, 1).producer_epoch == 4
    m.abandon()
    m.producer_epoch = 4  # the abort's epoch was applied before its write failed
    assert st.prepare_fence(m, 2).producer_epoch == 4


@pytest.mark.parametrize("state", [S.EMPTY, S.ONGOING, S.COMPLETE_COMMIT])
def test_complete_from_a_state_that_is_not_prepared_is_illegal(state: TxnState) -> None:
    with pytest.raises(IllegalTransition):
        st.prepare_complete(meta(state), 1)


def test_valid_previous_states_are_kafkas() -> None:
    assert st.VALID_PREVIOUS[S.PREPARE_COMMIT] == {S.ONGOING}
    assert st.VALID_PREVIOUS[S.PREPARE_ABORT] == {S.ONGOING, S.PREPARE_EPOCH_FENCE}
    assert st.VALID_PREVIOUS[S.DEAD] == {S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT}
    with pytest.raises(IllegalTransition):
        meta(S.EMPTY)._transit(S.PREPARE_COMMIT, 1)


def test_kafka_names() -> None:
    assert [s.kafka_name for s in S] == ["Empty", "Ongoing", "PrepareCommit", "PrepareAbort", "CompleteCommit",
                                         "CompleteAbort", "Dead", "PrepareEpochFence"]
    assert S.from_kafka_name("Ongoing") == S.ONGOING
