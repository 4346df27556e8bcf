"""Flotilla's Kubernetes operator: KafkaCluster (and friends) reconciled into a broker fleet.

Layout: `api` (the custom resources, in pydantic, one module each), `crd_render` (api -> CRD YAML),
`builders` (pure functions from a validated spec to Kubernetes objects; their names come from
broker/metadata/names.py), `status` and `events` (conditions and Events, pure), `reconcilers` (one
per resource: read, decide with the builders, act, report), `clients` (the Kubernetes API, the
clusters' Kafka admin APIs, certificates and credentials), `handlers` (the kopf registrations
only), `election` (leader election between replicas, a Lease), `settings`, `metrics`, `cli`.
"""

GROUP = "flotilla.io"
VERSION = "v1alpha1"
API_VERSION = f"{GROUP}/{VERSION}"
