from broker.coordinator.producer_ids import BLOCK_SIZE, ProducerIdManager


def test_ids_are_unique_across_restarts(tmp_path):
    m = ProducerIdManager(tmp_path)
    first = [m.next_id() for _ in range(3)]
    assert first == [0, 1, 2]
    again = ProducerIdManager(tmp_path)  # a crash: the rest of the block is skipped, never reused
    assert again.next_id() == BLOCK_SIZE
