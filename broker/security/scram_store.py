"""SCRAM credentials in the cluster metadata (KIP-554), as Kafka keeps them in its metadata log.

Each credential is (user, mechanism) -> salt, iterations, StoredKey, ServerKey: never a password
nor the salted password. AlterUserScramCredentials writes here (`alter`, all changes of one request
at once); every broker's SCRAM mechanism reads `credentials` through `ScramCredentials.lookup`
(credentials.py), and a change applies to the next authentication without a restart.

Backends follow the metadata store's: one broker keeps `flotilla-scram-credentials.json` beside
its metadata file (replaced atomically); a fleet keeps one Secret per cluster
(kube_scram_store.py), watched by every broker. The document is the same in both.
"""

from __future__ import annotations

import abc
import base64
import json
import logging
import os
import types
from collections.abc import Callable, Mapping
from pathlib import Path

from broker.security.credentials import ScramCredential

log = logging.getLogger(__name__)

FILE_NAME = "flotilla-scram-credentials.json"
Key = tuple[str, str]  # (user, mechanism)
CredentialMap = Mapping[Key, ScramCredential]


def to_doc(credentials: CredentialMap) -> dict:
    def b64(b: bytes) -> str:
        return base64.b64encode(b).decode()

    return {"version": 1, "credentials": [
        {"user": user, "mechanism": mechanism, "iterations": c.iterations, "salt": b64(c.salt),
         "stored_key": b64(c.stored_key), "server_key": b64(c.server_key)}
        for (user, mechanism), c in sorted(credentials.items())]}


def from_doc(doc: Mapping) -> dict[Key, ScramCredential]:
    """ValueError/KeyError/TypeError for a document that does not parse."""
    out = {}
    for c in doc.get("credentials", []):
        out[(c["user"], c["mechanism"])] = ScramCredential(
            salt=base64.b64decode(c["salt"], validate=True), stored_key=base64.b64decode(c["stored_key"], validate=True),
            server_key=base64.b64decode(c["server_key"], validate=True), iterations=int(c["iterations"]))
    return out


def apply_changes(current: CredentialMap, changes: Mapping[Key, ScramCredential | None]) -> dict[Key, ScramCredential]:
    """The credentials after upserting (a credential) or deleting (None) each key."""
    out = dict(current)
    for key, credential in changes.items():
        if credential is None:
            out.pop(key, None)
        else:
            out[key] = credential
    return out


class ScramCredentialStore(abc.ABC):
    """The cluster's stored SCRAM credentials: read synchronously from `credentials`, changed with `alter`."""

    credentials: CredentialMap

    def __init__(self) -> None:
        self.credentials = types.MappingProxyType({})
        self._subscribers: list[Callable[[CredentialMap], None]] = []

    def subscribe(self, callback: Callable[[CredentialMap], None]) -> None:
        self._subscribers.append(callback)

    def _publish(self, credentials: Mapping[Key, ScramCredential]) -> None:
        self.credentials = types.MappingProxyType(dict(credentials))
        for cb in list(self._subscribers):
            try:
                cb(self.credentials)
            except Exception:
                log.exception("SCRAM credential subscriber failed")

    async def start(self) -> None: ...

    async def close(self) -> None: ...

    @abc.abstractmethod
    async def alter(self, changes: Mapping[Key, ScramCredential | None]) -> None:
        """Upsert (a credential) or delete (None) credentials, all or none; published before returning."""


class FileScramCredentialStore(ScramCredentialStore):
    """One broker's credentials in a JSON file (mode 0600), replaced atomically (temp file, fsync, rename)."""

    def __init__(self, directory: Path) -> None:
        super().__init__()
        self.path = Path(directory) / FILE_NAME
        if self.path.exists():
            self._publish(from_doc(json.loads(self.path.read_text())))

    async def alter(self, changes: Mapping[Key, ScramCredential | None]) -> None:
        new = apply_changes(self.credentials, changes)
        tmp = self.path.with_name(self.path.name + ".tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as f:
            json.dump(to_doc(new), f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, self.path)
        self._publish(new)


def attach_scram_store(security: Mapping[str, object], store: ScramCredentialStore):
    """Make every listener's SCRAM mechanism read `store` (over the static file); returns the
    broker-wide ScramCredentials the listeners share (listeners.py builds one for all)."""
    shared = {id(sec.scram): sec.scram for sec in security.values()}
    for credentials in shared.values():
        credentials.use_store(store)
    return next(iter(shared.values()))
