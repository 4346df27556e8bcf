import asyncio

from broker.replica.purgatory import DelayedOperation, Purgatory


class Flag(DelayedOperation):
    def __init__(self, box):
        super().__init__()
        self.box = box

    def can_complete(self, key=None):
        self.box.setdefault("keys", []).append(key)
        return self.box["ready"]


async def test_completes_when_watched_key_changes():
    p = Purgatory("test")
    box = {"ready": False}
    op = Flag(box)
    waiter = asyncio.create_task(p.wait(op, [("t", 0)], timeout_s=5))
    await asyncio.sleep(0.01)
    assert p.watched() == 1
    assert p.check_and_complete(("t", 1)) == 0  # other key: nothing
    box["ready"] = True
    assert p.check_and_complete(("t", 0)) == 1
    assert await waiter is True
    assert p.watched() == 0
    assert box["keys"] == [None, ("t", 0)]  # first check, then the key that changed


async def test_times_out_exactly_once():
    p = Purgatory("test")
    op = Flag({"ready": False})
    assert await p.wait(op, ["k"], timeout_s=0.05) is False
    assert p.watched() == 0


async def test_complete_all_releases_waiters():
    p = Purgatory("test")
    op = Flag({"ready": False})
    waiter = asyncio.create_task(p.wait(op, ["k"], timeout_s=30))
    await asyncio.sleep(0.01)
    p.complete_all()
    assert await asyncio.wait_for(waiter, 1) is True
