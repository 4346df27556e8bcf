"""Typed operator settings: defaults, then environment variables, then command-line flags."""

from __future__ import annotations

import os
import socket
import uuid
from dataclasses import dataclass, field, replace
from importlib import metadata
from typing import Mapping


def _version() -> str:
    try:
        return metadata.version("flotilla")
    except metadata.PackageNotFoundError:  # pragma: no cover - running from a bare checkout
        return "0.1.0"


def parse_address(text: str, default_host: str = "127.0.0.1") -> tuple[str, int]:
    """'host:port', ':port' or 'port' -> (host, port). Raises ValueError on anything else."""
    host, sep, port = text.rpartition(":")
    if not sep:
        host, port = "", text
    host = host.strip("[]") or default_host
    number = int(port)
    if not 0 <= number <= 65535:
        raise ValueError(f"port out of range in {text!r}")
    return host, number


def _identity(pod_name: str | None) -> str:
    """Unique per process, even for two on one host (client-go: host name and a UUID)."""
    return f"{pod_name or socket.gethostname()}_{uuid.uuid4().hex[:8]}"


@dataclass(frozen=True)
class LeaderElection:
    """`--leader-elect`: which Lease the replicas campaign for, how fast, and where /readyz is."""

    enabled: bool = False
    """FLOTILLA_OPERATOR_LEADER_ELECT=true; off by default (a lone local run needs no Lease)."""

    namespace: str = ""
    """The Lease's namespace: FLOTILLA_OPERATOR_LEASE_NAMESPACE, else $POD_NAMESPACE (the chart sets
    it), else the service account's namespace."""

    name: str = "flotilla-operator"
    """The Lease's name. FLOTILLA_OPERATOR_LEASE_NAME."""

    identity: str = field(default_factory=lambda: _identity(None))
    """This replica's holderIdentity: $POD_NAME (or the host name) and a random suffix."""

    lease_duration_s: float = 15.0
    """A standby takes over this long after it last saw the Lease renewed."""

    renew_deadline_s: float = 10.0
    """The leader stops (exits) when no renewal succeeded for this long."""

    retry_period_s: float = 2.0
    """How often the leader renews and a standby tries."""

    health_host: str = "127.0.0.1"
    """Address of /livez and /readyz (the chart sets 0.0.0.0). FLOTILLA_OPERATOR_HEALTH_ADDRESS."""

    health_port: int = 8081

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> LeaderElection:
        e = cls(enabled=env.get("FLOTILLA_OPERATOR_LEADER_ELECT", "").lower() in ("1", "true", "yes"),
                namespace=env.get("FLOTILLA_OPERATOR_LEASE_NAMESPACE") or env.get("POD_NAMESPACE") or "",
                name=env.get("FLOTILLA_OPERATOR_LEASE_NAME") or cls.name,
                identity=_identity(env.get("POD_NAME")))
        if env.get("FLOTILLA_OPERATOR_HEALTH_ADDRESS"):
            e = e.with_health(env["FLOTILLA_OPERATOR_HEALTH_ADDRESS"])
        return e

    def with_health(self, address: str) -> LeaderElection:
        host, port = parse_address(address)
        return replace(self, health_host=host, health_port=port)

    def lease_namespace(self, service_account_ns: str = "/var/run/secrets/kubernetes.io/serviceaccount/namespace") -> str:
        if self.namespace:
            return self.namespace
        try:
            with open(service_account_ns) as fh:
                return fh.read().strip()
        except OSError:
            raise ValueError("--leader-elect needs the Lease's namespace: --lease-namespace, "
                             "$FLOTILLA_OPERATOR_LEASE_NAMESPACE or $POD_NAMESPACE") from None


@dataclass(frozen=True)
class Settings:
    """How the operator runs. Every field can be set by an environment variable (named in its doc)."""

    namespaces: tuple[str, ...] = ()
    """Namespaces to watch; empty means every namespace (cluster-wide). FLOTILLA_OPERATOR_NAMESPACES=a,b."""

    metrics_host: str = "127.0.0.1"
    """Address of the Prometheus endpoint (/metrics). The chart sets 0.0.0.0. FLOTILLA_OPERATOR_METRICS_ADDRESS."""

    metrics_port: int = 9405
    """Port of the Prometheus endpoint; 0 picks a free port (tests); -1 disables it."""

    liveness_host: str = "127.0.0.1"
    """Address of kopf's liveness endpoint (/healthz). FLOTILLA_OPERATOR_LIVENESS_ADDRESS."""

    liveness_port: int = 8080
    """Port of kopf's liveness endpoint; -1 disables it."""

    resync_seconds: float = 60.0
    """How often every KafkaCluster is re-applied even without changes, repairing drift in its
    children (an edited or deleted Service, ConfigMap, ...). FLOTILLA_OPERATOR_RESYNC_SECONDS."""

    broker_image: str = field(default_factory=lambda: f"flotilla:{_version()}")
    """Broker image for clusters whose spec.image is unset. FLOTILLA_BROKER_IMAGE."""

    image_pull_policy: str = "IfNotPresent"
    """Pull policy for clusters whose spec.imagePullPolicy is unset. FLOTILLA_BROKER_IMAGE_PULL_POLICY."""

    field_manager: str = "flotilla-operator"
    """Field manager name used for server-side apply."""

    election: LeaderElection = field(default_factory=lambda: LeaderElection())
    """Leader election among replicas (off unless asked for: the chart turns it on)."""

    @property
    def clusterwide(self) -> bool:
        return not self.namespaces

    @property
    def metrics_url(self) -> str | None:
        return None if self.metrics_port < 0 else f"http://{self.metrics_host}:{self.metrics_port}/metrics"

    @property
    def liveness_url(self) -> str | None:
        return None if self.liveness_port < 0 else f"http://{self.liveness_host}:{self.liveness_port}/healthz"

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> Settings:
        env = os.environ if env is None else env
        s = cls()
        if env.get("FLOTILLA_OPERATOR_NAMESPACES"):
            s = replace(s, namespaces=tuple(n.strip() for n in env["FLOTILLA_OPERATOR_NAMESPACES"].split(",") if n.strip()))
        if env.get("FLOTILLA_OPERATOR_METRICS_ADDRESS"):
            s = s.with_metrics(env["FLOTILLA_OPERATOR_METRICS_ADDRESS"])
        if env.get("FLOTILLA_OPERATOR_LIVENESS_ADDRESS"):
            s = s.with_liveness(env["FLOTILLA_OPERATOR_LIVENESS_ADDRESS"])
        if env.get("FLOTILLA_OPERATOR_RESYNC_SECONDS"):
            s = replace(s, resync_seconds=float(env["FLOTILLA_OPERATOR_RESYNC_SECONDS"]))
        if env.get("FLOTILLA_BROKER_IMAGE"):
            s = replace(s, broker_image=env["FLOTILLA_BROKER_IMAGE"])
        if env.get("FLOTILLA_BROKER_IMAGE_PULL_POLICY"):
            s = replace(s, image_pull_policy=env["FLOTILLA_BROKER_IMAGE_PULL_POLICY"])
        return replace(s, election=LeaderElection.from_env(env))

    def with_metrics(self, address: str) -> Settings:
        if address in ("off", "none", ""):
            return replace(self, metrics_port=-1)
        host, port = parse_address(address)
        return replace(self, metrics_host=host, metrics_port=port)

    def with_liveness(self, address: str) -> Settings:
        if address in ("off", "none", ""):
            return replace(self, liveness_port=-1)
        host, port = parse_address(address)
        return replace(self, liveness_host=host, liveness_port=port)
