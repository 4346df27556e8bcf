"""A broker: wires config, metadata store, logs, coordinators, handlers and sockets together,
and runs start-up and graceful shutdown in the right order."""

from __future__ import annotations

import asyncio
import logging
import signal
from pathlib import Path

from broker.config import BrokerConfig
from broker.coordinator.producer_ids import ProducerIdManager
from broker.metadata.file_store import FileMetadataStore
from broker.metadata.meta_properties import ensure_meta_properties
from broker.network.server import SocketServer
from broker.server.apis import RequestDispatcher
from broker.server.handlers import all_handlers
from broker.server.metrics import BrokerMetrics
from broker.server.metrics_http import start_metrics_server
from broker.server.purgatory import Purgatory
from broker.server.replica_manager import ReplicaManager
from broker.server.topics import TopicManager

log = logging.getLogger(__name__)


class Broker:
    def __init__(self, config: BrokerConfig) -> None:
        self.config = config
        self.node_id = config.node_id
        first_dir = Path(config.log_dirs[0])
        for d in config.log_dirs:
            Path(d).mkdir(parents=True, exist_ok=True)
        self.cluster_id = ensure_meta_properties(config.log_dirs, config.node_id, config["cluster.id"] or None)
        self.metrics = BrokerMetrics()
        self.store = FileMetadataStore(first_dir, self.cluster_id)
        self.fetch_purgatory = Purgatory("fetch")
        self.replicas = ReplicaManager(config, self.store, self.fetch_purgatory)
        self.topics = TopicManager(config, self.store, self.replicas)
        self.producer_ids = ProducerIdManager(first_dir)
        from broker.coordinator.group.coordinator import GroupCoordinator

        self.groups = GroupCoordinator(self)
        self.dispatcher = RequestDispatcher([h(self) for h in all_handlers()], self.metrics)
        self.sockets = SocketServer(config, self.dispatcher, self.metrics)
        self.metrics.watch_logs(self.replicas)
        self._tasks: list[asyncio.Task] = []
        self._metrics_runner = None
        self.metrics_port: int | None = None
        self.ready = False
        self.stopped = asyncio.Event()

    @property
    def advertised(self):
        """The listener clients are told about (first advertised listener)."""
        adv = self.config.advertised_listeners[0]
        if adv.port == 0 and self.sockets.bound:
            return adv.__class__(adv.name, adv.host, self.sockets.bound[0][2])
        return adv

    async def start(self) -> None:
        self.replicas.load()
        await self.groups.start()
        await self.sockets.start()
        ml = self.config["flotilla.metrics.listener"]
        if ml is not None:
            self._metrics_runner, self.metrics_port = await start_metrics_server(
                self.metrics, ml[0], ml[1], healthy=lambda: self.ready)
        self._tasks.append(asyncio.create_task(self.replicas.housekeeping_loop(), name="housekeeping"))
        self.ready = True

    async def shutdown(self) -> None:
        """Graceful stop: refuse new connections, finish in-flight requests, flush and checkpoint."""
        if not self.ready:
            return
        self.ready = False
        log.info("shutting down: closing listeners")
        self.sockets.stop_accepting()
        self.fetch_purgatory.complete_all()
        # Answer pending JoinGroup/SyncGroup (NOT_COORDINATOR) so their connections can finish.
        await self.groups.stop()
        await self.sockets.close_connections()
        for t in self._tasks:
            t.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        log.info("flushing logs and writing checkpoints")
        self.replicas.close()
        if self._metrics_runner is not None:
            await self._metrics_runner.cleanup()
        self.stopped.set()
        log.info("shutdown complete")


async def run_broker(config: BrokerConfig, announce=print) -> int:
    broker = Broker(config)
    await broker.start()
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    name, host, port = broker.sockets.bound[0]
    adv = broker.advertised
    announce(f"Flotilla broker {broker.node_id} of cluster {broker.cluster_id} is ready")
    announce(f"  bootstrap address: {adv.host}:{adv.port}  (listening on {host}:{port}, {name})")
    if broker.metrics_port is not None:
        mh = config['flotilla.metrics.listener'][0]
        announce(f"  metrics:           http://{mh}:{broker.metrics_port}/metrics")
    announce(f"  data:              {', '.join(str(d) for d in config.log_dirs)}")
    await stop.wait()
    await broker.shutdown()
    return 0
