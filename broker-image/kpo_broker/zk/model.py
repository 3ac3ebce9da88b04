"""Value types stored in ZooKeeper: partitions, LeaderAndIsr, replica assignments, brokers.

Pure, immutable dataclasses with Kafka's names (Kafka's ``LeaderAndIsr``,
``ReplicaAssignment`` of KIP-455, ``Broker``/``EndPoint``, the controller epoch).
The JSON codecs that turn them into znode bytes are in :mod:`kpo_broker.zk.data`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import NamedTuple

#: ``leader`` of a partition that has no leader (Kafka's ``LeaderAndIsr.NoLeader``).
NO_LEADER = -1
#: ``leader`` written while a topic is being deleted (Kafka's ``LeaderAndIsr.LeaderDuringDelete``).
LEADER_DURING_DELETE = -2
#: Leader epoch of a partition's first leader (Kafka's ``LeaderAndIsr.initialLeaderEpoch``).
INITIAL_LEADER_EPOCH = 0
#: Version of a freshly created state znode (Kafka's ``LeaderAndIsr.initialZKVersion``).
INITIAL_PARTITION_EPOCH = 0
#: Value of ``/controller_epoch`` when the first broker creates it (Kafka's
#: ``KafkaController.InitialControllerEpoch``); the first controller's epoch is therefore 1.
INITIAL_CONTROLLER_EPOCH = 0


@dataclass(frozen=True)
class LeaderAndIsr:
    """A partition's leader, leader epoch and ISR, as in its state znode.

    Attributes:
        leader: broker id of the leader, or :data:`NO_LEADER`.
        leader_epoch: bumped by the controller at every leader change (followers
            truncate by it, KIP-101).
        isr: broker ids of the in-sync replicas, leader included.
        partition_epoch: version of the ``.../state`` znode this value was read from or
            written as (Kafka's ``zkVersion``); conditional writes expect it.
    """

    leader: int
    leader_epoch: int
    isr: tuple[int, ...]
    partition_epoch: int = INITIAL_PARTITION_EPOCH

    def with_new_leader(self, leader: int, isr: Sequence[int]) -> LeaderAndIsr:
        """Return the state after a leader election: ``leader_epoch`` + 1, same partition_epoch.

        Kafka's ``newLeaderAndIsr``; the controller bumps the leader epoch whenever it
        changes the leader or shrinks the ISR itself.
        """
        return replace(self, leader=leader, leader_epoch=self.leader_epoch + 1, isr=tuple(isr))

    def with_isr(self, isr: Sequence[int]) -> LeaderAndIsr:
        """Return the state with a new ISR and the same leader epoch (a leader's ISR update)."""
        return replace(self, isr=tuple(isr))

    def with_partition_epoch(self, partition_epoch: int) -> LeaderAndIsr:
        """Return the same state, as read or written at state znode version ``partition_epoch``."""
        return replace(self, partition_epoch=partition_epoch)


@dataclass(frozen=True)
class LeaderIsrAndControllerEpoch:
    """The content of a partition state znode: LeaderAndIsr plus the writer's controller epoch.

    Attributes:
        leader_and_isr: leader, leader epoch, ISR and the znode version.
        controller_epoch: epoch of the controller that made the last leader decision.
    """

    leader_and_isr: LeaderAndIsr
    controller_epoch: int


@dataclass(frozen=True)
class ReplicaAssignment:
    """A partition's assigned replicas (AR), with the KIP-455 reassignment state.

    While a reassignment runs, AR is the union of the target replicas (RAR) and the
    original replicas (OAR) (the first step of Kafka's ``onPartitionReassignment``);
    ``adding_replicas`` = RAR - OAR and ``removing_replicas`` = OAR - RAR.

    Attributes:
        replicas: AR, in order (the first is the preferred leader).
        adding_replicas: replicas being added by a running reassignment.
        removing_replicas: replicas being removed by a running reassignment.
    """

    replicas: tuple[int, ...]
    adding_replicas: tuple[int, ...] = ()
    removing_replicas: tuple[int, ...] = ()

    @classmethod
    def from_original_and_target(
        cls, original: Sequence[int], target: Sequence[int]
    ) -> ReplicaAssignment:
        """Return the assignment while reassigning from OAR ``original`` to RAR ``target``.

        AR lists the target replicas first, then the original replicas not in the target
        (Kafka's ``ReplicaAssignment.fromOldAndNewReplicas``).
        """
        replicas = tuple(dict.fromkeys([*target, *original]))
        adding = tuple(r for r in target if r not in original)
        removing = tuple(r for r in original if r not in target)
        return cls(replicas, adding, removing)

    @property
    def is_being_reassigned(self) -> bool:
        """Whether a reassignment is running (some replicas are being added or removed)."""
        return bool(self.adding_replicas or self.removing_replicas)

    @property
    def target_replicas(self) -> tuple[int, ...]:
        """RAR: the replicas once the reassignment completes (AR minus removing replicas)."""
        return tuple(r for r in self.replicas if r not in self.removing_replicas)

    @property
    def original_replicas(self) -> tuple[int, ...]:
        """OAR: the replicas before the reassignment (AR minus adding replicas)."""
        return tuple(r for r in self.replicas if r not in self.adding_replicas)

    def reassign_to(self, target: Sequence[int]) -> ReplicaAssignment:
        """Return the assignment for a (new or changed) reassignment of OAR to ``target``."""
        return ReplicaAssignment.from_original_and_target(self.original_replicas, target)


@dataclass(frozen=True)
class EndPoint:
    """One listener of a broker.

    Attributes:
        listener_name: e.g. ``"PLAINTEXT"`` or ``"INTERNAL"``.
        host: host name or IP address (IPv6 without brackets); ``""`` binds all.
        port: TCP port.
        security_protocol: ``PLAINTEXT``, ``SSL``, ``SASL_PLAINTEXT`` or ``SASL_SSL``.
    """

    listener_name: str
    host: str
    port: int
    security_protocol: str = "PLAINTEXT"

    @property
    def connection_string(self) -> str:
        """Return ``<listener>://<host>:<port>``, IPv6 hosts in brackets, as in ``endpoints``."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{self.listener_name}://{host}:{self.port}"


@dataclass(frozen=True)
class BrokerRegistration:
    """A live broker as registered in ``/brokers/ids/<id>``.

    Attributes:
        id: ``broker.id``.
        endpoints: the advertised listeners.
        rack: ``broker.rack``, or None.
        epoch: broker epoch, the czxid of the registration znode (KIP-380); 0 before
            registration.
        jmx_port: JMX port, -1 when JMX is off.
    """

    id: int
    endpoints: tuple[EndPoint, ...]
    rack: str | None = None
    epoch: int = 0
    jmx_port: int = -1

    def endpoint(self, listener_name: str) -> EndPoint | None:
        """Return the endpoint of ``listener_name``, or None when there is no such listener."""
        return next((e for e in self.endpoints if e.listener_name == listener_name), None)


@dataclass(frozen=True)
class TopicAssignment:
    """A topic's replica assignment as read from ``/brokers/topics/<topic>``.

    Attributes:
        topic: topic name.
        partitions: partition index -> its :class:`ReplicaAssignment`.
        zk_version: the znode version, for a compare-and-set write back.
        topic_id: the topic's id (KIP-516, Kafka's ``Uuid`` string: 22 characters of
            URL-safe base64), None for a topic written before Kafka 2.8.
    """

    topic: str
    partitions: Mapping[int, ReplicaAssignment]
    zk_version: int
    topic_id: str | None = None


class ControllerEpoch(NamedTuple):
    """A controller epoch and the version of the ``/controller_epoch`` znode holding it.

    Attributes:
        epoch: the controller epoch (bumped at each election).
        zk_version: the znode version; controller writes check it to be fenced.
    """

    epoch: int
    zk_version: int
