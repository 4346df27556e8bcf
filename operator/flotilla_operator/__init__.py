"""Flotilla's Kubernetes operator: KafkaCluster (and friends) reconciled into a broker fleet.

Layout: `models` (the API, in pydantic), `crd_render` (models -> CRD YAML), `builders` (pure functions
from a validated spec to Kubernetes objects), `status` (conditions), `handlers` (thin kopf handlers),
`apply` (talking to the API server), `settings`, `metrics`, `cli`.
"""

GROUP = "flotilla.io"
VERSION = "v1alpha1"
API_VERSION = f"{GROUP}/{VERSION}"
