"""The `flotilla testenv` argument parser and the fixture's helpers."""

import argparse
from pathlib import Path

import pytest

from flotilla.testenv import cli, nodes, pytest_plugin


def _parse(*argv):
    parser = argparse.ArgumentParser()
    cli.add_arguments(parser)
    return parser.parse_args(argv)


def test_subcommands():
    assert _parse("build").testenv_command == "build"
    args = _parse("up", "--dir", "/tmp/x", "--nodes", "3")
    assert (args.testenv_command, args.dir, args.nodes) == ("up", Path("/tmp/x"), 3)
    assert _parse("down").dir == _parse("up").dir


def test_an_action_is_required():
    with pytest.raises(SystemExit):
        _parse()


def test_down_with_nothing_recorded_succeeds(tmp_path, capsys):
    assert cli.run(_parse("down", "--dir", str(tmp_path))) == 0
    assert "nothing recorded" in capsys.readouterr().err


def test_namespace_names_are_valid_dns_labels():
    name = pytest_plugin._namespace_name("test_Something[param-1]" + "x" * 80)
    assert len(name) <= 63
    assert name == name.lower() and name[0].isalnum() and name[-1].isalnum()
    assert pytest_plugin._namespace_name("t") != pytest_plugin._namespace_name("t")


def test_fake_nodes_follow_kwok_conventions_without_taints():
    node = nodes.node_manifest("kwok-node-0")
    assert node["metadata"]["annotations"][nodes.KWOK_ANNOTATION] == nodes.KWOK_VALUE
    assert "taints" not in node["spec"]
    assert node["status"]["allocatable"]["pods"] == "110"
