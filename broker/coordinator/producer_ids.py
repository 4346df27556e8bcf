"""Hands out producer ids for InitProducerId. Ids are reserved in blocks recorded on disk
before use, so a restart never hands out an id twice (Kafka's ProducerIdManager does the
same against the controller)."""

from __future__ import annotations

import os
from pathlib import Path

BLOCK_SIZE = 1000
FILE_NAME = "producer-id-block"


class ProducerIdManager:
    def __init__(self, directory: Path) -> None:
        self.path = directory / FILE_NAME
        try:
            self._block_end = int(self.path.read_text().strip())
        except (FileNotFoundError, ValueError):
            self._block_end = 0
        self._next = self._block_end

    def _reserve(self) -> None:
        end = self._block_end + BLOCK_SIZE
        tmp = self.path.with_name(self.path.name + ".tmp")
        with open(tmp, "w") as f:
            f.write(f"{end}\n")
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, self.path)
        self._next, self._block_end = self._block_end, end

    def next_id(self) -> int:
        if self._next >= self._block_end:
            self._reserve()
        pid = self._next
        self._next += 1
        return pid
