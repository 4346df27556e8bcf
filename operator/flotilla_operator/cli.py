"""`flotilla operator`: run the operator (kopf) against the current kubeconfig or in a pod."""

from __future__ import annotations

import argparse
import asyncio
import os
from dataclasses import replace

import yaml

from .settings import LeaderElection, Settings


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "-n", "--namespace", action="append", default=None, metavar="NS",
        help="watch this namespace (repeatable); default: every namespace, or $FLOTILLA_OPERATOR_NAMESPACES",
    )
    parser.add_argument(
        "-A", "--all-namespaces", action="store_true", help="watch every namespace (the default without --namespace)"
    )
    parser.add_argument(
        "--metrics-address", metavar="HOST:PORT",
        help="Prometheus endpoint (default 127.0.0.1:9405, 'off' to disable)",
    )
    parser.add_argument(
        "--liveness-address", metavar="HOST:PORT",
        help="kopf liveness endpoint /healthz (default 127.0.0.1:8080, 'off' to disable)",
    )
    parser.add_argument("--resync-seconds", type=float, help="re-apply every KafkaCluster this often (default 60)")
    parser.add_argument("--broker-image", help="broker image for clusters without spec.image")
    election = parser.add_argument_group("leader election (two or more replicas; docs/operator.md)")
    election.add_argument("--leader-elect", action="store_true",
                          help="campaign for a Lease and reconcile only while holding it ($FLOTILLA_OPERATOR_LEADER_ELECT)")
    election.add_argument("--lease-namespace", help="the Lease's namespace (default $POD_NAMESPACE)")
    election.add_argument("--lease-name", help="the Lease's name (default flotilla-operator)")
    election.add_argument("--lease-duration", type=float, metavar="S",
                          help="a standby takes over this long after the last renewal it saw (default 15)")
    election.add_argument("--renew-deadline", type=float, metavar="S",
                          help="the leader exits when it could not renew for this long (default 10)")
    election.add_argument("--retry-period", type=float, metavar="S", help="renew and retry interval (default 2)")
    election.add_argument("--health-address", metavar="HOST:PORT",
                          help="/livez and /readyz under --leader-elect (default 127.0.0.1:8081)")
    parser.add_argument("-v", "--verbose", action="store_true", help="log kopf's details")


def settings_from_args(args: argparse.Namespace, env: dict[str, str] | None = None) -> Settings:
    s = Settings.from_env(env)
    if args.namespace and not args.all_namespaces:
        s = replace(s, namespaces=tuple(args.namespace))
    elif args.all_namespaces:
        s = replace(s, namespaces=())
    if args.metrics_address is not None:
        s = s.with_metrics(args.metrics_address)
    if args.liveness_address is not None:
        s = s.with_liveness(args.liveness_address)
    if args.resync_seconds is not None:
        s = replace(s, resync_seconds=args.resync_seconds)
    if args.broker_image:
        s = replace(s, broker_image=args.broker_image)
    return replace(s, election=election_from_args(args, s.election))


def election_from_args(args: argparse.Namespace, e: LeaderElection) -> LeaderElection:
    if getattr(args, "leader_elect", False):
        e = replace(e, enabled=True)
    for flag, key in (("lease_namespace", "namespace"), ("lease_name", "name"), ("lease_duration", "lease_duration_s"),
                      ("renew_deadline", "renew_deadline_s"), ("retry_period", "retry_period_s")):
        value = getattr(args, flag, None)
        if value is not None:
            e = replace(e, **{key: value})
    if getattr(args, "health_address", None):
        e = e.with_health(args.health_address)
    return e


def describe_kube_context() -> str:
    """Where the operator will connect, in words."""
    if os.environ.get("KUBERNETES_SERVICE_HOST") and os.path.exists(
        "/var/run/secrets/kubernetes.io/serviceaccount/token"
    ):
        return f"in-cluster (service account), API https://{os.environ['KUBERNETES_SERVICE_HOST']}"
    paths = [p for p in os.environ.get("KUBECONFIG", "").split(os.pathsep) if p] or [
        os.path.expanduser("~/.kube/config")
    ]
    docs = []
    for path in paths:
        try:
            with open(path) as fh:
                docs.append(yaml.safe_load(fh) or {})
        except OSError:
            continue
    if not docs:
        return f"no kubeconfig found ({os.pathsep.join(paths)})"
    current = next((d.get("current-context") for d in docs if d.get("current-context")), None)
    contexts = {c["name"]: c.get("context") or {} for d in docs for c in d.get("contexts") or []}
    clusters = {c["name"]: c.get("cluster") or {} for d in docs for c in d.get("clusters") or []}
    if not current or current not in contexts:
        return f"kubeconfig {os.pathsep.join(paths)} has no usable current-context"
    server = clusters.get(contexts[current].get("cluster"), {}).get("server", "?")
    return f"kube context {current!r} (server {server}, kubeconfig {os.pathsep.join(paths)})"


def run(args: argparse.Namespace) -> int:
    import kopf

    settings = settings_from_args(args)
    print(f"flotilla operator: {describe_kube_context()}", flush=True)
    print(
        "flotilla operator: watching "
        + (f"namespaces {', '.join(settings.namespaces)}" if settings.namespaces else "all namespaces"),
        flush=True,
    )
    print(f"flotilla operator: metrics {settings.metrics_url or 'off'}, liveness {settings.liveness_url or 'off'}", flush=True)

    from . import handlers  # noqa: F401  (registers the handlers)

    kopf.configure(verbose=args.verbose)
    if settings.election.enabled:
        from .election.process import run_elected

        return asyncio.run(run_elected(settings))
    kopf.run(
        standalone=True,
        clusterwide=settings.clusterwide,
        namespaces=list(settings.namespaces),
        liveness_endpoint=settings.liveness_url,
        memo=kopf.Memo(settings=settings),
    )
    return 0
