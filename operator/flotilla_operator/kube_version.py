"""Which Kubernetes the operator needs, judged from the API server's /version. Pure: no I/O.

Flotilla needs Kubernetes 1.30 or later (the chart's `kubeVersion: ">=1.30.0-0"`): the admission
policies installed with the CRDs (crds/*-policy.yaml, api/admission_policies.py) are
ValidatingAdmissionPolicies of admissionregistration.k8s.io/v1, which is served from 1.30 on. Below
it `kubectl apply -f crds/` fails on those objects, and what they enforce is not enforced. The rest
(CRDs with CEL rules, server-side apply, Leases) works from 1.25 on. `verdict` says which; the
operator logs it at start-up (handlers.py `startup`) and runs either way: a cluster that cannot
hold the policies loses their guards, not its brokers.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Mapping

MINIMUM = (1, 30)
#: What needs more than the rest: below MINIMUM these are off.
BELOW_MINIMUM = (
    "ValidatingAdmissionPolicy (admissionregistration.k8s.io/v1) is not served, so the admission "
    "policies of crds/ cannot be installed and nothing refuses: deleting an internal topic's KafkaTopic "
    "(__consumer_offsets) through kubectl or a GitOps prune; deleting a KafkaTopic while the cluster runs "
    "with delete.topic.enable=false; a broker of one cluster writing another cluster's KafkaTopics or "
    "Leases in a shared namespace",
)
#: Below this nothing works: CEL validation rules in CRDs (x-kubernetes-validations) are GA in 1.25.
FLOOR = (1, 25)


@dataclass(frozen=True)
class Verdict:
    version: str  # as the server says it (gitVersion), or what could be read of it
    supported: bool | None  # None: the version could not be read
    message: str  # one line to log
    off: tuple[str, ...] = ()  # what does not work on this version

    @property
    def lines(self) -> list[str]:
        return [self.message, *(f"off: {what}" for what in self.off)]


def _number(text: Any) -> int | None:
    """"30", "30+" (GKE, EKS) -> 30."""
    found = re.match(r"\s*(\d+)", str(text or ""))
    return int(found.group(1)) if found else None


def parse(version: Mapping[str, Any]) -> tuple[int, int] | None:
    """(major, minor) from /version's major and minor, else from gitVersion (v1.30.2-gke.1)."""
    major, minor = _number(version.get("major")), _number(version.get("minor"))
    if major is None or minor is None:
        found = re.match(r"v?(\d+)\.(\d+)", str(version.get("gitVersion") or ""))
        if not found:
            return None
        major, minor = int(found.group(1)), int(found.group(2))
    return major, minor


def verdict(version: Mapping[str, Any]) -> Verdict:
    """Whether the API server that answered `version` (its /version document) is one Flotilla
    supports, with what is off below the minimum."""
    need = f"{MINIMUM[0]}.{MINIMUM[1]}"
    parsed = parse(version)
    shown = str(version.get("gitVersion") or (f"{parsed[0]}.{parsed[1]}" if parsed else "unknown"))
    if parsed is None:
        return Verdict(shown, None, f"Kubernetes version unknown ({dict(version)!r}); Flotilla needs {need} "
                       "or later (ValidatingAdmissionPolicy)")
    if parsed >= MINIMUM:
        return Verdict(shown, True, f"Kubernetes {shown}: supported (Flotilla needs {need} or later)")
    if parsed < FLOOR:
        return Verdict(shown, False, (
            f"Kubernetes {shown} is too old: Flotilla needs {need} or later; below {FLOOR[0]}.{FLOOR[1]} "
            "the CRDs' validation rules (x-kubernetes-validations) are not served and the CRDs cannot be "
            "installed"), BELOW_MINIMUM)
    return Verdict(shown, False, (
        f"Kubernetes {shown} is older than Flotilla needs ({need} or later, for ValidatingAdmissionPolicy): "
        "the operator runs, but without the admission policies"), BELOW_MINIMUM)
