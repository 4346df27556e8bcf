import pytest

from broker.log.checkpoints import read_checkpoint, write_checkpoint


def test_round_trip_and_format(tmp_path):
    p = tmp_path / "recovery-point-offset-checkpoint"
    write_checkpoint(p, {("orders", 1): 99, ("orders", 0): 1234, ("my-topic", 10): 5})
    assert p.read_text().splitlines()[:3] == ["0", "3", "my-topic 10 5"]
    assert read_checkpoint(p) == {("orders", 1): 99, ("orders", 0): 1234, ("my-topic", 10): 5}


def test_missing_is_empty_and_malformed_raises(tmp_path):
    assert read_checkpoint(tmp_path / "nope") == {}
    bad = tmp_path / "bad"
    bad.write_text("0\n2\nt 0 1\n")
    with pytest.raises(ValueError, match="expected 2"):
        read_checkpoint(bad)
