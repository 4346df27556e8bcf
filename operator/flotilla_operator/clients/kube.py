"""Talking to the API server: server-side apply of built objects, reads, and status patches.

A thin wrapper over kubernetes_asyncio's ApiClient, so that any kind (including our own) goes
through one path: PATCH with `application/apply-patch+yaml`, a field manager and force=true
(the operator owns every field it sets; a user's edit of one of them is drift and is undone).
"""

from __future__ import annotations

import os
from typing import Any, Callable

from kubernetes_asyncio import client, config
from kubernetes_asyncio.client.exceptions import ApiException

# kind -> (apiVersion, plural) of everything the operator reads or writes.
KINDS: dict[str, tuple[str, str]] = {
    "ServiceAccount": ("v1", "serviceaccounts"),
    "ConfigMap": ("v1", "configmaps"),
    "Secret": ("v1", "secrets"),  # the operator's and KafkaUsers' credentials, stored SCRAM keys
    "Certificate": ("cert-manager.io/v1", "certificates"),  # with spec.certificates.issuerRef
    "Service": ("v1", "services"),
    "Role": ("rbac.authorization.k8s.io/v1", "roles"),
    "RoleBinding": ("rbac.authorization.k8s.io/v1", "rolebindings"),
    "PodDisruptionBudget": ("policy/v1", "poddisruptionbudgets"),
    "StatefulSet": ("apps/v1", "statefulsets"),
    "Pod": ("v1", "pods"),  # read only: the roll gate (builders/roll.py), pod problems (builders/pod_problems.py)
    "PersistentVolumeClaim": ("v1", "persistentvolumeclaims"),  # read only: pod problems
    "Lease": ("coordination.k8s.io/v1", "leases"),
    "KafkaCluster": ("flotilla.io/v1alpha1", "kafkaclusters"),
    "ClientQuota": ("flotilla.io/v1alpha1", "clientquotas"),
    "RecordDeletion": ("flotilla.io/v1alpha1", "recorddeletions"),
    "KafkaTopic": ("flotilla.io/v1alpha1", "kafkatopics"),
    "KafkaUser": ("flotilla.io/v1alpha1", "kafkausers"),
}


#: How a kubelet answers for a container log it cannot read (yet): with 200 and this as the text.
LOG_UNAVAILABLE = "unable to retrieve container logs for "


def object_path(kind: str, namespace: str, name: str | None = None, subresource: str | None = None) -> str:
    api_version, plural = KINDS[kind]
    base = "/api/v1" if api_version == "v1" else f"/apis/{api_version}"
    path = f"{base}/namespaces/{namespace}/{plural}"
    if name:
        path += f"/{name}"
    if subresource:
        path += f"/{subresource}"
    return path


class ApiError(Exception):
    """An API call failed; `status` is the HTTP status and `reason` the server's message."""

    def __init__(self, status: int, reason: str) -> None:
        super().__init__(f"HTTP {status}: {reason}")
        self.status, self.reason = status, reason


def _error(exc: ApiException) -> ApiError:
    import json

    message = exc.reason or ""
    try:
        message = json.loads(exc.body).get("message", message)
    except Exception:
        pass
    return ApiError(exc.status or 0, message)


async def load_api_client() -> client.ApiClient:
    """In a pod: its service account; elsewhere: the current kubeconfig context."""
    if os.environ.get("KUBERNETES_SERVICE_HOST") and os.path.exists(
        "/var/run/secrets/kubernetes.io/serviceaccount/token"
    ):
        config.load_incluster_config()
        return client.ApiClient()
    cfg = client.Configuration()
    # Read KUBECONFIG now: the library's default was fixed when it was imported.
    kubeconfig = os.environ.get("KUBECONFIG") or os.path.expanduser("~/.kube/config")
    await config.load_kube_config(config_file=kubeconfig, client_configuration=cfg, persist_config=False)
    return client.ApiClient(configuration=cfg)


def kubeconfig_user_needs_client(path: str | None) -> bool:
    """True when the current kubeconfig user authenticates with an exec plugin or auth provider,
    which only the kubernetes client library knows how to run (kopf's login then goes through it)."""
    import yaml

    paths = [p for p in (path or os.path.expanduser("~/.kube/config")).split(os.pathsep) if p]
    docs = []
    for p in paths:
        try:
            with open(p) as fh:
                docs.append(yaml.safe_load(fh) or {})
        except OSError:
            continue
    current = next((d.get("current-context") for d in docs if d.get("current-context")), None)
    contexts = {c.get("name"): c.get("context") or {} for d in docs for c in d.get("contexts") or []}
    users = {u.get("name"): u.get("user") or {} for d in docs for u in d.get("users") or []}
    user = users.get(contexts.get(current, {}).get("user"), {})
    return bool(user.get("exec") or user.get("auth-provider"))


class Kube:
    """The few API calls the reconcilers make."""

    def __init__(self, api: client.ApiClient, field_manager: str,
                 on_status: Callable[[str, str, str, dict[str, Any]], None] | None = None) -> None:
        self.api = api
        self.field_manager = field_manager
        self.on_status = on_status  # told of every status written (the operator's Stalled gauge)

    async def _call(self, method: str, path: str, *, body: Any = None, query: list | None = None,
                    content_type: str | None = None, accept: str = "application/json", returns: str = "object") -> Any:
        headers = {"Accept": accept}
        if content_type:
            headers["Content-Type"] = content_type
        try:
            return await self.api.call_api(
                path,
                method,
                query_params=query or [],
                header_params=headers,
                body=body,
                response_types_map={200: returns, 201: returns},
                auth_settings=["BearerToken"],
                _return_http_data_only=True,
            )
        except ApiException as exc:
            raise _error(exc) from exc

    async def apply(self, obj: dict[str, Any]) -> dict[str, Any]:
        """Server-side apply `obj`; returns the object as stored (with its status)."""
        meta = obj["metadata"]
        return await self._call(
            "PATCH",
            object_path(obj["kind"], meta["namespace"], meta["name"]),
            body=obj,
            query=[("fieldManager", self.field_manager), ("force", "true")],
            content_type="application/apply-patch+yaml",
        )

    async def get(self, kind: str, namespace: str, name: str) -> dict[str, Any] | None:
        try:
            return await self._call("GET", object_path(kind, namespace, name))
        except ApiError as err:
            if err.status == 404:
                return None
            raise

    async def list(self, kind: str, namespace: str | None = None, label_selector: str | None = None) -> list[dict[str, Any]]:
        """Every object of `kind` in `namespace` (or in all namespaces), optionally by labels."""
        api_version, plural = KINDS[kind]
        if namespace:
            path = object_path(kind, namespace)
        else:
            path = ("/api/v1" if api_version == "v1" else f"/apis/{api_version}") + f"/{plural}"
        result = await self._call("GET", path, query=[("labelSelector", label_selector)] if label_selector else None)
        return list((result or {}).get("items") or [])

    async def create(self, obj: dict[str, Any]) -> dict[str, Any] | None:
        """Create `obj` if no object of that name exists (never overwrites); None if one does."""
        meta = obj["metadata"]
        try:
            return await self._call("POST", object_path(obj["kind"], meta["namespace"]), body=obj,
                                    query=[("fieldManager", self.field_manager)])
        except ApiError as err:
            if err.status == 409:
                return None
            raise

    async def replace(self, obj: dict[str, Any]) -> dict[str, Any]:
        """PUT `obj` as read (its metadata.resourceVersion makes it a compare-and-set: ApiError 409
        when someone wrote in between)."""
        meta = obj["metadata"]
        return await self._call("PUT", object_path(obj["kind"], meta["namespace"], meta["name"]), body=obj,
                                query=[("fieldManager", self.field_manager)])

    async def delete(self, kind: str, namespace: str, name: str, *, propagation: str = "Background",
                     uid: str | None = None) -> None:
        """Delete one object (`propagation` Orphan keeps its dependents; `uid` deletes only that
        incarnation); a missing object is not an error."""
        body: dict[str, Any] = {"apiVersion": "v1", "kind": "DeleteOptions", "propagationPolicy": propagation}
        if uid:
            body["preconditions"] = {"uid": uid}
        try:
            await self._call("DELETE", object_path(kind, namespace, name), body=body)
        except ApiError as err:
            if err.status not in (404, 409):
                raise

    async def patch_status(self, kind: str, namespace: str, name: str, status: dict[str, Any]) -> dict[str, Any] | None:
        """Merge-patch .status through the status subresource; None if the object is gone."""
        try:
            written = await self._call(
                "PATCH",
                object_path(kind, namespace, name, "status"),
                body={"status": status},
                content_type="application/merge-patch+json",
            )
        except ApiError as err:
            if err.status == 404:
                return None
            raise
        if self.on_status is not None:
            self.on_status(kind, namespace, name, status)
        return written

    async def patch(self, kind: str, namespace: str, name: str, patch: dict[str, Any]) -> dict[str, Any] | None:
        """Merge-patch an object (used only to remove an annotation the operator acted on); None if
        the object is gone."""
        try:
            return await self._call("PATCH", object_path(kind, namespace, name), body=patch,
                                    content_type="application/merge-patch+json",
                                    query=[("fieldManager", self.field_manager)])
        except ApiError as err:
            if err.status == 404:
                return None
            raise

    async def pod_log_tail(self, namespace: str, name: str, container: str, *, lines: int = 5) -> str:
        """The last `lines` lines of the previous run of `container` (a crash-looping one's last
        words); "" when there is none. Just after a restart the kubelet may answer, as the log
        itself, that it cannot read it yet (seen on the real test node): that is none too."""
        try:
            text = await self._call("GET", object_path("Pod", namespace, name, "log"), accept="*/*", returns="str",
                                    query=[("container", container), ("previous", "true"), ("tailLines", str(lines))])
        except ApiError as err:
            if err.status in (400, 404):  # no previous container (yet), or the pod is gone
                return ""
            raise
        if not isinstance(text, str) or text.startswith(LOG_UNAVAILABLE):
            return ""
        return text

    async def version(self) -> dict[str, Any]:
        """The API server's /version (gitVersion, major, minor, ...): readable by anyone."""
        return await self._call("GET", "/version") or {}

    async def post_event(self, event: dict[str, Any]) -> None:
        """Create one core/v1 Event (events.event_object)."""
        # Not in KINDS: events are only ever created (RBAC: create), never applied.
        await self._call("POST", f"/api/v1/namespaces/{event['metadata']['namespace']}/events", body=event)

    async def close(self) -> None:
        await self.api.close()
