"""ValidatingAdmissionPolicies on deleting KafkaTopics (issue 18, item 10), rendered into crds/ next
to the CRDs by crd_render (installed with them, cluster-wide, once).

Deleting a KafkaTopic deletes its topic (every broker removes the partitions once the object is
gone), so the API server refuses, before anything happens, the deletions a broker would refuse to
DeleteTopics:
- internal topics (`__consumer_offsets`, later `__transaction_state`): never through the resource
  (`kubectl delete kafkatopics.flotilla.io --all`, a GitOps prune), as Kafka keeps them for its coordinators
  (DeleteTopics may, as in Kafka: the broker serving it marks the object flotilla.io/delete-topics);
- any topic while the cluster's controller runs with delete.topic.enable=false: the controller
  publishes its setting as an annotation of the controller Lease, the policy's parameter.
Never refused: a KafkaTopic annotated flotilla.io/managed=false (detached: its deletion keeps the
topic, which the brokers give a KafkaTopic of their own), the garbage collector's deletions (a
KafkaTopic the fleet created, owned by a KafkaCluster being deleted: the whole cluster goes, see
docs/operator.md), and anything while the namespace itself is being deleted, so nothing, brokers
running or not, can hold up a namespace or KafkaCluster deletion. Why a
policy and not a finalizer: see docs/operator.md ("Deleting a KafkaTopic").
"""

from __future__ import annotations

from typing import Any

from .. import GROUP

CLUSTER_LABEL = f"{GROUP}/cluster"
LEGACY_CLUSTER_LABEL = "app.kubernetes.io/instance"  # objects written before flotilla.io/cluster
# Who deletes the objects of a deleted owner: kube-controller-manager's garbage collector, with
# its own service account (--use-service-account-credentials, the default of kubeadm and most
# distributions) or the controller manager's identity.
GARBAGE_COLLECTORS = ("system:serviceaccount:kube-system:generic-garbage-collector", "system:kube-controller-manager")
MANAGED_ANNOTATION = f"{GROUP}/managed"  # broker/metadata/kube_objects.py spells the same
DELETE_TOPIC_ENABLE_ANNOTATION = f"{GROUP}/delete-topic-enable"
DELETE_TOPICS_ANNOTATION = f"{GROUP}/delete-topics"  # a broker serving DeleteTopics marks the object

INTERNAL_POLICY = f"kafkatopic-internal-deletion.{GROUP}"
DISABLED_POLICY = f"kafkatopic-deletion-disabled.{GROUP}"
BROKER_SCOPE_POLICY = f"broker-own-cluster.{GROUP}"
# The brokers' ServiceAccount is `<cluster>-broker` (builders/common.py service_account_name).
BROKER_ACCOUNT_SUFFIX = "-broker"
LEASE_ROLE_LABEL = f"{GROUP}/lease"  # broker/metadata/kube_objects.py spells the same

_TOPIC_NAME = "(has(oldObject.spec.topicName) ? oldObject.spec.topicName : oldObject.metadata.name)"
# A namespace being deleted takes its KafkaTopics with it, whatever runs or not.
_NAMESPACE_GOING = ("(has(namespaceObject.metadata) && has(namespaceObject.metadata.deletionTimestamp)) || "
                    "(has(namespaceObject.status) && has(namespaceObject.status.phase) && "
                    "namespaceObject.status.phase == 'Terminating')")
_EXEMPT = [
    # Detached: deleting the resource keeps the topic.
    {"name": "managed", "expression":
        f"!has(oldObject.metadata.annotations) || "
        f"oldObject.metadata.annotations[?'{MANAGED_ANNOTATION}'].orValue('true').lowerAscii() != 'false'"},
    # The garbage collector, deleting what a deleted KafkaCluster owned.
    {"name": "not-garbage-collection", "expression":
        "!(request.userInfo.username in [" + ", ".join(f"'{u}'" for u in GARBAGE_COLLECTORS) + "])"},
]


def _cluster(obj: str, missing: str) -> str:
    """CEL: the cluster `obj` belongs to (our label, else the older one), or `missing`."""
    return (f"{obj}.metadata.labels[?'{CLUSTER_LABEL}'].orValue("
            f"{obj}.metadata.labels[?'{LEGACY_CLUSTER_LABEL}'].orValue('{missing}'))")
_RULES = {"resourceRules": [{"apiGroups": [GROUP], "apiVersions": ["*"], "resources": ["kafkatopics"],
                             "operations": ["DELETE"]}]}
_LABELS = {"app.kubernetes.io/part-of": "flotilla"}


def internal_topics_policy() -> dict[str, Any]:
    return {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingAdmissionPolicy",
        "metadata": {"name": INTERNAL_POLICY, "labels": dict(_LABELS)},
        "spec": {
            "failurePolicy": "Fail",
            "matchConstraints": _RULES,
            "matchConditions": [*_EXEMPT, {
                # DeleteTopics (which Kafka allows for internal topics too), by a broker.
                "name": "not-delete-topics", "expression":
                    f"!has(oldObject.metadata.annotations) || "
                    f"oldObject.metadata.annotations[?'{DELETE_TOPICS_ANNOTATION}'].orValue('') != 'true'"}],
            "validations": [{
                "expression": f"{_NAMESPACE_GOING} || !{_TOPIC_NAME}.startsWith('__')",
                "messageExpression": f"'KafkaTopic ' + oldObject.metadata.name + ' holds the internal topic ' + "
                                     f"{_TOPIC_NAME} + ', which cannot be deleted through its resource (annotate it "
                                     f"{MANAGED_ANNOTATION}=false to remove the resource and keep the topic)'",
                "reason": "Forbidden",
            }],
        },
    }


def deletion_disabled_policy() -> dict[str, Any]:
    return {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingAdmissionPolicy",
        "metadata": {"name": DISABLED_POLICY, "labels": dict(_LABELS)},
        "spec": {
            "failurePolicy": "Fail",
            # The controller Lease of each cluster in the KafkaTopic's namespace (see the binding).
            "paramKind": {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease"},
            "matchConstraints": _RULES,
            "matchConditions": _EXEMPT,
            "validations": [{
                "expression": (
                    f"{_NAMESPACE_GOING} || !has(params.metadata.labels) || !has(oldObject.metadata.labels) || "
                    f"{_cluster('params', '')} != {_cluster('oldObject', '-')} || "
                    f"!has(params.metadata.annotations) || "
                    f"params.metadata.annotations[?'{DELETE_TOPIC_ENABLE_ANNOTATION}'].orValue('true') != 'false'"),
                "messageExpression": (
                    f"'KafkaTopic ' + oldObject.metadata.name + ': topic deletion is disabled in cluster ' + "
                    f"{_cluster('params', '')} + ' (delete.topic.enable=false); annotate it "
                    f"{MANAGED_ANNOTATION}=false to remove the resource and keep the topic'"),
                "reason": "Forbidden",
            }],
        },
    }


def broker_scope_policy() -> dict[str, Any]:
    """Issue 23: a broker of one cluster may not create, change or delete another cluster's
    KafkaTopics or Leases in a shared namespace (RBAC cannot say "objects with my label"; the
    brokers' Role covers every KafkaTopic and Lease of the namespace). A broker is recognised by its
    ServiceAccount, `system:serviceaccount:<namespace>:<cluster>-broker`; objects that belong to
    no cluster (another application's Leases) are none of this policy's business."""
    account_prefix = "'system:serviceaccount:' + request.namespace + ':'"

    def is_ours(obj: str) -> str:
        """A KafkaTopic, or a Lease with our role label (a broker's, the controller's, producer ids'):
        only then does the older app.kubernetes.io/instance label name a cluster (Helm sets that
        label on other applications' objects too)."""
        return (f"{obj} != null && has({obj}.metadata.labels) && (request.resource.resource == 'kafkatopics'"
                f" || {obj}.metadata.labels[?'{LEASE_ROLE_LABEL}'].hasValue())")

    return {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingAdmissionPolicy",
        "metadata": {"name": BROKER_SCOPE_POLICY, "labels": dict(_LABELS)},
        "spec": {
            "failurePolicy": "Fail",
            "matchConstraints": {"resourceRules": [
                {"apiGroups": [GROUP], "apiVersions": ["*"], "resources": ["kafkatopics", "kafkatopics/status"],
                 "operations": ["CREATE", "UPDATE", "DELETE"]},
                {"apiGroups": ["coordination.k8s.io"], "apiVersions": ["*"], "resources": ["leases"],
                 "operations": ["CREATE", "UPDATE", "DELETE"]},
            ]},
            "matchConditions": [{
                "name": "a-flotilla-broker", "expression":
                    f"request.userInfo.username.startsWith({account_prefix}) && "
                    f"request.userInfo.username.endsWith('{BROKER_ACCOUNT_SUFFIX}')"}],
            "variables": [
                {"name": "own", "expression":
                    f"request.userInfo.username.substring(({account_prefix}).size(), "
                    f"request.userInfo.username.size() - {len(BROKER_ACCOUNT_SUFFIX)})"},
                {"name": "newCluster", "expression": f"({is_ours('object')}) ? ({_cluster('object', '')}) : ''"},
                {"name": "oldCluster", "expression": f"({is_ours('oldObject')}) ? ({_cluster('oldObject', '')}) : ''"},
            ],
            "validations": [{
                "expression": "(variables.newCluster == '' || variables.newCluster == variables.own) && "
                              "(variables.oldCluster == '' || variables.oldCluster == variables.own)",
                "messageExpression": (
                    "'a broker of cluster ' + variables.own + ' may not ' + request.operation.lowerAscii() + ' ' + "
                    "request.resource.resource + '/' + request.name + ', which belongs to cluster ' + "
                    "(variables.oldCluster != '' && variables.oldCluster != variables.own ? "
                    "variables.oldCluster : variables.newCluster)"),
                "reason": "Forbidden",
            }],
        },
    }


def binding(policy: str, param_ref: dict[str, Any] | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {"policyName": policy, "validationActions": ["Deny"]}
    if param_ref:
        spec["paramRef"] = param_ref
    return {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingAdmissionPolicyBinding",
        "metadata": {"name": policy, "labels": dict(_LABELS)},
        "spec": spec,
    }


def manifests() -> dict[str, dict[str, Any]]:
    """File name (in crds/) -> object."""
    return {
        f"{GROUP}_kafkatopic-internal-deletion-policy.yaml": internal_topics_policy(),
        f"{GROUP}_kafkatopic-internal-deletion-binding.yaml": binding(INTERNAL_POLICY),
        f"{GROUP}_kafkatopic-deletion-disabled-policy.yaml": deletion_disabled_policy(),
        f"{GROUP}_kafkatopic-deletion-disabled-binding.yaml": binding(DISABLED_POLICY, {
            # Each cluster's controller Lease in the KafkaTopic's own namespace; none: nothing to check.
            "selector": {"matchLabels": {"flotilla.io/lease": "controller"}},
            "parameterNotFoundAction": "Allow",
        }),
        f"{GROUP}_broker-own-cluster-policy.yaml": broker_scope_policy(),
        f"{GROUP}_broker-own-cluster-binding.yaml": binding(BROKER_SCOPE_POLICY),
    }
