"""The group coordinator (classic protocol). Placeholder until the full version lands."""

from __future__ import annotations


class GroupCoordinator:
    def __init__(self, broker) -> None:
        self.broker = broker

    async def start(self) -> None:
        pass

    async def stop(self) -> None:
        pass
