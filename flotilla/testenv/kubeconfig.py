"""kubeconfig files for the admin user and the control-plane components (certificates embedded)."""

from __future__ import annotations

import base64
from pathlib import Path

import yaml


def _b64(path: Path) -> str:
    return base64.b64encode(path.read_bytes()).decode()


def render(server: str, ca_cert: Path, client_cert: Path, client_key: Path, *, user: str,
           cluster: str = "flotilla-testenv") -> dict:
    """A kubeconfig as a dict, with one cluster, one user and one current context."""
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {"name": cluster, "cluster": {"server": server, "certificate-authority-data": _b64(ca_cert)}}
        ],
        "users": [
            {
                "name": user,
                "user": {
                    "client-certificate-data": _b64(client_cert),
                    "client-key-data": _b64(client_key),
                },
            }
        ],
        "contexts": [{"name": cluster, "context": {"cluster": cluster, "user": user}}],
        "current-context": cluster,
        "preferences": {},
    }


def write(path: Path, config: dict) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    path.chmod(0o600)
    return path
