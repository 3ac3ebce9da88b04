"""Pure JSON codecs between the :mod:`kpo_broker.zk.model` types and znode bytes.

Each pair writes and reads exactly the JSON document Kafka 2.x keeps in the znode
(compact UTF-8 JSON); decoders accept the older versions Kafka still reads and raise
:class:`MalformedZNodeDataError` for anything else. The layout of the znodes is in
:mod:`kpo_broker.zk.paths`.
"""

from __future__ import annotations

import base64
import re
import secrets
import uuid
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from kpo_broker.zk._json import as_int, as_int_list, as_str, dump, load_object, required
from kpo_broker.zk.errors import MalformedZNodeDataError
from kpo_broker.zk.model import (
    BrokerRegistration,
    EndPoint,
    LeaderAndIsr,
    LeaderIsrAndControllerEpoch,
    ReplicaAssignment,
)
from kpo_kafka.topic_partition import TopicPartition

#: Version of the broker registration JSON written by Kafka 2.7+.
BROKER_REGISTRATION_VERSION = 5
#: Security protocols Kafka knows; a listener named after one needs no protocol map entry.
SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
_ENDPOINT = re.compile(r"^(.+)://\[?([0-9a-zA-Z\-%._:]*)\]?:(-?[0-9]+)$")


@dataclass(frozen=True)
class ConfigChange:
    """A dynamic config change notification: which entity's config changed.

    Attributes:
        entity_type: e.g. ``"topics"`` or ``"brokers"``.
        entity_name: e.g. the topic name, a broker id or ``"<default>"``.
    """

    entity_type: str
    entity_name: str


# --- /brokers/ids/<id> -----------------------------------------------------------------


def encode_broker_registration(registration: BrokerRegistration, timestamp_ms: int) -> bytes:
    """Encode a broker registration as Kafka's version 5 ``/brokers/ids/<id>`` JSON.

    ``host``/``port`` carry the first PLAINTEXT endpoint for old clients (null/-1 when
    there is none); ``rack`` is present only when set; ``timestamp`` is a string of ms.
    """
    plaintext = next(
        (e for e in registration.endpoints if e.security_protocol == "PLAINTEXT"), None
    )
    document: dict[str, Any] = {
        "listener_security_protocol_map": {
            e.listener_name: e.security_protocol for e in registration.endpoints
        },
        "endpoints": [e.connection_string for e in registration.endpoints],
    }
    if registration.rack is not None:
        document["rack"] = registration.rack
    document.update(
        {
            "jmx_port": registration.jmx_port,
            "host": plaintext.host if plaintext else None,
            "port": plaintext.port if plaintext else -1,
            "timestamp": str(timestamp_ms),
            "features": {},
            "version": BROKER_REGISTRATION_VERSION,
        }
    )
    return dump(document)


def _endpoint(text: str, protocols: Mapping[str, str], what: str) -> EndPoint:
    match = _ENDPOINT.match(text)
    if match is None:
        raise MalformedZNodeDataError(what, f"endpoint {text!r} is not <listener>://<host>:<port>")
    listener, host, port = match.group(1), match.group(2), int(match.group(3))
    protocol = protocols.get(listener, listener if listener in SECURITY_PROTOCOLS else None)
    if protocol is None:
        raise MalformedZNodeDataError(what, f"no security protocol for listener {listener!r}")
    return EndPoint(listener, host, port, protocol)


def decode_broker_registration(broker_id: int, data: bytes, epoch: int) -> BrokerRegistration:
    """Decode ``/brokers/ids/<id>`` (versions 1 to 5) into a :class:`BrokerRegistration`.

    Args:
        broker_id: the id from the znode name.
        data: the znode content.
        epoch: the znode's czxid, which is the broker epoch (KIP-380).

    Raises:
        MalformedZNodeDataError: not a broker registration.
    """
    what = "broker registration"
    document = load_object(data, what)
    version = as_int(required(document, "version", what), what, "version")
    raw_map = document.get("listener_security_protocol_map", {})
    if not isinstance(raw_map, dict):
        raise MalformedZNodeDataError(what, "listener_security_protocol_map must be an object")
    protocols = {k: as_str(v, what, "security protocol") for k, v in raw_map.items()}
    if version == 1:
        host = as_str(required(document, "host", what), what, "host")
        port = as_int(required(document, "port", what), what, "port")
        endpoints: tuple[EndPoint, ...] = (EndPoint("PLAINTEXT", host, port, "PLAINTEXT"),)
    else:
        raw_endpoints = required(document, "endpoints", what)
        if not isinstance(raw_endpoints, list):
            raise MalformedZNodeDataError(what, "endpoints must be a list")
        endpoints = tuple(
            _endpoint(as_str(e, what, "endpoint"), protocols, what) for e in raw_endpoints
        )
    rack = document.get("rack")
    return BrokerRegistration(
        id=broker_id,
        endpoints=endpoints,
        rack=None if rack is None else as_str(rack, what, "rack"),
        epoch=epoch,
        jmx_port=as_int(document.get("jmx_port", -1), what, "jmx_port"),
    )


# --- /brokers/topics/<topic> ---------------------------------------------------------


def encode_topic_assignment(
    assignment: Mapping[int, ReplicaAssignment], topic_id: str | None = None
) -> bytes:
    """Encode a topic's replica assignment as Kafka's version 3 ``/brokers/topics/<t>`` JSON.

    ``{"version":3,"topic_id":"<id>","partitions":{"0":[1,2]},"adding_replicas":{},
    "removing_replicas":{}}`` (Kafka 2.8+'s ``TopicZNode.encode``); adding/removing list
    only the partitions being reassigned (KIP-455); ``topic_id`` (KIP-516) only when known.
    """
    ordered = sorted(assignment.items())
    document: dict[str, Any] = {"version": 3}
    if topic_id is not None:
        document["topic_id"] = topic_id
    document.update(
        {
            "partitions": {str(p): list(a.replicas) for p, a in ordered},
            "adding_replicas": {
                str(p): list(a.adding_replicas) for p, a in ordered if a.adding_replicas
            },
            "removing_replicas": {
                str(p): list(a.removing_replicas) for p, a in ordered if a.removing_replicas
            },
        }
    )
    return dump(document)


def decode_topic_id(data: bytes) -> str | None:
    """Return the ``topic_id`` of a ``/brokers/topics/<topic>`` znode (None before version 3).

    Raises:
        MalformedZNodeDataError: not a JSON object, or a topic id that is not a string.
    """
    what = "topic assignment"
    topic_id = load_object(data, what).get("topic_id")
    if topic_id is not None and not isinstance(topic_id, str):
        raise MalformedZNodeDataError(what, "topic_id must be a string")
    return topic_id


def topic_id_to_uuid(topic_id: str | None) -> uuid.UUID:
    """Return a Kafka ``Uuid`` string as the 16-byte ``uuid.UUID`` of the wire format.

    None (a topic without id) is Kafka's zero id; a malformed string too.
    """
    if topic_id is None:
        return uuid.UUID(int=0)
    try:
        raw = base64.urlsafe_b64decode(topic_id + "=" * (-len(topic_id) % 4))
    except ValueError:
        return uuid.UUID(int=0)
    return uuid.UUID(bytes=raw) if len(raw) == 16 else uuid.UUID(int=0)


def uuid_to_topic_id(value: uuid.UUID | None) -> str | None:
    """Return a wire ``uuid.UUID`` as Kafka's ``Uuid`` string; None for the zero id."""
    if value is None or value.int == 0:
        return None
    return base64.urlsafe_b64encode(value.bytes).decode().rstrip("=")


def new_topic_id() -> str:
    """Return a random topic id as Kafka's ``Uuid.randomUuid().toString()``.

    16 random bytes in URL-safe base64 without padding (22 characters); as Kafka, never
    the zero id, the metadata topic's id (1) or an id whose string starts with ``-``.
    """
    while True:
        raw = secrets.token_bytes(16)
        text = base64.urlsafe_b64encode(raw).decode().rstrip("=")
        if int.from_bytes(raw, "big") > 1 and not text.startswith("-"):
            return text


def _partition_lists(
    document: Mapping[str, Any], key: str, what: str
) -> dict[int, tuple[int, ...]]:
    raw = document.get(key)
    if raw is None:
        return {}
    if not isinstance(raw, dict):
        raise MalformedZNodeDataError(what, f"{key} must be an object")
    result: dict[int, tuple[int, ...]] = {}
    for partition, replicas in raw.items():
        if not partition.isdigit():
            raise MalformedZNodeDataError(what, f"partition key {partition!r} is not a number")
        result[int(partition)] = as_int_list(replicas, what, f"{key}[{partition}]")
    return result


def decode_topic_assignment(data: bytes) -> dict[int, ReplicaAssignment]:
    """Decode ``/brokers/topics/<topic>`` (version 1, or 2+ with adding/removing replicas).

    Returns:
        partition index -> its :class:`ReplicaAssignment`.

    Raises:
        MalformedZNodeDataError: not a topic assignment.
    """
    what = "topic assignment"
    document = load_object(data, what)
    as_int(required(document, "version", what), what, "version")
    required(document, "partitions", what)
    replicas = _partition_lists(document, "partitions", what)
    adding = _partition_lists(document, "adding_replicas", what)
    removing = _partition_lists(document, "removing_replicas", what)
    return {
        p: ReplicaAssignment(ar, adding.get(p, ()), removing.get(p, ()))
        for p, ar in sorted(replicas.items())
    }


# --- /brokers/topics/<topic>/partitions/<p>/state ------------------------------------


def encode_partition_state(state: LeaderIsrAndControllerEpoch) -> bytes:
    """Encode a partition state znode.

    ``{"controller_epoch":1,"leader":1,"version":1,"leader_epoch":0,"isr":[1,2]}``; the
    partition epoch is not written: it is the znode's version.
    """
    lai = state.leader_and_isr
    return dump(
        {
            "controller_epoch": state.controller_epoch,
            "leader": lai.leader,
            "version": 1,
            "leader_epoch": lai.leader_epoch,
            "isr": list(lai.isr),
        }
    )


def decode_partition_state(data: bytes, partition_epoch: int) -> LeaderIsrAndControllerEpoch:
    """Decode a partition state znode read at znode version ``partition_epoch``.

    Raises:
        MalformedZNodeDataError: not a partition state.
    """
    what = "partition state"
    document = load_object(data, what)
    leader_and_isr = LeaderAndIsr(
        leader=as_int(required(document, "leader", what), what, "leader"),
        leader_epoch=as_int(required(document, "leader_epoch", what), what, "leader_epoch"),
        isr=as_int_list(required(document, "isr", what), what, "isr"),
        partition_epoch=partition_epoch,
    )
    controller_epoch = as_int(
        required(document, "controller_epoch", what), what, "controller_epoch"
    )
    return LeaderIsrAndControllerEpoch(leader_and_isr, controller_epoch)


# --- /controller, /controller_epoch, /cluster/id -----------------------------------------


def encode_controller(broker_id: int, timestamp_ms: int) -> bytes:
    """Encode ``/controller``: ``{"version":1,"brokerid":<id>,"timestamp":"<ms>"}``."""
    return dump({"version": 1, "brokerid": broker_id, "timestamp": str(timestamp_ms)})


def decode_controller(data: bytes) -> int:
    """Return the controller's broker id from ``/controller``.

    Raises:
        MalformedZNodeDataError: no integer ``brokerid``.
    """
    what = "controller"
    return as_int(required(load_object(data, what), "brokerid", what), what, "brokerid")


def encode_controller_epoch(epoch: int) -> bytes:
    """Encode ``/controller_epoch``: the epoch as a decimal string, e.g. ``b"3"``."""
    return str(epoch).encode("ascii")


def decode_controller_epoch(data: bytes) -> int:
    """Decode ``/controller_epoch``.

    Raises:
        MalformedZNodeDataError: not a decimal integer.
    """
    text = data.decode("ascii", errors="replace").strip()
    if not text.lstrip("-").isdigit():
        raise MalformedZNodeDataError("controller epoch", f"{text!r} is not an integer")
    return int(text)


def encode_cluster_id(cluster_id: str) -> bytes:
    """Encode ``/cluster/id``: ``{"version":"1","id":"<id>"}`` (the version is a string)."""
    return dump({"version": "1", "id": cluster_id})


def decode_cluster_id(data: bytes) -> str:
    """Decode ``/cluster/id``.

    Raises:
        MalformedZNodeDataError: no string ``id``.
    """
    what = "cluster id"
    return as_str(required(load_object(data, what), "id", what), what, "id")


# --- /admin, /isr_change_notification ------------------------------------------------


def _encode_partition_list(partitions: Iterable[TopicPartition]) -> bytes:
    entries = [{"topic": tp.topic, "partition": tp.partition} for tp in sorted(set(partitions))]
    return dump({"version": 1, "partitions": entries})


def _entries(data: bytes, what: str) -> list[Mapping[str, Any]]:
    document = load_object(data, what)
    entries = required(document, "partitions", what)
    if not isinstance(entries, list) or not all(isinstance(e, dict) for e in entries):
        raise MalformedZNodeDataError(what, "partitions must be a list of objects")
    return entries


def _topic_partition(entry: Mapping[str, Any], what: str) -> TopicPartition:
    return TopicPartition(
        as_str(required(entry, "topic", what), what, "topic"),
        as_int(required(entry, "partition", what), what, "partition"),
    )


def encode_isr_change_notification(partitions: Iterable[TopicPartition]) -> bytes:
    """Encode an ISR change notification: ``{"version":1,"partitions":[{"topic","partition"}]}``."""
    return _encode_partition_list(partitions)


def decode_isr_change_notification(data: bytes) -> set[TopicPartition]:
    """Decode an ISR change notification into the partitions whose ISR changed.

    Raises:
        MalformedZNodeDataError: not an ISR change notification.
    """
    return {_topic_partition(e, "isr change") for e in _entries(data, "isr change")}


#: ``event`` of a log dir failure in a log dir event notification (Kafka's ``LogDirFailureEvent``).
LOG_DIR_FAILURE_EVENT = 1


def encode_log_dir_event_notification(broker_id: int) -> bytes:
    """Encode a log dir failure notification: ``{"version":1,"broker":<id>,"event":1}``.

    Kafka's ``LogDirEventNotificationSequenceZNode.encode``.
    """
    return dump({"version": 1, "broker": broker_id, "event": LOG_DIR_FAILURE_EVENT})


def decode_log_dir_event_notification(data: bytes) -> int:
    """Decode a log dir event notification into the id of the broker that sent it.

    Raises:
        MalformedZNodeDataError: not a log dir event notification.
    """
    what = "log dir event"
    return as_int(required(load_object(data, what), "broker", what), what, "broker")


def encode_preferred_replica_election(partitions: Iterable[TopicPartition]) -> bytes:
    """Encode ``/admin/preferred_replica_election``: ``{"version":1,"partitions":[...]}``."""
    return _encode_partition_list(partitions)


def decode_preferred_replica_election(data: bytes) -> set[TopicPartition]:
    """Decode ``/admin/preferred_replica_election`` into the partitions to elect.

    Raises:
        MalformedZNodeDataError: not a preferred replica election.
    """
    what = "preferred replica election"
    return {_topic_partition(e, what) for e in _entries(data, what)}


def encode_partition_reassignment(reassignment: Mapping[TopicPartition, Sequence[int]]) -> bytes:
    """Encode ``/admin/reassign_partitions``.

    ``{"version":1,"partitions":[{"topic":"t","partition":0,"replicas":[1,2]}]}``.
    """
    entries = [
        {"topic": tp.topic, "partition": tp.partition, "replicas": list(replicas)}
        for tp, replicas in sorted(reassignment.items())
    ]
    return dump({"version": 1, "partitions": entries})


def decode_partition_reassignment(data: bytes) -> dict[TopicPartition, tuple[int, ...]]:
    """Decode ``/admin/reassign_partitions`` into partition -> target replicas (RAR).

    Extra keys such as ``log_dirs`` (from the reassignment tool's file) are ignored.

    Raises:
        MalformedZNodeDataError: not a reassignment document.
    """
    what = "partition reassignment"
    return {
        _topic_partition(e, what): as_int_list(required(e, "replicas", what), what, "replicas")
        for e in _entries(data, what)
    }


# --- /config ---------------------------------------------------------------------------


def encode_entity_config(config: Mapping[str, str]) -> bytes:
    """Encode ``/config/<type>/<name>``: ``{"version":1,"config":{"<key>":"<value>"}}``."""
    return dump({"version": 1, "config": dict(sorted(config.items()))})


def decode_entity_config(data: bytes) -> dict[str, str]:
    """Decode ``/config/<type>/<name>`` into config name -> value (values are strings).

    Raises:
        MalformedZNodeDataError: not an entity config.
    """
    what = "entity config"
    config = load_object(data, what).get("config", {})
    if not isinstance(config, dict):
        raise MalformedZNodeDataError(what, "config must be an object")
    return {k: as_str(v, what, f"config[{k}]") for k, v in config.items()}


def encode_config_change_notification(change: ConfigChange) -> bytes:
    """Encode a config change notification: ``{"version":2,"entity_path":"<type>/<name>"}``."""
    return dump({"version": 2, "entity_path": f"{change.entity_type}/{change.entity_name}"})


def decode_config_change_notification(data: bytes) -> ConfigChange:
    """Decode a config change notification (version 2, or version 1 with entity_type/entity_name).

    Raises:
        MalformedZNodeDataError: not a config change notification.
    """
    what = "config change"
    document = load_object(data, what)
    version = as_int(required(document, "version", what), what, "version")
    if version == 1:
        return ConfigChange(
            as_str(required(document, "entity_type", what), what, "entity_type"),
            as_str(required(document, "entity_name", what), what, "entity_name"),
        )
    entity_path = as_str(required(document, "entity_path", what), what, "entity_path")
    entity_type, slash, entity_name = entity_path.partition("/")
    if not slash or not entity_type or not entity_name:
        raise MalformedZNodeDataError(what, f"entity_path {entity_path!r} is not <type>/<name>")
    return ConfigChange(entity_type, entity_name)
