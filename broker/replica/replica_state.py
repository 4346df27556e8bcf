"""What a partition's leader knows about its followers (Kafka's Replica and the ISR part of
Partition): each follower's log end offset and when it was last caught up, the high watermark as
the minimum over the in-sync replicas, which followers fell out of sync (ISR shrink) and which
caught up (ISR expand), and whether acks=all has enough in-sync replicas.

Pure state, no I/O and no clock of its own (times are passed in, in ms). An ISR change is only
proposed here: the caller writes it to the partition's metadata object (a compare-and-set) and
reports the outcome with `isr_committed` or `isr_rejected`. While a change is in flight the high
watermark counts the larger of the two ISRs (Kafka's "maximal ISR"), so a follower being added
already holds the high watermark back and one being removed still does until the write lands:
the high watermark never passes an offset some replica that might be in the ISR lacks.

Used by replica/replica_manager.py: followers' fetches (privileged KIP-227 sessions, handlers/fetch.py)
call `update_follower`, ISR proposals are written by replica/isr_updates.py, and acks=all produces
wait on `enough_replicas_reached` (replica/delayed_produce.py).
"""

from __future__ import annotations

from dataclasses import dataclass, field

UNKNOWN_OFFSET = -1


@dataclass(slots=True)
class FollowerState:
    """One follower as the leader sees it, from its fetches (Kafka's ReplicaState)."""

    broker_id: int
    log_end_offset: int = UNKNOWN_OFFSET  # the follower's fetch offset: it has everything below
    log_start_offset: int = UNKNOWN_OFFSET
    last_fetch_leader_log_end_offset: int = UNKNOWN_OFFSET  # the leader's end at the follower's last fetch
    last_fetch_time_ms: int = 0
    last_caught_up_time_ms: int = 0  # the last time it had everything the leader had

    def update_fetch(self, fetch_offset: int, log_start_offset: int, leader_log_end_offset: int,
                     now_ms: int) -> None:
        """A fetch from `fetch_offset`: the follower has everything below it. It was caught up now
        if it reached the leader's end, or at its previous fetch if it reached what the leader had
        then (so a follower always one fetch behind a busy leader still counts as caught up)."""
        if fetch_offset >= leader_log_end_offset:
            self.last_caught_up_time_ms = max(self.last_caught_up_time_ms, now_ms)
        elif fetch_offset >= self.last_fetch_leader_log_end_offset:
            self.last_caught_up_time_ms = max(self.last_caught_up_time_ms, self.last_fetch_time_ms)
        self.log_end_offset = fetch_offset
        self.log_start_offset = log_start_offset
        self.last_fetch_leader_log_end_offset = max(leader_log_end_offset, self.last_fetch_leader_log_end_offset)
        self.last_fetch_time_ms = now_ms

    def is_caught_up(self, leader_log_end_offset: int, now_ms: int, max_lag_ms: int) -> bool:
        """In sync by replica.lag.time.max.ms: at the leader's end, or caught up recently enough."""
        return (self.log_end_offset == leader_log_end_offset
                or now_ms - self.last_caught_up_time_ms <= max_lag_ms)


@dataclass(slots=True)
class LeaderReplicaState:
    """The ISR and followers of one partition this broker leads, for one leader epoch."""

    leader_id: int
    replicas: tuple[int, ...]  # the assignment, leader included
    isr: frozenset[int]  # committed in the partition's metadata
    high_watermark: int
    leader_epoch_start_offset: int  # where this leader's epoch began (log end when it took over)
    max_lag_ms: int = 30_000  # replica.lag.time.max.ms
    followers: dict[int, FollowerState] = field(default_factory=dict)
    pending_isr: frozenset[int] | None = None  # proposed, not yet committed

    @classmethod
    def become_leader(cls, leader_id: int, replicas: tuple[int, ...], isr: frozenset[int], high_watermark: int,
                      log_end_offset: int, now_ms: int, max_lag_ms: int = 30_000) -> "LeaderReplicaState":
        """A new leader knows nothing of its followers' logs yet; those in the ISR count as caught
        up now, so they get replica.lag.time.max.ms to fetch before they can be dropped."""
        state = cls(leader_id, tuple(replicas), frozenset(isr), high_watermark, log_end_offset, max_lag_ms)
        for r in replicas:
            if r != leader_id:
                state.followers[r] = FollowerState(r, last_caught_up_time_ms=now_ms if r in isr else 0)
        return state

    def set_replicas(self, replicas: tuple[int, ...]) -> None:
        """The assignment changed at the same leader epoch (a reassignment added replicas, KIP-455):
        new followers start knowing nothing (not caught up: they count neither for the high
        watermark nor the ISR until their fetches reach the leader's end); followers no longer
        replicas are forgotten."""
        self.replicas = tuple(replicas)
        for r in replicas:
            if r != self.leader_id and r not in self.followers:
                self.followers[r] = FollowerState(r)
        for r in [r for r in self.followers if r not in replicas]:
            del self.followers[r]

    @property
    def maximal_isr(self) -> frozenset[int]:
        return self.isr | self.pending_isr if self.pending_isr is not None else self.isr

    # -- follower fetches and the high watermark ---------------------------------------------
    def update_follower(self, broker_id: int, fetch_offset: int, log_start_offset: int,
                        leader_log_end_offset: int, now_ms: int, eligible=None) -> bool:
        """Record a follower's fetch; returns whether the high watermark moved."""
        follower = self.followers.get(broker_id)
        if follower is None:
            raise KeyError(f"broker {broker_id} is not a replica of this partition ({self.replicas})")
        follower.update_fetch(fetch_offset, log_start_offset, leader_log_end_offset, now_ms)
        return self.maybe_increment_high_watermark(leader_log_end_offset, now_ms, eligible)

    def maybe_increment_high_watermark(self, leader_log_end_offset: int, now_ms: int, eligible=None) -> bool:
        """High watermark = the least log end offset over the leader and every follower in the
        (maximal) ISR, and over followers caught up but not yet added (they are about to be) whose
        broker may join the ISR (`eligible(broker_id)`, Kafka's isReplicaIsrEligible: registered and
        not shutting down; None: any); it only moves forward. Returns whether it moved."""
        hw = leader_log_end_offset
        for f in self.followers.values():
            counts = f.broker_id in self.maximal_isr or (
                f.is_caught_up(leader_log_end_offset, now_ms, self.max_lag_ms)
                and (eligible is None or eligible(f.broker_id)))
            if counts and f.log_end_offset < hw:
                hw = f.log_end_offset
        if hw > self.high_watermark:
            self.high_watermark = hw
            return True
        return False

    # -- ISR changes --------------------------------------------------------------------------
    def out_of_sync_replicas(self, leader_log_end_offset: int, now_ms: int) -> frozenset[int]:
        """ISR followers that have not caught up within replica.lag.time.max.ms (shrink candidates)."""
        return frozenset(r for r in self.isr if r != self.leader_id
                         and not self.followers[r].is_caught_up(leader_log_end_offset, now_ms, self.max_lag_ms))

    def is_follower_in_sync(self, broker_id: int) -> bool:
        """A follower outside the ISR may join once it has reached the high watermark and this
        leader's epoch (so it holds nothing from an older leader this one does not)."""
        f = self.followers[broker_id]
        return f.log_end_offset >= self.high_watermark and f.log_end_offset >= self.leader_epoch_start_offset

    def propose_shrink(self, leader_log_end_offset: int, now_ms: int) -> frozenset[int] | None:
        """The ISR without its out-of-sync followers, to be written; None if nothing to do or a
        change is already in flight."""
        if self.pending_isr is not None:
            return None
        out = self.out_of_sync_replicas(leader_log_end_offset, now_ms)
        if not out:
            return None
        self.pending_isr = self.isr - out
        return self.pending_isr

    def propose_expand(self, broker_id: int) -> frozenset[int] | None:
        """The ISR with `broker_id` added, if it is in sync and no change is in flight."""
        if self.pending_isr is not None or broker_id in self.isr or broker_id not in self.followers:
            return None
        if not self.is_follower_in_sync(broker_id):
            return None
        self.pending_isr = self.isr | {broker_id}
        return self.pending_isr

    def isr_committed(self, isr: frozenset[int]) -> None:
        """The metadata now says `isr` (our proposal, or what the write found instead)."""
        self.isr = frozenset(isr)
        self.pending_isr = None

    def isr_rejected(self) -> None:
        """The write lost a compare-and-set race; the ISR is as it was until metadata says otherwise."""
        self.pending_isr = None

    # -- DeleteRecords (KIP-107) -----------------------------------------------------------------
    def low_watermark(self, leader_log_start_offset: int, live_brokers) -> int:
        """The least log start offset over the leader and every follower whose broker is live
        (Kafka's lowWatermarkIfLeader: not only the ISR; a follower that has not fetched since this
        leader took over counts as UNKNOWN_OFFSET, -1)."""
        low = leader_log_start_offset
        for f in self.followers.values():
            if f.broker_id in live_brokers and f.log_start_offset < low:
                low = f.log_start_offset
        return low

    # -- acks=all -----------------------------------------------------------------------------
    def has_min_isr(self, min_insync_replicas: int) -> bool:
        """Whether an acks=all write may be appended at all (else NOT_ENOUGH_REPLICAS)."""
        return len(self.isr) >= min_insync_replicas

    def enough_replicas_reached(self, required_offset: int, min_insync_replicas: int) -> tuple[bool, bool]:
        """(done, enough) for an acks=all write ending at `required_offset` (its last offset + 1):
        done once the high watermark passed it; enough unless the ISR shrank below
        min.insync.replicas meanwhile (then NOT_ENOUGH_REPLICAS_AFTER_APPEND)."""
        if self.high_watermark < required_offset:
            return False, True
        return True, len(self.isr) >= min_insync_replicas
