"""The cluster metadata interface every backend implements (Patroni's DCS layer, for Kafka).

Reads come from an immutable `MetadataImage` that the backend swaps whenever it learns of a change
(never a network call on a request's path); writes are async and say their consistency level:
create-if-absent, compare-and-set on a record's `version`, controller election. Backends:
`file_store` (one broker, a local file) and `kube_store` (a fleet, the Kubernetes API).
"""

from __future__ import annotations

import abc
import dataclasses
import itertools
import logging
import time
import types
import uuid
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field

log = logging.getLogger(__name__)

NO_TOPIC_ID = uuid.UUID(int=0)
_SERIALS = itertools.count(1)  # MetadataImage.serial


class MetadataError(Exception):
    pass


class TopicExists(MetadataError):
    pass


class UnknownTopic(MetadataError):
    pass


class Conflict(MetadataError):
    """A compare-and-set lost: someone else changed the record first."""


class StoreUnavailable(MetadataError):
    """The backing store cannot be reached; retriable."""


class DuplicateBroker(MetadataError):
    """A live registration for this node id is held by another process."""


class ClusterIdMismatch(MetadataError):
    """The cluster's metadata belongs to brokers of another cluster.id than this broker's."""


class TopicTooLarge(MetadataError):
    """The topic has more partitions than the backend can hold in one record (see max_partitions)."""


@dataclass(frozen=True)
class Endpoint:
    listener: str
    host: str
    port: int
    security_protocol: str = "PLAINTEXT"


@dataclass(frozen=True)
class BrokerRegistration:
    node_id: int
    incarnation: str
    endpoints: tuple[Endpoint, ...]
    rack: str | None = None
    # Announced by a broker that is stopping (Kafka's controlled shutdown): still live and
    # serving, but no longer eligible for leadership or the ISR (controller/planner.py).
    shutting_down: bool = False


def eligible_brokers(brokers: Mapping[int, BrokerRegistration]) -> frozenset[int]:
    """Live brokers that may lead partitions and join ISRs: those not shutting down."""
    return frozenset(n for n, reg in brokers.items() if not reg.shutting_down)


@dataclass(frozen=True)
class PartitionState:
    leader: int
    leader_epoch: int
    replicas: tuple[int, ...]  # during a reassignment: the target's and the removing replicas
    isr: tuple[int, ...]
    # A reassignment in progress (KIP-455; controller/reassignment.py): replicas being added
    # (not in the original assignment) and being removed (not in the target). Both empty otherwise.
    adding: tuple[int, ...] = ()
    removing: tuple[int, ...] = ()


@dataclass(frozen=True)
class TopicRecord:
    name: str
    topic_id: uuid.UUID
    partitions: int
    replication_factor: int = 1
    configs: dict[str, str] = field(default_factory=dict)
    assignment: tuple[PartitionState, ...] | None = None
    version: int | str = 0  # opaque compare-and-set token (a counter, or a resourceVersion)
    # Why the topic cannot be brought to what was asked, as (reason, message): the controller's
    # (InvalidReplicationFactor: more replicas than brokers) or the backend's (InvalidConfig: a
    # KafkaTopic's spec.config Kafka would refuse). The Kubernetes backend shows it as Ready=False.
    problem: tuple[str, str] | None = None
    # Replicas a CreateTopics asked for by hand (its `assignments`), per partition: the controller
    # places those partitions there instead of choosing (controller/manual_assignment.py).
    requested_replicas: tuple[tuple[int, ...], ...] | None = None

    @property
    def is_internal(self) -> bool:
        return self.name.startswith("__")


def new_topic(name: str, partitions: int, replication_factor: int = 1, configs: dict[str, str] | None = None) -> TopicRecord:
    return TopicRecord(name=name, topic_id=uuid.uuid4(), partitions=partitions,
                       replication_factor=replication_factor, configs=dict(configs or {}))


@dataclass(frozen=True)
class MetadataImage:
    cluster_id: str
    brokers: Mapping[int, BrokerRegistration]
    controller_id: int | None
    topics: Mapping[str, TopicRecord]
    _by_id: Mapping[uuid.UUID, TopicRecord] = field(default_factory=dict, repr=False)
    # Which image this is, and, for one made by `with_topics`, the image it was made from and the
    # topics written or removed since: subscribers then look at those alone (`changed_since`).
    serial: int = field(default_factory=lambda: next(_SERIALS), compare=False, repr=False)
    parent: int | None = field(default=None, compare=False, repr=False)
    changed_topics: frozenset[str] | None = field(default=None, compare=False, repr=False)
    _partitions: int | None = field(default=None, compare=False, repr=False)  # see partition_count

    @classmethod
    def build(cls, cluster_id, brokers, controller_id, topics: Mapping[str, TopicRecord]) -> "MetadataImage":
        return cls(cluster_id, types.MappingProxyType(dict(brokers)), controller_id,
                   types.MappingProxyType(dict(topics)),
                   types.MappingProxyType({t.topic_id: t for t in topics.values()}))

    def with_topics(self, puts: Iterable[TopicRecord] = (), deletes: Iterable[str] = ()) -> "MetadataImage":
        """This image with some topics written or removed, at the cost of the change: the two
        indexes are copied at C speed (`mappingproxy.copy`), not rebuilt record by record."""
        topics, by_id = self.topics.copy(), self._by_id.copy()
        changed, partitions = set(), self._partitions
        for name in deletes:
            gone = topics.pop(name, None)
            if gone is not None:
                changed.add(name)
                partitions = None if partitions is None else partitions - gone.partitions
                if by_id.get(gone.topic_id) is gone:
                    del by_id[gone.topic_id]
        for rec in puts:
            old = topics.get(rec.name)
            if old is not None and by_id.get(old.topic_id) is old:
                del by_id[old.topic_id]
            changed.add(rec.name)
            if partitions is not None:
                partitions += rec.partitions - (old.partitions if old is not None else 0)
            topics[rec.name] = rec
            by_id[rec.topic_id] = rec
        return dataclasses.replace(self, topics=types.MappingProxyType(topics), _by_id=types.MappingProxyType(by_id),
                                   serial=next(_SERIALS), parent=self.serial, changed_topics=frozenset(changed),
                                   _partitions=partitions)

    def with_members(self, brokers: Mapping[int, BrokerRegistration], controller_id: int | None) -> "MetadataImage":
        """This image with other live brokers or another controller, its topic indexes shared (not
        copied): a membership change makes subscribers look at every topic (`changed_since` None)."""
        return dataclasses.replace(self, brokers=types.MappingProxyType(dict(brokers)), controller_id=controller_id,
                                   serial=next(_SERIALS), parent=None, changed_topics=None)

    def changed_since(self, older: "MetadataImage") -> frozenset[str] | None:
        """The topics that differ from `older` when this image was made from it by `with_topics`
        (brokers and controller are then the same); None when unknown: compare everything."""
        if self.parent is not None and self.parent == older.serial:
            return self.changed_topics
        return None

    def partition_count(self) -> int:
        """Partitions of all topics (computed once per image, or carried over by `with_topics`)."""
        if self._partitions is None:
            object.__setattr__(self, "_partitions", sum(t.partitions for t in self.topics.values()))
        return self._partitions

    def topic_by_id(self, topic_id: uuid.UUID) -> TopicRecord | None:
        return self._by_id.get(topic_id)


@dataclass(frozen=True)
class QuorumView:
    """The controller quorum as DescribeQuorum reports it (docs/admin-apis.md says what each field
    means for our Lease-elected controller): the controller, how many times the controller Lease
    was taken (its epoch, from 1), and each controller candidate (every live broker campaigns) with
    the wall-clock time in ms at which this broker last saw its registration renewed."""

    leader_id: int | None
    leader_epoch: int
    voters: Mapping[int, int]


class MetadataStore(abc.ABC):
    image: MetadataImage
    # How long a registration or the controller Lease lasts without renewal (0: no Leases).
    lease_duration_s: float = 0.0
    # Whether the whole fleet shares this store (Kubernetes): the cluster's other metadata (ACLs,
    # client quotas, broker configs, SCRAM credentials) then lives in the cluster's own objects
    # beside it, else in files next to this broker's metadata (server/metadata_backends.py).
    shared_by_fleet: bool = False

    def __init__(self) -> None:
        self._subscribers: list[Callable[[MetadataImage, MetadataImage], None]] = []
        self._lapse_callbacks: list[Callable[[], None]] = []

    def subscribe(self, callback: Callable[[MetadataImage, MetadataImage], None]) -> None:
        self._subscribers.append(callback)

    def _publish(self, new: MetadataImage) -> None:
        old, self.image = self.image, new
        for cb in list(self._subscribers):
            try:
                cb(old, new)
            except Exception:
                log.exception("metadata subscriber failed")

    async def start(self) -> None: ...

    def max_partitions(self, replication_factor: int) -> int | None:
        """The most partitions one topic may have in this backend (None: no limit of its own)."""
        return None

    def registration_may_have_lapsed(self) -> bool:
        """Whether another broker may already judge this broker's registration expired (its last
        renewal was sent too long ago, or it was lost), so that the controller may have elected
        other leaders (ReplicaManager.writes_fenced). A backend without Leases: never."""
        return False

    def on_registration_lapse(self, callback: Callable[[], None]) -> None:
        """Call `callback` regularly while registration_may_have_lapsed() is true."""
        self._lapse_callbacks.append(callback)

    def current_since(self) -> float | None:
        """Since when (time.monotonic()) this store's view has been current without a gap, so
        that a Lease it judges expired was seen unrenewed for a whole Lease duration; None while
        the view is not current. A backend without Leases is always current."""
        return float("-inf")

    async def close(self) -> None: ...

    @abc.abstractmethod
    async def register_broker(self, reg: BrokerRegistration) -> None: ...

    @abc.abstractmethod
    async def create_topic(self, rec: TopicRecord) -> TopicRecord: ...

    @abc.abstractmethod
    async def update_topic(self, rec: TopicRecord) -> TopicRecord: ...

    @abc.abstractmethod
    async def delete_topic(self, name: str) -> TopicRecord: ...

    @abc.abstractmethod
    async def allocate_producer_ids(self, block_size: int) -> int:
        """Reserve the next `block_size` producer ids of the whole cluster (KIP-730's blocks) with a
        compare-and-set, and return the first; no two calls anywhere get overlapping blocks."""

    @abc.abstractmethod
    async def campaign(self, node_id: int) -> bool: ...

    async def resign(self, node_id: int) -> None:
        """Give up the controller Lease now if held (a stopping broker), so another broker takes
        over without waiting for it to expire. Backends without a Lease: nothing to do."""

    async def announce_shutdown(self) -> None:
        """Mark this broker's registration as shutting down (controlled shutdown). Backends of
        one broker: nothing to hand over, nothing to do."""

    @abc.abstractmethod
    def is_controller(self, node_id: int) -> bool: ...

    def quorum(self) -> QuorumView:
        """Backends without Leases: the image's controller at epoch 1, every broker seen now."""
        now_ms = int(time.time() * 1000)
        image = self.image
        return QuorumView(image.controller_id, 1, {n: now_ms for n in image.brokers})
