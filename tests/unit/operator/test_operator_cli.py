import argparse

from flotilla_operator import cli


def _args(*argv):
    parser = argparse.ArgumentParser()
    cli.add_arguments(parser)
    return parser.parse_args(list(argv))


def test_defaults_are_clusterwide():
    s = cli.settings_from_args(_args(), env={})
    assert s.clusterwide and s.metrics_port == 9405


def test_flags_override_env():
    env = {"FLOTILLA_OPERATOR_NAMESPACES": "x", "FLOTILLA_OPERATOR_METRICS_ADDRESS": "1.2.3.4:1"}
    s = cli.settings_from_args(_args("-n", "a", "--namespace", "b", "--metrics-address", "0.0.0.0:9405",
                                     "--liveness-address", "off", "--resync-seconds", "5", "--broker-image", "b:1"), env=env)
    assert s.namespaces == ("a", "b") and s.metrics_host == "0.0.0.0"
    assert s.liveness_url is None and s.resync_seconds == 5 and s.broker_image == "b:1"
    assert cli.settings_from_args(_args("-A"), env=env).clusterwide


def test_describe_kube_context(tmp_path, monkeypatch):
    kubeconfig = tmp_path / "config"
    kubeconfig.write_text(
        "apiVersion: v1\nkind: Config\ncurrent-context: dev\n"
        "clusters: [{name: c, cluster: {server: 'https://127.0.0.1:6443'}}]\n"
        "users: [{name: u, user: {token: t}}]\n"
        "contexts: [{name: dev, context: {cluster: c, user: u}}]\n"
    )
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    monkeypatch.setenv("KUBECONFIG", str(kubeconfig))
    text = cli.describe_kube_context()
    assert "'dev'" in text and "https://127.0.0.1:6443" in text


def test_router_finds_the_subcommand(capsys):
    from flotilla.cli import main

    try:
        main(["operator", "--help"])
    except SystemExit as exc:
        assert exc.code == 0
    assert "--namespace" in capsys.readouterr().out
