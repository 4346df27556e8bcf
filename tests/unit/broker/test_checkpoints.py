import os

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


def test_rename_is_made_durable_by_fsyncing_the_directory(tmp_path, monkeypatch):
    """Without an fsync of the directory after the rename, a crash can bring the old file back."""
    events = []
    real_fsync, real_replace = os.fsync, os.replace
    monkeypatch.setattr(os, "fsync", lambda fd: events.append(("fsync", os.readlink(f"/proc/self/fd/{fd}"))) or real_fsync(fd))
    monkeypatch.setattr(os, "replace", lambda a, b: events.append(("replace", str(b))) or real_replace(a, b))
    path = tmp_path / "recovery-point-offset-checkpoint"
    write_checkpoint(path, {("t", 0): 5})
    assert events[-2:] == [("replace", str(path)), ("fsync", str(tmp_path))]
    assert not list(tmp_path.glob("*.tmp"))
