"""Writes refused while this broker's Lease may have lapsed (issue 35): the controller may have
elected another leader, so a partition led here whose in-sync follower went silent takes no more
writes, and acks=all writes waiting on it are answered at once (NOT_LEADER_OR_FOLLOWER)."""

from __future__ import annotations

from broker.replica.partition import Partition, _now_ms


class LeaseFencing:
    """Part of ReplicaManager (replica/replica_manager.py): `may_have_lapsed` is the store's Lease
    clock (wired by server/broker.py), `follower_silence_ms` how long a quiet follower may be."""

    def writes_fenced(self, part: Partition) -> bool:
        """Whether a partition led here takes no more writes (NOT_LEADER_OR_FOLLOWER: retriable, the
        client looks for the new leader): this broker's Lease may have lapsed, so the controller
        may have elected another leader, and an in-sync follower has stopped fetching from here
        (the sign that it follows someone else). Through an outage of the API server itself every
        Lease lapses but no one can elect anyone and the followers fetch on: writes go on then."""
        rs = part.replica_state
        if rs is None or not self.may_have_lapsed():
            return False
        now = _now_ms()
        return any(now - rs.followers[r].last_fetch_time_ms > self.follower_silence_ms
                   for r in rs.maximal_isr if r in rs.followers)

    def registration_lapsed(self) -> None:
        """While this broker's Lease may have lapsed (called every tick of the store's Lease
        clock): acks=all writes waiting on partitions led here whose followers went silent are
        answered now instead of at their timeout."""
        for tp, part in list(self.partitions.items()):
            if part.is_leader and self.writes_fenced(part):
                self.produce_purgatory.check_and_complete(tp)
