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


def test_leader_election_is_off_unless_asked_and_takes_its_flags_and_env(tmp_path):
    assert not cli.settings_from_args(_args(), env={}).election.enabled
    env = {"FLOTILLA_OPERATOR_LEADER_ELECT": "true", "POD_NAMESPACE": "ops", "POD_NAME": "op-7d9f-x2"}
    e = cli.settings_from_args(_args(), env=env).election
    assert e.enabled and e.lease_namespace() == "ops" and e.name == "flotilla-operator"
    assert e.identity.startswith("op-7d9f-x2_") and len(e.identity) > len("op-7d9f-x2_")
    assert (e.lease_duration_s, e.renew_deadline_s, e.retry_period_s) == (15, 10, 2)
    e = cli.settings_from_args(_args("--leader-elect", "--lease-namespace", "other", "--lease-name", "mine",
                                     "--lease-duration", "4", "--renew-deadline", "3", "--retry-period", "0.5",
                                     "--health-address", "0.0.0.0:9000"), env={}).election
    assert (e.enabled, e.namespace, e.name, e.lease_duration_s, e.renew_deadline_s, e.retry_period_s) == \
        (True, "other", "mine", 4, 3, 0.5)
    assert (e.health_host, e.health_port) == ("0.0.0.0", 9000)
    # Without a namespace given: the service account's, else a message saying how to give one.
    sa = tmp_path / "namespace"
    sa.write_text("from-sa\n")
    bare = cli.settings_from_args(_args("--leader-elect"), env={}).election
    assert bare.lease_namespace(str(sa)) == "from-sa"
    try:
        bare.lease_namespace(str(tmp_path / "missing"))
    except ValueError as exc:
        assert "--lease-namespace" in str(exc)
    else:
        raise AssertionError("no namespace and no service account: refused")


def test_every_election_setting_has_a_unique_identity_even_unconfigured():
    from flotilla_operator.settings import LeaderElection

    a, b = LeaderElection(), LeaderElection()
    assert a.identity and b.identity and a.identity != b.identity
