"""Topics in ZooKeeper: creation, replica assignments (AR) and deletion.

``/brokers/topics/<topic>`` holds the topic's replica assignment; topic configs live in
``/config/topics/<topic>``; ``/admin/delete_topics/<topic>`` queues a topic for deletion
(seed 001 §B, seed 000 §4.1).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from kazoo.exceptions import BadVersionError, NodeExistsError, NoNodeError, ZookeeperError

from kpo_broker.zk import paths
from kpo_broker.zk.data import (
    decode_topic_assignment,
    encode_entity_config,
    encode_topic_assignment,
)
from kpo_broker.zk.errors import TopicAlreadyExistsError, ZkOperationError
from kpo_broker.zk.model import ReplicaAssignment
from kpo_broker.zk.ops import DeleteOp, SetDataOp, multi_error
from kpo_broker.zk.session import ZkSession


@dataclass(frozen=True)
class TopicAssignment:
    """A topic's replica assignment as read from ``/brokers/topics/<topic>``.

    Attributes:
        topic: topic name.
        partitions: partition index -> its :class:`ReplicaAssignment`.
        zk_version: the znode version, for a compare-and-set write back.
    """

    topic: str
    partitions: Mapping[int, ReplicaAssignment]
    zk_version: int


class TopicZk(ZkSession):
    """Topic creation, assignment reads and writes, and deletion znodes."""

    def create_topic(
        self,
        topic: str,
        assignment: Mapping[int, Sequence[int]],
        config: Mapping[str, str],
    ) -> None:
        """Create a topic: its config znode first, then ``/brokers/topics/<topic>``.

        The controller sees the new topic through its ``/brokers/topics`` watch and
        creates the partition states (seed 001 §B). The config is written first so the
        controller and the brokers never see the topic without it (Kafka's
        ``createTopicWithAssignment``).

        Args:
            topic: topic name (validated as a path segment only).
            assignment: partition index -> replicas (AR, preferred leader first).
            config: topic config overrides, e.g. ``{"cleanup.policy": "compact"}``.

        Raises:
            TopicAlreadyExistsError: the topic exists, or is still queued for deletion.
            ZkConnectionLossError: the session failed.
        """
        path = paths.topic_path(topic)
        exists, marked = self._run(
            [
                self._request("exists_async", path),
                self._request("exists_async", paths.delete_topic_path(topic)),
            ]
        )
        if exists is not None:
            raise TopicAlreadyExistsError(f"topic {topic!r} already exists")
        if marked is not None:
            raise TopicAlreadyExistsError(f"topic {topic!r} is marked for deletion")
        self._set_or_create(
            paths.config_entity_path(paths.CONFIG_TYPE_TOPICS, topic), encode_entity_config(config)
        )
        data = encode_topic_assignment(
            {p: ReplicaAssignment(tuple(replicas)) for p, replicas in assignment.items()}
        )
        result = self._call("create_async", path, data, makepath=True)
        if isinstance(result, NodeExistsError):
            raise TopicAlreadyExistsError(f"topic {topic!r} already exists")
        if isinstance(result, ZookeeperError):
            raise ZkOperationError(path, type(result).__name__)

    def _children(self, path: str) -> set[str]:
        """Return the children of ``path``; an absent znode has none."""
        result = self._call("get_children_async", path)
        if isinstance(result, NoNodeError):
            return set()
        if isinstance(result, ZookeeperError):
            raise ZkOperationError(path, type(result).__name__)
        return set(result)

    def get_all_topics(self) -> set[str]:
        """Return the names of all topics (children of ``/brokers/topics``).

        Raises:
            ZkConnectionLossError: the session failed.
        """
        return self._children(paths.BROKER_TOPICS)

    def get_replica_assignments(self, topics: Iterable[str]) -> dict[str, TopicAssignment]:
        """Read the replica assignments of many topics, pipelined.

        Returns:
            topic -> its assignment; topics that do not exist are left out.

        Raises:
            ZkConnectionLossError: the session failed.
            MalformedZNodeDataError: an assignment is not Kafka's format.
        """
        names = sorted(set(topics))
        requests = [self._request("get_async", p) for p in map(paths.topic_path, names)]
        assignments: dict[str, TopicAssignment] = {}
        for topic, result in zip(names, self._run(requests), strict=True):
            if isinstance(result, NoNodeError):
                continue
            if isinstance(result, ZookeeperError):
                raise ZkOperationError(paths.topic_path(topic), type(result).__name__)
            data, stat = result
            assignments[topic] = TopicAssignment(topic, decode_topic_assignment(data), stat.version)
        return assignments

    def set_replica_assignment(
        self,
        topic: str,
        assignment: Mapping[int, ReplicaAssignment],
        expected_version: int,
        *,
        controller_epoch_zk_version: int | None = None,
    ) -> int | None:
        """Write a topic's assignment with a compare-and-set on its znode version.

        Args:
            topic: the topic.
            assignment: the full assignment, every partition included.
            expected_version: :attr:`TopicAssignment.zk_version` of the assignment read.
            controller_epoch_zk_version: the controller's fence; None for admin writes
                (e.g. adding partitions) made outside the controller.

        Returns:
            the new znode version, or None on a version conflict or a deleted topic.

        Raises:
            ControllerMovedError: the fence failed.
            ZkConnectionLossError: the session failed.
        """
        path, data = paths.topic_path(topic), encode_topic_assignment(assignment)
        if controller_epoch_zk_version is None:
            return self._set_or_create(path, data, expected_version)
        results = self._multi(
            [SetDataOp(path, data, expected_version)], controller_epoch_zk_version
        )
        error = multi_error(results)
        if error is None:
            return int(results[0].version)
        if isinstance(error, BadVersionError | NoNodeError):
            return None
        raise ZkOperationError(path, type(error).__name__)

    # --- deletion ------------------------------------------------------------------------

    def mark_topics_for_deletion(self, topics: Iterable[str]) -> None:
        """Queue topics for deletion by creating ``/admin/delete_topics/<topic>`` (admin side).

        Topics already queued are left as they are.

        Raises:
            ZkConnectionLossError: the session failed.
        """
        requests = [
            self._request("create_async", p, b"", makepath=True)
            for p in map(paths.delete_topic_path, sorted(set(topics)))
        ]
        for (path, _), result in zip(requests, self._run(requests), strict=True):
            if isinstance(result, ZookeeperError) and not isinstance(result, NodeExistsError):
                raise ZkOperationError(path, type(result).__name__)

    def get_topics_marked_for_deletion(self) -> set[str]:
        """Return the topics queued in ``/admin/delete_topics``.

        Raises:
            ZkConnectionLossError: the session failed.
        """
        return self._children(paths.ADMIN_DELETE_TOPICS)

    def remove_topic_deletion_markers(
        self, topics: Iterable[str], *, controller_epoch_zk_version: int
    ) -> None:
        """Delete ``/admin/delete_topics/<topic>`` once topics are deleted (controller side).

        Raises:
            ControllerMovedError: the fence failed.
            ZkConnectionLossError: the session failed.
        """
        markers = [paths.delete_topic_path(t) for t in sorted(set(topics))]
        requests = [
            (p, self._multi_request([DeleteOp(p)], controller_epoch_zk_version)) for p in markers
        ]
        for path, result in zip(markers, self._run(requests), strict=True):
            error = multi_error(self._multi_results(result, True, path))
            if error is not None and not isinstance(error, NoNodeError):
                raise ZkOperationError(path, type(error).__name__)

    def delete_topic_znodes(
        self, topics: Iterable[str], *, controller_epoch_zk_version: int
    ) -> None:
        """Delete topics' assignment and partition state znodes and their configs (controller side).

        Removes ``/brokers/topics/<topic>`` recursively and ``/config/topics/<topic>``;
        missing znodes are skipped.

        Raises:
            ControllerMovedError: the fence failed.
            ZkConnectionLossError: the session failed.
        """
        names = sorted(set(topics))
        roots = [paths.topic_path(t) for t in names] + [
            paths.config_entity_path(paths.CONFIG_TYPE_TOPICS, t) for t in names
        ]
        self._delete_recursive(roots, controller_epoch_zk_version)
