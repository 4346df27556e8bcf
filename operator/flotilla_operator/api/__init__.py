"""The operator's API (group flotilla.io, version v1alpha1), one module per custom resource.

These pydantic models are the single source of truth: `crd_render` turns them into the CRD YAML
under `crds/` (OpenAPI schema, defaults, CEL rules) and the reconcilers parse every spec with them,
so the API server and the operator agree on what is valid. Every field has a description, which is
what `kubectl explain` shows.

Python attributes are snake_case; the Kubernetes spelling (camelCase) is the alias. Rules that the
API server enforces through CEL (`x-kubernetes-validations`) are also checked here, with the same
messages, so that a unit test (or a user of the models) sees the same error as `kubectl apply`.
`admission_policies` holds the ValidatingAdmissionPolicies rendered beside the CRDs.
"""

from __future__ import annotations

from .client_quota import CLIENT_QUOTA
from .common import Resource
from .kafka_cluster import KAFKA_CLUSTER
from .kafka_topic import KAFKA_TOPIC
from .kafka_user import KAFKA_USER
from .record_deletion import RECORD_DELETION

RESOURCES: tuple[Resource, ...] = (KAFKA_CLUSTER, CLIENT_QUOTA, RECORD_DELETION, KAFKA_TOPIC, KAFKA_USER)
