"""The cluster's ACLs in the metadata store, apart from topics (as client quotas are).

CreateAcls and DeleteAcls change them through `update` (a function from the current set to the
new one, applied with compare-and-set by backends shared between brokers); every broker's
authorizer follows `subscribe`. The local-file backend writes `flotilla-acls.json` beside the
metadata file (one broker); a fleet keeps them in a ConfigMap (kube_acls.py).
"""

from __future__ import annotations

import abc
import json
import logging
import os
from collections.abc import Callable, Iterable
from pathlib import Path

from broker.security.acl import AclBinding

log = logging.getLogger(__name__)

FILE_NAME = "flotilla-acls.json"

AclSet = frozenset[AclBinding]
Change = Callable[[AclSet], AclSet]


def to_doc(acls: Iterable[AclBinding]) -> dict:
    return {"version": 1, "acls": [b.to_json() for b in sorted(acls, key=lambda b: b.sort_key)]}


def from_doc(doc: dict) -> AclSet:
    return frozenset(AclBinding.from_json(d) for d in doc.get("acls", []))


class AclStore(abc.ABC):
    """Read synchronously from `acls`; changed with `update`."""

    def __init__(self) -> None:
        self.acls: AclSet = frozenset()
        self._subscribers: list[Callable[[AclSet], None]] = []

    def subscribe(self, callback: Callable[[AclSet], None]) -> None:
        self._subscribers.append(callback)

    def _publish(self, acls: AclSet) -> None:
        self.acls = frozenset(acls)
        for cb in list(self._subscribers):
            try:
                cb(self.acls)
            except Exception:
                log.exception("ACL subscriber failed")

    async def start(self) -> None: ...

    async def close(self) -> None: ...

    @abc.abstractmethod
    async def update(self, change: Change) -> AclSet:
        """Apply `change` to the ACLs as stored (again, if another writer came first) and return
        the set it produced."""


class FileAclStore(AclStore):
    """One broker's ACLs in a JSON file, replaced atomically (temp file, fsync, rename)."""

    def __init__(self, directory: Path) -> None:
        super().__init__()
        self.path = Path(directory) / FILE_NAME
        if self.path.exists():
            self._publish(from_doc(json.loads(self.path.read_text())))

    async def update(self, change: Change) -> AclSet:
        new = frozenset(change(self.acls))
        if new != self.acls:
            tmp = self.path.with_name(self.path.name + ".tmp")
            with open(tmp, "w") as f:
                json.dump(to_doc(new), f)
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, self.path)
            self._publish(new)
        return new

