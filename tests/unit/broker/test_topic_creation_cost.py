"""What creating one topic costs the broker must not grow with the topics it already has: the
controller plans only the new topic, the replica manager looks only at what changed in the image,
and opening a new partition writes no checkpoint files (nothing in them would change). Counted,
not timed: plan_topic calls and checkpoint writes are spied on (the real functions still run)."""

from __future__ import annotations

import asyncio

import pytest

from broker.config import parse_config
from broker.controller import controller as controller_module
from broker.controller.controller import Controller
from broker.metadata.file_store import FileMetadataStore
from broker.metadata.store import BrokerRegistration, Endpoint, new_topic
from broker.replica import replica_manager as replica_manager_module
from broker.replica.purgatory import Purgatory
from broker.replica.replica_manager import ReplicaManager


async def until(cond, timeout=20.0):
    deadline = asyncio.get_running_loop().time() + timeout
    while not cond():
        assert asyncio.get_running_loop().time() < deadline, "condition not reached"
        await asyncio.sleep(0.005)


@pytest.fixture
async def broker_parts(tmp_path, monkeypatch):
    calls = {"plan_topic": 0, "write_checkpoint": 0}
    real_plan, real_write = controller_module.plan_topic, replica_manager_module.checkpoints.write_checkpoint

    def plan_topic(*a, **kw):
        calls["plan_topic"] += 1
        return real_plan(*a, **kw)

    def write_checkpoint(*a, **kw):
        calls["write_checkpoint"] += 1
        return real_write(*a, **kw)

    monkeypatch.setattr(controller_module, "plan_topic", plan_topic)
    monkeypatch.setattr(replica_manager_module.checkpoints, "write_checkpoint", write_checkpoint)
    config = parse_config({"log.dirs": str(tmp_path / "logs"), "node.id": "1"})
    store = FileMetadataStore(tmp_path, "c")
    replicas = ReplicaManager(config, store, Purgatory("fetch"))
    store.subscribe(lambda old, new: replicas.apply_image(new))  # as the broker does
    await store.register_broker(BrokerRegistration(1, "i", (Endpoint("PLAINTEXT", "127.0.0.1", 9092),)))
    replicas.load()
    controller = Controller(store, node_id=1, campaign_interval_s=0.05, grace_s=0)
    controller.start()
    yield store, replicas, calls
    await controller.stop()
    replicas.close()


async def create_and_open(store, replicas, names):
    await asyncio.gather(*(store.create_topic(new_topic(n, 1)) for n in names))
    await until(lambda: all((n, 0) in replicas.partitions for n in names))


async def test_one_more_topic_costs_the_same_at_2000_topics(broker_parts):
    store, replicas, calls = broker_parts
    await create_and_open(store, replicas, ["first"])
    await asyncio.sleep(0.1)  # the controller's last turn
    costs = []
    for n in range(4):
        await create_and_open(store, replicas, [f"early-{n}"])
    for start in range(0, 2000, 250):
        await create_and_open(store, replicas, [f"bulk-{i}" for i in range(start, start + 250)])
    await asyncio.sleep(0.1)
    for n in range(4):
        before = dict(calls)
        applied = replicas._applied
        await create_and_open(store, replicas, [f"late-{n}"])
        await asyncio.sleep(0.05)  # let the controller finish its turn after the assignment
        costs.append({k: calls[k] - before[k] for k in calls})
        # The replica manager updated what it had seen in place: no comparison of all topics.
        assert replicas._applied is applied
    assert len(store.image.topics) == 2009 and len(replicas.partitions) == 2009
    for cost in costs:
        # Planned: the new topic, and again once its assignment came back (nothing to do);
        # before, every one of the 2,000 topics was planned again for each new one.
        assert cost["plan_topic"] <= 3, costs
        # Opening a new partition used to rewrite all three checkpoint files (every partition).
        assert cost["write_checkpoint"] == 0, costs
