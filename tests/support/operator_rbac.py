"""What the operator's ServiceAccount must and must not be allowed to do, asked of the API server
with `kubectl auth can-i --as=...`: shared by the Helm chart's and install/flotilla.yaml's tests."""

from __future__ import annotations

import re
from concurrent.futures import ThreadPoolExecutor
from typing import Any

# What the operator does, in a namespace it manages (verb, resource[, subresource]).
NEEDED = [
    ("list", "kafkaclusters.flotilla.io"), ("watch", "kafkaclusters.flotilla.io"),
    ("get", "kafkaclusters.flotilla.io"), ("patch", "kafkaclusters.flotilla.io"),
    ("list", "clientquotas.flotilla.io"), ("watch", "clientquotas.flotilla.io"),
    ("patch", "clientquotas.flotilla.io"),
    ("list", "recorddeletions.flotilla.io"), ("watch", "recorddeletions.flotilla.io"),
    ("patch", "recorddeletions.flotilla.io"),
    ("patch", "kafkaclusters.flotilla.io", "status"), ("patch", "clientquotas.flotilla.io", "status"),
    ("patch", "recorddeletions.flotilla.io", "status"),
    ("list", "kafkausers.flotilla.io"), ("watch", "kafkausers.flotilla.io"), ("get", "kafkausers.flotilla.io"),
    ("patch", "kafkausers.flotilla.io"), ("patch", "kafkausers.flotilla.io", "status"),
    ("update", "kafkaclusters.flotilla.io", "finalizers"),  # blockOwnerDeletion on its children
    ("create", "statefulsets.apps"), ("patch", "statefulsets.apps"), ("watch", "statefulsets.apps"),
    ("create", "services"), ("patch", "services"), ("watch", "services"), ("create", "configmaps"), ("patch", "configmaps"),
    ("create", "serviceaccounts"), ("patch", "serviceaccounts"),
    ("create", "poddisruptionbudgets.policy"), ("patch", "poddisruptionbudgets.policy"),
    ("get", "certificates.cert-manager.io"), ("create", "certificates.cert-manager.io"),
    ("patch", "certificates.cert-manager.io"),
    ("create", "roles.rbac.authorization.k8s.io"), ("create", "rolebindings.rbac.authorization.k8s.io"),
    # The brokers' metadata rights are granted by binding the flotilla-broker ClusterRole.
    ("bind", "clusterroles.rbac.authorization.k8s.io/flotilla-broker"),
    ("list", "leases.coordination.k8s.io"), ("watch", "leases.coordination.k8s.io"),
    ("list", "kafkatopics.flotilla.io"), ("watch", "kafkatopics.flotilla.io"),
    # Issue 41: labelling KafkaTopics that named their cluster by app.kubernetes.io/instance alone,
    # and the status of one naming no cluster (ClusterLabelMissing).
    ("patch", "kafkatopics.flotilla.io"), ("patch", "kafkatopics.flotilla.io", "status"),
    ("create", "events"),
    # The record of what each KafkaUser and ClientQuota owns (reconcilers/orphans.py): compare-and-set.
    ("get", "configmaps"), ("update", "configmaps"),
    # Replacing a StatefulSet (pods orphaned, kept) to change its immutable podManagementPolicy;
    # reading the broker pods for the roll gate.
    ("delete", "statefulsets.apps"), ("list", "pods"), ("get", "pods"),
    # Pod-level causes in the status (builders/pod_problems.py): the brokers' claims, and the last
    # log line of a crash-looping broker.
    ("list", "persistentvolumeclaims"), ("get", "persistentvolumeclaims"), ("get", "pods", "log"),
    # To grant the brokers their SCRAM credentials' Secret (Kubernetes refuses to let it grant what
    # it does not hold), and for its own password per SASL cluster and each KafkaUser's Secret:
    # created once, then compare-and-set (update).
    ("get", "secrets"), ("watch", "secrets"), ("create", "secrets"), ("update", "secrets"),
    # Reading each child before applying it: an object the fleet did not create is left alone.
    ("get", "services"), ("get", "serviceaccounts"), ("get", "poddisruptionbudgets.policy"),
    ("get", "roles.rbac.authorization.k8s.io"), ("get", "rolebindings.rbac.authorization.k8s.io"),
    # A removed broker's or listener's external (NodePort) Services: listed by label, deleted.
    ("list", "services"), ("delete", "services"),
]
# Leader election between replicas, in the operator's own namespace only: the one Lease the chart
# creates, by name (never another Lease: FORBIDDEN's create and update).
ELECTION = [("get", "leases.coordination.k8s.io/flotilla-operator"),
            ("update", "leases.coordination.k8s.io/flotilla-operator")]
# What it must not do.
FORBIDDEN = [
    ("delete", "secrets"), ("patch", "secrets"), ("create", "pods"), ("delete", "pods"),
    ("create", "clusterroles.rbac.authorization.k8s.io"), ("delete", "kafkaclusters.flotilla.io"),
    ("escalate", "roles.rbac.authorization.k8s.io"), ("bind", "roles.rbac.authorization.k8s.io"),
    ("create", "deployments.apps"), ("delete", "roles.rbac.authorization.k8s.io"),
    ("delete", "configmaps"),  # brokers read and update one ConfigMap (client quotas), never delete
    ("delete", "clientquotas.flotilla.io"), ("delete", "recorddeletions.flotilla.io"),
    ("delete", "kafkausers.flotilla.io"), ("update", "kafkausers.flotilla.io"),
    ("get", "kafkaclusters.flotilla.io", "status"),  # status is only ever patched
    ("update", "kafkaclusters.flotilla.io"),  # kopf patches; nothing replaces a user's object
    # Issue 23: no write access to Leases (kube-system's leader elections); KafkaTopics: patch only
    # (issue 41), never create, replace or delete.
    ("create", "leases.coordination.k8s.io"), ("update", "leases.coordination.k8s.io"),
    ("delete", "leases.coordination.k8s.io"), ("create", "kafkatopics.flotilla.io"),
    ("delete", "kafkatopics.flotilla.io"), ("update", "kafkatopics.flotilla.io", "status"),
    ("update", "kafkatopics.flotilla.io"), ("patch", "persistentvolumeclaims"), ("delete", "persistentvolumeclaims"),
    ("bind", "clusterroles.rbac.authorization.k8s.io/admin"),
    ("update", "leases.coordination.k8s.io/kube-controller-manager"),
]


def can_i(kube_env: Any, ns: str, account: str, verb: str, resource: str, subresource: str | None = None) -> bool:
    """`account` is namespace:name of a ServiceAccount."""
    args = ["auth", "can-i", verb, resource, "-n", ns, f"--as=system:serviceaccount:{account}"]
    if subresource:
        args.append(f"--subresource={subresource}")
    return kube_env.kubectl(*args, check=False).stdout.strip() == "yes"


def allowed(kube_env: Any, ns: str, account: str, checks: list) -> list:
    """The checks the account may do in `ns`, one `kubectl auth can-i` each; a few at a time, as a
    sweep of a hundred questions one after another takes most of a module's time."""
    with ThreadPoolExecutor(max_workers=8) as pool:
        answers = list(pool.map(lambda check: can_i(kube_env, ns, account, *check), checks))
    return [check for check, yes in zip(checks, answers) if yes]


def missing_and_excess(kube_env: Any, ns: str, account: str, needed: list | None = None) -> tuple[list, list]:
    """What of `needed` (default NEEDED; NEEDED + ELECTION in the operator's own namespace) the
    account lacks in `ns`, and what of FORBIDDEN it holds there."""
    # `can-i` answers "no" for a resource the API server does not serve: install cert-manager's CRDs,
    # as in a cluster where spec.certificates.issuerRef can be used.
    from flotilla.testenv import cert_manager

    cert_manager.install_crds(kube_env.kubectl)
    needed = NEEDED if needed is None else needed
    granted = allowed(kube_env, ns, account, needed + FORBIDDEN)
    return [n for n in needed if n not in granted], [n for n in FORBIDDEN if n in granted]


# Issue 38: what an operator managing some namespaces must not do in the others (a RoleBinding's
# rights stop at its namespace); every one of NEEDED is refused there too.
ELSEWHERE_FORBIDDEN = [
    ("get", "secrets"), ("list", "secrets"), ("watch", "secrets"), ("create", "secrets"), ("update", "secrets"),
    ("create", "rolebindings.rbac.authorization.k8s.io"), ("create", "roles.rbac.authorization.k8s.io"),
    ("bind", "clusterroles.rbac.authorization.k8s.io/flotilla-broker"),
]


def granted_elsewhere(kube_env: Any, ns: str, account: str) -> list:
    """What the account may do in `ns`, a namespace it does not manage: should be nothing."""
    return allowed(kube_env, ns, account,
                   ELSEWHERE_FORBIDDEN + [n for n in NEEDED + ELECTION if n not in ELSEWHERE_FORBIDDEN])


def can_i_everywhere(kube_env: Any, account: str, verb: str, resource: str) -> bool:
    """`kubectl auth can-i --all-namespaces`: true only through a cluster-wide grant."""
    out = kube_env.kubectl("auth", "can-i", verb, resource, "--all-namespaces",
                           f"--as=system:serviceaccount:{account}", check=False).stdout.strip()
    return out == "yes"


# A 403 as the operator's log shows it: the API server's message ("services is forbidden: User ..."),
# kopf's APIForbiddenError ('reason': 'Forbidden', 'code': 403, status=403) and its "Not enough
# permissions" warnings, kubernetes_asyncio's "(403)" and our ApiError's "HTTP 403". A bare "403"
# is no evidence: log timestamps carry milliseconds (05:32:26,403), ports and ids carry digits.
REFUSAL = re.compile(r"\bforbidden\b|\bHTTP 403\b|\(403\)|\bstatus=403\b|['\"]code['\"]: ?403\b"
                     r"|\bnot enough (?:RBAC )?permissions\b", re.IGNORECASE)


def refusals(log: str) -> list[str]:
    """The lines of `log` that record the API server refusing a request (403 Forbidden)."""
    return [line for line in log.splitlines() if REFUSAL.search(line)]
