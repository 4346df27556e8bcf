"""What a restarted broker makes of the partitions its previous process led."""

from broker.metadata.store import PartitionState
from broker.replica.restart_fencing import after_restart


def test_alone_in_sync_it_leads_again_two_epochs_later():
    s = PartitionState(leader=1, leader_epoch=4, replicas=(1, 2), isr=(1,))
    assert after_restart(s, 1, frozenset({1, 2})) == PartitionState(1, 6, (1, 2), (1,))


def test_another_live_in_sync_replica_takes_over_and_it_leaves_the_isr():
    s = PartitionState(leader=1, leader_epoch=4, replicas=(1, 2, 3), isr=(1, 2, 3))
    assert after_restart(s, 1, frozenset({1, 3})) == PartitionState(3, 5, (1, 2, 3), (2, 3))


def test_partitions_it_does_not_lead_are_left_alone():
    assert after_restart(PartitionState(2, 4, (1, 2), (1, 2)), 1, frozenset({1, 2})) is None
