"""The transaction state machine of KIP-98, pure (no I/O), as Kafka's TransactionMetadata and
the checks of its TransactionCoordinator.

A transactional id has one `TxnMetadata`. A request first *prepares* a transition
(`prepare_*`): the checks run, the target is returned as a `Transit`, and the metadata is marked
`pending` so concurrent requests answer CONCURRENT_TRANSACTIONS. The coordinator then writes the
transit to `__transaction_state`; once the in-sync replicas hold it, `complete` applies it (or
`abandon` drops it when the write failed). Only transaction version 1 is modelled (no epoch
bump at each commit, KIP-890 part 2).

    Empty/CompleteCommit/CompleteAbort --AddPartitions--> Ongoing --EndTxn--> PrepareCommit
        --markers written--> CompleteCommit  (PrepareAbort -> CompleteAbort likewise)
    Ongoing --InitProducerId or timeout--> PrepareEpochFence (in memory) --> PrepareAbort
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field, replace

from kio.schema.errors import ErrorCode

NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
MAX_EPOCH = 32767


class TxnState(enum.Enum):
    """Values are Kafka's TransactionStatus byte in the log; names are what Describe/List show."""

    EMPTY = 0
    ONGOING = 1
    PREPARE_COMMIT = 2
    PREPARE_ABORT = 3
    COMPLETE_COMMIT = 4
    COMPLETE_ABORT = 5
    DEAD = 6
    PREPARE_EPOCH_FENCE = 7

    @property
    def kafka_name(self) -> str:
        return _NAMES[self]

    @classmethod
    def from_kafka_name(cls, name: str) -> "TxnState | None":
        return _BY_NAME.get(name)


_NAMES = {
    TxnState.EMPTY: "Empty", TxnState.ONGOING: "Ongoing", TxnState.PREPARE_COMMIT: "PrepareCommit",
    TxnState.PREPARE_ABORT: "PrepareAbort", TxnState.COMPLETE_COMMIT: "CompleteCommit",
    TxnState.COMPLETE_ABORT: "CompleteAbort", TxnState.DEAD: "Dead",
    TxnState.PREPARE_EPOCH_FENCE: "PrepareEpochFence",
}
_BY_NAME = {v: k for k, v in _NAMES.items()}

S = TxnState
# The states each state may be entered from (Kafka's TransactionState.validPreviousStates).
VALID_PREVIOUS: dict[TxnState, frozenset[TxnState]] = {
    S.EMPTY: frozenset({S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT}),
    S.ONGOING: frozenset({S.ONGOING, S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT}),
    S.PREPARE_COMMIT: frozenset({S.ONGOING}),
    S.PREPARE_ABORT: frozenset({S.ONGOING, S.PREPARE_EPOCH_FENCE}),
    S.COMPLETE_COMMIT: frozenset({S.PREPARE_COMMIT}),
    S.COMPLETE_ABORT: frozenset({S.PREPARE_ABORT}),
    S.DEAD: frozenset({S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT}),
    S.PREPARE_EPOCH_FENCE: frozenset({S.ONGOING}),
}


class TxnError(Exception):
    """A request the state machine refuses; `code` is Kafka's answer."""

    def __init__(self, code: ErrorCode, message: str = "") -> None:
        super().__init__(message or code.name)
        self.code = code


class IllegalTransition(RuntimeError):
    """A transition Kafka treats as a bug (never answered to a client as such)."""


Partition = tuple[str, int]


@dataclass(frozen=True)
class Transit:
    """The metadata a prepared transition leads to: what is written to the log."""

    producer_id: int
    last_producer_id: int
    producer_epoch: int
    last_producer_epoch: int
    timeout_ms: int
    state: TxnState
    partitions: frozenset[Partition]
    start_ms: int
    last_update_ms: int


@dataclass
class TxnMetadata:
    transactional_id: str
    producer_id: int
    producer_epoch: int = NO_PRODUCER_EPOCH
    timeout_ms: int = 60000
    state: TxnState = TxnState.EMPTY
    partitions: set[Partition] = field(default_factory=set)
    start_ms: int = -1
    last_update_ms: int = -1
    last_producer_id: int = NO_PRODUCER_ID
    last_producer_epoch: int = NO_PRODUCER_EPOCH
    pending: TxnState | None = None
    # A fence whose write failed is not bumped again (Kafka's hasFailedEpochFence).
    failed_epoch_fence: bool = False

    @property
    def epoch_exhausted(self) -> bool:
        return self.producer_epoch >= MAX_EPOCH - 1

    def _transit(self, state: TxnState, now_ms: int, **changes) -> Transit:
        if self.pending is not None:
            raise IllegalTransition(f"{self.transactional_id}: {self.pending.kafka_name} is already pending")
        if self.state not in VALID_PREVIOUS[state]:
            raise IllegalTransition(f"{self.transactional_id}: {self.state.kafka_name} -> {state.kafka_name}")
        base = Transit(self.producer_id, self.last_producer_id, self.producer_epoch, self.last_producer_epoch,
                       self.timeout_ms, state, frozenset(self.partitions), self.start_ms, now_ms)
        self.pending = state
        return replace(base, **changes)

    # -- applying what the log holds -------------------------------------------------------
    def complete(self, t: Transit) -> None:
        """Apply a transit once its write is replicated (Kafka's completeTransitionTo)."""
        if self.pending != t.state and not (self.pending is None and t.state == self.state):
            raise IllegalTransition(f"{self.transactional_id}: completing {t.state.kafka_name}, "
                                    f"pending {self.pending and self.pending.kafka_name}")
        if self.state not in VALID_PREVIOUS[t.state]:
            raise IllegalTransition(f"{self.transactional_id}: {self.state.kafka_name} -> {t.state.kafka_name}")
        self.producer_id, self.last_producer_id = t.producer_id, t.last_producer_id
        self.producer_epoch, self.last_producer_epoch = t.producer_epoch, t.last_producer_epoch
        self.timeout_ms, self.state = t.timeout_ms, t.state
        self.partitions = set(t.partitions)
        self.start_ms, self.last_update_ms = t.start_ms, t.last_update_ms
        self.pending = None
        self.failed_epoch_fence = False

    def abandon(self) -> None:
        """The write of the pending transition failed: nothing changes (Kafka's pendingState = None)."""
        if self.pending == TxnState.PREPARE_EPOCH_FENCE:
            self.failed_epoch_fence = True
        self.pending = None


def from_log(transactional_id: str, t: Transit) -> TxnMetadata:
    """The metadata a replayed record describes (loading a shard)."""
    return TxnMetadata(transactional_id, t.producer_id, t.producer_epoch, t.timeout_ms, t.state,
                       set(t.partitions), t.start_ms, t.last_update_ms, t.last_producer_id, t.last_producer_epoch)


def valid_timeout(timeout_ms: int, max_timeout_ms: int) -> bool:
    return 0 < timeout_ms <= max_timeout_ms


# -- InitProducerId ---------------------------------------------------------------------------

def needs_new_producer_id(m: TxnMetadata, expected_epoch: int | None) -> bool:
    """An exhausted epoch moves to a new producer id (Kafka's prepareProducerIdRotation)."""
    return (m.state in (S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT) and m.epoch_exhausted
            and (expected_epoch is None or expected_epoch == m.producer_epoch))


def prepare_init(m: TxnMetadata, timeout_ms: int, now_ms: int, expected: tuple[int, int] | None = None,
                 new_producer_id: int | None = None) -> Transit:
    """InitProducerId for an existing id. Returns the transit to write; a PrepareEpochFence
    transit means an ongoing transaction must be aborted first (the client is told
    CONCURRENT_TRANSACTIONS and retries). `expected` is KIP-360's (producer id, epoch)."""
    if m.pending is not None:
        raise TxnError(ErrorCode.concurrent_transactions)
    if expected is not None and not (
            m.producer_epoch == NO_PRODUCER_EPOCH or expected[0] == m.producer_id
            or (expected[0] == m.last_producer_id and expected[1] >= MAX_EPOCH - 1)):
        raise TxnError(ErrorCode.producer_fenced, "the producer id was given to another producer")
    if m.state in (S.PREPARE_ABORT, S.PREPARE_COMMIT):
        raise TxnError(ErrorCode.concurrent_transactions, "the last transaction is being completed")
    if m.state in (S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT):
        expected_epoch = None if expected is None else expected[1]
        if needs_new_producer_id(m, expected_epoch):
            if new_producer_id is None:
                raise IllegalTransition("a new producer id is needed")
            return m._transit(S.EMPTY, now_ms, producer_id=new_producer_id, producer_epoch=0,
                              last_producer_id=m.producer_id,
                              last_producer_epoch=m.producer_epoch if expected is not None else NO_PRODUCER_EPOCH,
                              timeout_ms=timeout_ms, partitions=frozenset(), start_ms=-1)
        bumped = m.producer_epoch + 1
        if expected_epoch is None:
            epoch, last = bumped, NO_PRODUCER_EPOCH
        elif m.producer_epoch == NO_PRODUCER_EPOCH or expected_epoch == m.producer_epoch:
            epoch, last = bumped, m.producer_epoch
        elif expected_epoch == m.last_producer_epoch:
            epoch, last = m.producer_epoch, m.last_producer_epoch  # a retry of a bump already done
        else:
            raise TxnError(ErrorCode.producer_fenced, f"epoch {expected_epoch} is not the current one")
        return m._transit(S.EMPTY, now_ms, producer_epoch=epoch, last_producer_epoch=last, timeout_ms=timeout_ms,
                          partitions=frozenset(), start_ms=-1)
    if m.state == S.ONGOING:
        return prepare_fence(m, now_ms)
    raise IllegalTransition(f"{m.transactional_id}: InitProducerId in state {m.state.kafka_name}")


def prepare_fence(m: TxnMetadata, now_ms: int) -> Transit:
    """Bump the epoch of an ongoing transaction so its producer is fenced and the abort markers
    carry an epoch newer than its batches (never written to the log as such)."""
    if m.producer_epoch == MAX_EPOCH:
        raise IllegalTransition(f"{m.transactional_id}: epoch exhausted, cannot fence")
    epoch = m.producer_epoch if m.failed_epoch_fence else m.producer_epoch + 1
    return m._transit(S.PREPARE_EPOCH_FENCE, now_ms, producer_epoch=epoch, last_producer_epoch=NO_PRODUCER_EPOCH,
                      last_update_ms=m.last_update_ms)


# -- AddPartitionsToTxn / AddOffsetsToTxn ------------------------------------------------------

def _check_producer(m: TxnMetadata, producer_id: int, epoch: int) -> None:
    if m.producer_id != producer_id:
        raise TxnError(ErrorCode.invalid_producer_id_mapping, "the producer id is not this transactional id's")
    if m.producer_epoch != epoch:
        raise TxnError(ErrorCode.producer_fenced, "a newer producer with the same transactional id exists")


def prepare_add_partitions(m: TxnMetadata, producer_id: int, epoch: int, partitions: set[Partition],
                           now_ms: int) -> Transit | None:
    """None: every partition is already in the ongoing transaction (answer NONE, write nothing)."""
    _check_producer(m, producer_id, epoch)
    if m.pending is not None or m.state in (S.PREPARE_COMMIT, S.PREPARE_ABORT):
        raise TxnError(ErrorCode.concurrent_transactions)
    if m.state == S.ONGOING and partitions <= m.partitions:
        return None
    if m.state in (S.DEAD, S.PREPARE_EPOCH_FENCE):
        raise IllegalTransition(f"{m.transactional_id}: AddPartitions in state {m.state.kafka_name}")
    start = now_ms if m.state in (S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT) else m.start_ms
    return m._transit(S.ONGOING, now_ms, partitions=frozenset(m.partitions | partitions), start_ms=start)


def verify_partitions(m: TxnMetadata, producer_id: int, epoch: int,
                      partitions: set[Partition]) -> dict[Partition, ErrorCode]:
    """AddPartitionsToTxn v4+ with verify_only (a partition leader asking, KIP-890 part 1)."""
    _check_producer(m, producer_id, epoch)
    if m.state in (S.PREPARE_COMMIT, S.PREPARE_ABORT):
        raise TxnError(ErrorCode.concurrent_transactions)
    return {p: ErrorCode.none if p in m.partitions else ErrorCode.transaction_abortable for p in partitions}


# -- EndTxn ------------------------------------------------------------------------------------

def prepare_end(m: TxnMetadata, producer_id: int, epoch: int, commit: bool, now_ms: int,
                from_client: bool = True) -> Transit | None:
    """EndTxn (transaction version 1). None: the transaction already ended that way (a retry,
    answer NONE). From the coordinator itself (fencing, timeouts) the epoch may be newer."""
    if m.producer_id != producer_id:
        raise TxnError(ErrorCode.invalid_producer_id_mapping, "the producer id is not this transactional id's")
    valid_epoch = (not from_client or epoch == m.producer_epoch) and epoch >= m.producer_epoch
    if not valid_epoch:
        raise TxnError(ErrorCode.producer_fenced, "a newer producer with the same transactional id exists")
    fencing = m.pending == S.PREPARE_EPOCH_FENCE
    if m.pending is not None and not fencing:
        raise TxnError(ErrorCode.concurrent_transactions)
    result = "COMMIT" if commit else "ABORT"
    if m.state == S.ONGOING:
        target = S.PREPARE_COMMIT if commit else S.PREPARE_ABORT
        if fencing:
            if commit:
                raise IllegalTransition("a fenced transaction can only be aborted")
            m.pending = None
            m.producer_epoch, m.last_producer_epoch = epoch, NO_PRODUCER_EPOCH
        return m._transit(target, now_ms)
    if m.state == S.COMPLETE_COMMIT and commit or m.state == S.COMPLETE_ABORT and not commit:
        return None
    if m.state == S.PREPARE_COMMIT and commit or m.state == S.PREPARE_ABORT and not commit:
        raise TxnError(ErrorCode.concurrent_transactions, f"{result} is being completed")
    if m.state in (S.DEAD, S.PREPARE_EPOCH_FENCE):
        raise IllegalTransition(f"{m.transactional_id}: EndTxn in state {m.state.kafka_name}")
    raise TxnError(ErrorCode.invalid_txn_state, f"cannot {result} in state {m.state.kafka_name}")


def prepare_complete(m: TxnMetadata, now_ms: int) -> Transit:
    """Every marker is written: PrepareCommit -> CompleteCommit, PrepareAbort -> CompleteAbort."""
    target = {S.PREPARE_COMMIT: S.COMPLETE_COMMIT, S.PREPARE_ABORT: S.COMPLETE_ABORT}.get(m.state)
    if target is None:
        raise IllegalTransition(f"{m.transactional_id}: completing from {m.state.kafka_name}")
    return m._transit(target, now_ms, partitions=frozenset())


def prepare_dead(m: TxnMetadata, now_ms: int) -> Transit:
    """transactional.id.expiration.ms passed without a transaction: the id is forgotten."""
    return m._transit(S.DEAD, now_ms, partitions=frozenset())


def timed_out(m: TxnMetadata, now_ms: int) -> bool:
    """An ongoing transaction older than its timeout, not already being changed."""
    return m.state == S.ONGOING and m.pending is None and m.start_ms + m.timeout_ms < now_ms


def expired(m: TxnMetadata, now_ms: int, expiration_ms: int) -> bool:
    return (m.state in (S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT) and m.pending is None
            and m.last_update_ms + expiration_ms <= now_ms)
