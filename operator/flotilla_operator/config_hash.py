"""The hash of what the brokers read at start-up. It goes on the pod template as an annotation, so a
change of configuration changes the template, and the StatefulSet rolls the brokers one at a time."""

from __future__ import annotations

import hashlib


def config_hash(*documents: str) -> str:
    """A short, stable hash of the given rendered files (order matters)."""
    digest = hashlib.sha256()
    for doc in documents:
        data = doc.encode()
        digest.update(len(data).to_bytes(8, "big"))
        digest.update(data)
    return digest.hexdigest()[:16]
