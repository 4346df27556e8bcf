"""`partition.metadata`: the topic id a partition directory belongs to, as Kafka writes it.

A topic deleted while this broker was away, then created again under the same name, leaves a
directory `<topic>-<n>` holding the old topic's records. The file lets the broker tell them
apart and never serve the old records under the new topic. A directory without the file (made
before the file existed) is taken to belong to the topic of the same name.
"""

from __future__ import annotations

import base64
import os
import uuid
from pathlib import Path

FILE_NAME = "partition.metadata"


def encode_topic_id(topic_id: uuid.UUID) -> str:
    """Kafka's text form of a Uuid: URL-safe base64 of the 16 bytes, without padding."""
    return base64.urlsafe_b64encode(topic_id.bytes).decode().rstrip("=")


def read(directory: Path) -> uuid.UUID | None:
    try:
        text = (directory / FILE_NAME).read_text()
    except (FileNotFoundError, NotADirectoryError):
        return None
    for line in text.splitlines():
        key, _, value = line.partition(":")
        if key.strip() == "topic_id":
            raw = value.strip()
            try:
                return uuid.UUID(bytes=base64.urlsafe_b64decode(raw + "=" * (-len(raw) % 4)))
            except ValueError:
                return None
    return None


def matches(directory: Path, topic_id: uuid.UUID) -> bool:
    found = read(directory)
    return found is None or found == topic_id


def write(directory: Path, topic_id: uuid.UUID) -> None:
    path = directory / FILE_NAME
    text = f"version: 0\ntopic_id: {encode_topic_id(topic_id)}\n"
    try:
        if path.read_text() == text:
            return
    except FileNotFoundError:
        pass
    tmp = path.with_name(FILE_NAME + ".tmp")
    with open(tmp, "w") as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
