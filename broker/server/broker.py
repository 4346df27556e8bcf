"""A broker: wires config, metadata store, controller, logs, coordinators, handlers and sockets
together, and runs start-up and graceful shutdown in the right order.

Start-up: open the metadata store (its image), bind the listeners, register this broker
(refusing to start while another live process holds the same node.id), open the partitions the
image says this broker leads, then campaign for the controller Lease (the controller acts only
while this broker holds it). After that every image change re-applies leadership here.
"""

from __future__ import annotations

import asyncio
import logging
import signal
import time
import uuid
from pathlib import Path

from broker.config import BrokerConfig
from broker.controller.controller import Controller
from broker.controller.metrics import ControllerCollector
from broker.coordinator.group.coordinator import GroupCoordinator
from broker.coordinator.producer_ids import ProducerIdManager
from broker.coordinator.transaction.coordinator import TransactionCoordinator
from broker.coordinator.transaction.markers import MarkerSender
from broker.coordinator.transaction.metrics import TransactionCollector
from broker.coordinator.transaction.verification import TxnVerifier
from broker.metadata import open_store
from broker.metadata.store import BrokerRegistration, ClusterIdMismatch, DuplicateBroker, Endpoint, StoreUnavailable
from broker.metadata.meta_properties import ensure_meta_properties
from broker.network.server import SocketServer
from broker.admin import file_descriptors
from broker.security.authz_session import denials_counter
from broker.apis.dispatcher import RequestDispatcher
from broker.server.authorization import open_authorizer
from broker.admin.cleaner_reconfiguration import CleanerReconfiguration
from broker.server.controlled_shutdown import hand_over
from broker.apis.fetch_session import FetchSessionCache
from broker.apis.handlers import all_handlers
from broker.server.loop_errors import RateLimitedExceptionHandler
from broker.server.metadata_backends import open_broker_config_store, open_quota_store, open_scram_store
from broker.security.serving_certificates import serving_certificates
from broker.server.metrics import BrokerMetrics
from broker.server.metrics_http import start_metrics_server
from broker.server.readiness import NOT_STARTED, Readiness, replica_readiness
from broker.replica.partition_writer import PartitionWriter
from broker.replica.purgatory import Purgatory
from broker.server.loop_lag import watch_loop_lag
from broker.replica.replica_fetcher import ReplicaFetcherManager
from broker.replica.reassignment_metrics import ReassignmentCollector
from broker.replica.replication_metrics import ReplicationCollector
from broker.replica.stable_offset_metrics import StableOffsetCollector
from broker.quotas.quota_manager import QuotaConfig, QuotaManagers
from broker.quotas.quota_metrics import QuotaMetrics
from broker.quotas.replication_quota import ReplicationQuotas
from broker.quotas.replication_quota_metrics import ReplicationQuotaMetrics
from broker.replica.replica_manager import ReplicaManager
from broker.replica.restart_fencing import fence_previous_leaderships
from broker.metadata.store_wait import until_available
from broker.security.scram_store import attach_scram_store
from broker.admin.topics import TopicManager

log = logging.getLogger(__name__)

# How long a restarted broker waits for the Lease of its previous (killed) process to expire
# before deciding that another live broker holds its node.id.
REGISTER_WAIT_S = 30.0
# Each shutdown step but the hand-over (flotilla.controlled.shutdown.timeout.ms) gets this long.
STEP_TIMEOUT_S = 5.0


class DuplicateNodeId(RuntimeError):
    """Another live broker is registered with this node.id: this one must not start."""


class WrongCluster(RuntimeError):
    """The cluster's live brokers have another cluster.id: this broker's log dirs or config
    belong to another cluster, and it must not join this one."""


class Broker:
    def __init__(self, config: BrokerConfig) -> None:
        self.config = config
        self.node_id = config.node_id
        first_dir = Path(config.log_dirs[0])
        for d in config.log_dirs:
            Path(d).mkdir(parents=True, exist_ok=True)
        self.cluster_id = ensure_meta_properties(config.log_dirs, config.node_id, config["cluster.id"] or None)
        self.metrics = BrokerMetrics()
        self.metrics.watch_certificates(serving_certificates(config))
        self.store = open_store(config, self.cluster_id, first_dir)
        self.incarnation = str(uuid.uuid4())
        self.fetch_purgatory = Purgatory("fetch")
        # KIP-227 sessions live in memory only: a restarted broker has none, and fetchers start over.
        self.fetch_sessions = FetchSessionCache(config["max.incremental.fetch.session.cache.slots"],
                                                config["flotilla.fetch.session.eviction.ms"])
        self.metrics.watch_fetch_sessions(self.fetch_sessions)
        self.produce_purgatory = Purgatory("produce")  # acks=all produces waiting for the ISR
        self.delete_records_purgatory = Purgatory("delete-records")  # DeleteRecords waiting for followers
        self.replicas = ReplicaManager(config, self.store, self.fetch_purgatory, self.produce_purgatory,
                                       self.delete_records_purgatory)
        # Followers copy their leaders' logs (one fetcher task per leader broker).
        self.replica_fetchers = ReplicaFetcherManager(config, self.replicas)
        self.replicas.on_follow_change(self.replica_fetchers.update)
        # A leader whose Lease may have lapsed takes no more writes (issue 35): the controller may
        # have elected another; its waiting acks=all writes are answered at once.
        self.replicas.may_have_lapsed = self.store.registration_may_have_lapsed
        self.store.on_registration_lapse(self.replicas.registration_lapsed)
        self._leadership_follows_image = False
        self.store.subscribe(self._on_image)
        self.controller = Controller(
            self.store, self.node_id, unclean_default=config["unclean.leader.election.enable"],
            rebalance_interval_s=config["leader.imbalance.check.interval.seconds"]
            if config["auto.leader.rebalance.enable"] else None)
        self.topics = TopicManager(config, self.store, self.replicas)
        self.producer_ids = ProducerIdManager(self.store)
        # The coordinators reach their internal topics' partitions through a PartitionWriter only.
        writer = PartitionWriter(self.replicas)
        self.groups = GroupCoordinator(config=config, node_id=self.node_id, store=self.store, topics=self.topics,
                                       writer=writer)
        self.transactions = TransactionCoordinator(
            config=config, store=self.store, topics=self.topics, writer=writer, producer_ids=self.producer_ids,
            markers=MarkerSender(self.store, self.node_id, self.replica_fetchers.listener,
                                 self.replica_fetchers.security))
        # KIP-890 part 1: partition leaders ask the coordinator before a transaction opens there.
        self.txn_verifier = TxnVerifier(self.transactions, self.store, self.node_id, self.replica_fetchers.listener,
                                       self.replica_fetchers.security)
        # KIP-13 quotas: static defaults from the config, dynamic ones from the cluster metadata.
        self.quota_metrics = QuotaMetrics(self.metrics.registry)
        self.quotas = QuotaManagers(QuotaConfig.from_broker_config(config), on_throttle=self.quota_metrics.on_throttle)
        self.quota_metrics.watch(self.quotas)
        self.client_quotas = open_quota_store(self.store, first_dir)
        self.client_quotas.subscribe(self.quotas.update_quotas)
        self.quotas.update_quotas(self.client_quotas.quotas)
        # KIP-73 replication throttles: rates from the dynamic broker configs, replicas from topic configs.
        self.replication_quotas = ReplicationQuotas(self.node_id)
        ReplicationQuotaMetrics(self.metrics.registry, self.replication_quotas)
        self.broker_configs = open_broker_config_store(self.store, first_dir)
        self.broker_configs.subscribe(self.replication_quotas.update_rates)
        self.replication_quotas.update_rates(self.broker_configs.configs)
        # The dynamic log cleaner keys (admin/cleaner_reconfiguration.py): checked, then applied live.
        cleaner_keys = CleanerReconfiguration(self.node_id, config["__raw__"], self.replicas.cleaner)
        self.broker_configs.check = cleaner_keys.check
        self.broker_configs.subscribe(cleaner_keys.apply)
        cleaner_keys.apply(self.broker_configs.configs)
        self.store.subscribe(self.replication_quotas.on_image)
        self.replica_fetchers.quotas = self.replication_quotas
        self.dispatcher = RequestDispatcher([h(self) for h in all_handlers()], self.metrics)
        self.dispatcher.quotas = self.quotas
        # authorizer.class.name: ACLs from the metadata store, enforced by the handlers (docs/security.md)
        self.acls, self.authorizer = open_authorizer(config, self.store, first_dir)
        if self.authorizer is not None:
            self.dispatcher.authorizer = self.authorizer
            self.dispatcher.authz_denials = denials_counter(self.metrics.registry)
        self.sockets = SocketServer(config, self.dispatcher, self.metrics)
        # SCRAM credentials in the cluster metadata (KIP-554), read over the static file's.
        self.scram_store = open_scram_store(self.store, first_dir)
        self.scram = attach_scram_store(self.sockets.security, self.scram_store)
        self.metrics.watch_logs(self.replicas)
        self.metrics.registry.register(ReplicationCollector(self.replicas, self.controller, self.replica_fetchers))
        self.metrics.registry.register(ReassignmentCollector(self.replicas))
        self.metrics.registry.register(ControllerCollector(self.controller))
        self.metrics.registry.register(TransactionCollector(self.transactions))
        self.metrics.registry.register(StableOffsetCollector(self.replicas,
                                                             config["flotilla.transaction.metrics.max.partitions"]))
        self._tasks: list[asyncio.Task] = []
        self._metrics_runner = None
        self.metrics_port: int | None = None
        self.ready = False
        self._started = False
        self._stopping = False
        self._starting = Readiness(False, "starting\n")  # why /readyz says no while starting
        self.stopped = asyncio.Event()
        # Set when the broker must stop by itself: another process took over its registration.
        self.stop_requested = asyncio.Event()
        self.exit_code = 0

    @property
    def advertised(self):
        """The listener clients are told about (first advertised listener)."""
        adv = self.config.advertised_listeners[0]
        if adv.port == 0 and self.sockets.bound:
            return adv.__class__(adv.name, adv.host, self.sockets.bound[0][2])
        return adv

    def _on_image(self, old, new) -> None:
        # Broker registrations come and go without touching topics: nothing to re-apply then.
        if self._leadership_follows_image and (old is None or old.topics is not new.topics):
            self.replicas.apply_image(new)
        if old is not None and old.brokers is not new.brokers:
            self.replicas.live_brokers_changed()

    def registration(self) -> BrokerRegistration:
        """This broker's node id, incarnation and advertised endpoint per listener."""
        protocols = self.config["listener.security.protocol.map"]
        bound = {name: port for name, _, port in self.sockets.bound}
        endpoints = tuple(
            Endpoint(listener=adv.name, host=adv.host, port=adv.port or bound.get(adv.name, 0),
                     security_protocol=protocols.get(adv.name, "PLAINTEXT"))
            for adv in self.config.advertised_listeners)
        return BrokerRegistration(node_id=self.node_id, incarnation=self.incarnation, endpoints=endpoints,
                                  rack=self.config["broker.rack"] or None)

    async def register(self, wait_s: float | None = None) -> None:
        """Register this broker. A Lease left by a killed process of the same node.id expires
        within its duration, so keep trying that long; a Lease still renewed after that belongs
        to another live broker with this node.id, and this one refuses to start. An unreachable
        store is waited for as long as it takes (store_wait.py), not counted against that wait."""
        if wait_s is None:
            lease = getattr(self.store, "lease_duration_s", None)
            wait_s = 1.5 * lease + 2 if lease else REGISTER_WAIT_S
        reg = self.registration()
        deadline: float | None = None  # from the first answer naming another holder
        while True:
            try:
                await until_available("registering", lambda: self.store.register_broker(reg),
                                      on_wait=self._waiting_for_store)
                return
            except DuplicateBroker as e:
                now = time.monotonic()
                if deadline is None:
                    deadline = now + wait_s
                    log.warning("node.id %d is registered by another process (%s); waiting up to %.0fs for "
                                "its registration to expire", self.node_id, e, wait_s)
                elif now >= deadline:
                    raise DuplicateNodeId(
                        f"node.id {self.node_id} is already registered by another live broker ({e}); "
                        f"each broker of a cluster needs its own node.id") from None
            except ClusterIdMismatch as e:
                raise WrongCluster(
                    f"{e}; every broker of one cluster needs the same cluster.id (make one with `flotilla random-uuid` "
                    f"and pass --override cluster.id=<it> to each broker before its first start), or another "
                    f"flotilla.cluster.name") from None
            await asyncio.sleep(1.0)

    def _waiting_for_store(self, why: str) -> None:
        self._starting = Readiness(False, f"starting, {why}\n")

    async def start_core(self) -> None:
        """Everything but client-facing serving: metadata, registration, logs, coordinators, controller."""
        await until_available("reading the cluster metadata", self.store.start, on_wait=self._waiting_for_store)
        await until_available("reading client quotas", self.client_quotas.start,
                              after_failure=self.client_quotas.close, on_wait=self._waiting_for_store)
        self.quotas.update_quotas(self.client_quotas.quotas)
        await until_available("reading dynamic broker configs", self.broker_configs.start,
                              after_failure=self.broker_configs.close, on_wait=self._waiting_for_store)
        self.replication_quotas.update_topics(self.store.image)
        if self.acls is not None:
            await until_available("reading ACLs", self.acls.start, after_failure=self.acls.close,
                                  on_wait=self._waiting_for_store)
        await until_available("reading SCRAM credentials", self.scram_store.start,
                              after_failure=self.scram_store.close, on_wait=self._waiting_for_store)
        await self.register()
        # Leaderships the previous process of this node held get new epochs before it serves.
        await fence_previous_leaderships(self.store, self.node_id)
        self.replicas.load()
        self._leadership_follows_image = True
        self.replica_fetchers.start()
        await self.groups.start()
        await self.transactions.start()
        self.controller.start()
        lost = getattr(self.store, "registration_lost", None)
        if lost is not None:
            self._tasks.append(asyncio.create_task(self._stop_when_fenced(lost), name="registration-watch"))

    async def _stop_when_fenced(self, lost: asyncio.Event) -> None:
        """Two processes must never serve as one node: if another took over this broker's
        registration (its Lease), this one stops."""
        await lost.wait()
        log.error("another process registered as node.id %d: this broker is fenced and stops", self.node_id)
        self.exit_code = 3
        self.stop_requested.set()

    async def start(self) -> None:
        """Start; waits for an unreachable metadata store as long as it takes. /healthz answers
        from the beginning (a broker waiting for the API server is alive: a liveness probe must
        not restart it), /readyz says why it is not ready yet. Cancelling it (SIGTERM while
        waiting) closes what was opened."""
        ml = self.config["flotilla.metrics.listener"]
        if ml is not None:
            self._metrics_runner, self.metrics_port = await start_metrics_server(
                self.metrics, ml[0], ml[1], healthy=lambda: not self._stopping, ready=self.readiness,
                started=lambda: self._started)
        try:
            await self.sockets.start()
            await self.start_core()
        except BaseException:
            self._stopping = True
            self.sockets.stop_accepting()
            await self.sockets.close_connections()
            await self.replica_fetchers.stop()
            await self.controller.stop()
            await self.client_quotas.close()
            await self.broker_configs.close()
            if self.acls is not None:
                await self.acls.close()
            await self.scram_store.close()
            await self.store.close()
            if self._metrics_runner is not None:
                await self._metrics_runner.cleanup()
            raise
        task = asyncio.create_task(self.replicas.housekeeping_loop(), name="housekeeping")
        task.add_done_callback(_report_stopped_task)
        self._tasks.append(task)
        task = asyncio.create_task(self.replicas.isr_expiration_loop(), name="isr-expiration")
        task.add_done_callback(_report_stopped_task)
        self._tasks.append(task)
        task = asyncio.create_task(watch_loop_lag(self.metrics.loop_lag), name="loop-lag")
        task.add_done_callback(_report_stopped_task)
        self._tasks.append(task)
        if self.config["log.cleaner.enable"]:
            task = asyncio.create_task(self.replicas.cleaner.run(), name="log-cleaner")
            task.add_done_callback(_report_stopped_task)
            self._tasks.append(task)
        self.ready = self._started = True

    def readiness(self) -> Readiness:
        """/readyz: started, registered, and in the ISR of every partition it holds (readiness.py)."""
        if self.ready:
            return replica_readiness(self.store.image, self.node_id)
        return NOT_STARTED if self._stopping else self._starting

    async def shutdown(self) -> None:
        """Graceful stop, every step bounded (a stop that hangs gets the pod killed, unflushed):
        stop being the controller, hand the partitions led here over to other in-sync replicas
        (controlled shutdown, controlled_shutdown.py), refuse new connections, finish in-flight
        requests, flush and checkpoint."""
        if not self.ready:
            return
        self.ready = False
        self._stopping = True
        log.info("shutting down: handing over (controller Lease, partitions led here)")
        await _bounded("resigning as controller", self.controller.resign(), STEP_TIMEOUT_S)
        handover_s = self.config["flotilla.controlled.shutdown.timeout.ms"] / 1000
        await _bounded("controlled shutdown", hand_over(self.store, self.node_id, handover_s),
                       handover_s + STEP_TIMEOUT_S)
        self._leadership_follows_image = False  # from now on nothing makes this broker lead
        log.info("shutting down: closing listeners")
        self.sockets.stop_accepting()
        self.fetch_purgatory.complete_all()
        self.produce_purgatory.complete_all()
        self.delete_records_purgatory.complete_all()
        await _bounded("stopping the replica fetchers", self.replica_fetchers.stop(), STEP_TIMEOUT_S)
        # Answer pending JoinGroup/SyncGroup (NOT_COORDINATOR) so their connections can finish.
        await _bounded("stopping the group coordinator", self.groups.stop(), STEP_TIMEOUT_S)
        await _bounded("stopping the transaction coordinator", self.transactions.stop(), STEP_TIMEOUT_S)
        self.txn_verifier.close()
        await _bounded("closing connections", self.sockets.close_connections(), 3 * STEP_TIMEOUT_S)
        await _bounded("stopping the controller", self.controller.stop(), STEP_TIMEOUT_S)
        for t in self._tasks:
            t.cancel()
        await _bounded("stopping background tasks", asyncio.gather(*self._tasks, return_exceptions=True),
                       STEP_TIMEOUT_S)
        log.info("flushing logs and writing checkpoints")
        not_done = self.replicas.close()
        for problem in not_done:
            log.error("shutdown could not finish: %s", problem)
        await _bounded("closing the client quota store", self.client_quotas.close(), STEP_TIMEOUT_S)
        await _bounded("closing the dynamic broker config store", self.broker_configs.close(), STEP_TIMEOUT_S)
        if self.acls is not None:
            await _bounded("closing the ACL store", self.acls.close(), STEP_TIMEOUT_S)
        await _bounded("closing the SCRAM credential store", self.scram_store.close(), STEP_TIMEOUT_S)
        await _bounded("closing the metadata store (releasing Leases)", self.store.close(), 2 * STEP_TIMEOUT_S)
        if self._metrics_runner is not None:
            await _bounded("closing the metrics listener", self._metrics_runner.cleanup(), STEP_TIMEOUT_S)
        self.stopped.set()
        log.info("shutdown complete" if not not_done else "shutdown complete, except for what is logged above")


async def _bounded(what: str, awaitable, timeout_s: float) -> None:
    """One shutdown step, given at most `timeout_s`; a step that overruns (or fails) is logged
    and left behind, never waited for (not even for its cancellation)."""
    task = asyncio.ensure_future(awaitable)
    done, _ = await asyncio.wait({task}, timeout=timeout_s)
    if not done:
        task.cancel()
        log.error("shutdown: %s did not finish within %.0fs; going on", what, timeout_s)
    elif not task.cancelled() and task.exception() is not None:
        exc = task.exception()
        log.error("shutdown: %s failed: %r; going on", what, exc, exc_info=exc)


def _report_stopped_task(task: asyncio.Task) -> None:
    """A background task must run until shutdown cancels it; if it ends, say so and why."""
    if task.cancelled():
        return
    exc = task.exception()
    log.error("background task %s stopped: %r", task.get_name(), exc, exc_info=exc)


async def run_broker(config: BrokerConfig, announce=print) -> int:
    file_descriptors.raise_soft_limit()
    asyncio.get_running_loop().set_exception_handler(RateLimitedExceptionHandler())
    broker = Broker(config)
    loop = asyncio.get_running_loop()
    stop = broker.stop_requested
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    # SIGTERM while starting (waiting for the API server, say) stops at once and cleanly.
    starting = asyncio.create_task(broker.start(), name="start")
    stopping = asyncio.create_task(stop.wait(), name="stop-requested")
    await asyncio.wait({starting, stopping}, return_when=asyncio.FIRST_COMPLETED)
    stopping.cancel()
    if not starting.done():
        log.info("stop requested while starting: not starting")
        starting.cancel()
        await asyncio.gather(starting, return_exceptions=True)
        return broker.exit_code
    starting.result()  # a start that failed raises here
    name, host, port = broker.sockets.bound[0]
    adv = broker.advertised
    announce(f"Flotilla broker {broker.node_id} of cluster {broker.store.image.cluster_id} is ready")
    announce(f"  bootstrap address: {adv.host}:{adv.port}  (listening on {host}:{port}, {name})")
    if broker.metrics_port is not None:
        mh = config['flotilla.metrics.listener'][0]
        announce(f"  metrics:           http://{mh}:{broker.metrics_port}/metrics")
    announce(f"  data:              {', '.join(str(d) for d in config.log_dirs)}")
    await stop.wait()
    await broker.shutdown()
    return broker.exit_code
