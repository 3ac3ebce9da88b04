"""Named errors of the ZooKeeper layer.

Each error maps one situation Kafka's ``KafkaZkClient`` reports (its exception or
ZooKeeper result code) onto a class, so that callers never inspect kazoo exceptions.
"""

from __future__ import annotations


class KafkaZkError(Exception):
    """Base class of every error raised by :mod:`kpo_broker.zk`."""


class InvalidZNodeNameError(KafkaZkError, ValueError):
    """A name (topic, config entity, notification) cannot be used as a znode path segment."""


class MalformedZNodeDataError(KafkaZkError, ValueError):
    """A znode holds bytes that are not the JSON document Kafka writes there.

    Args:
        what: which znode format was expected, e.g. ``"partition state"``.
        detail: what is wrong with the data.
    """

    def __init__(self, what: str, detail: str) -> None:
        super().__init__(f"malformed {what} znode data: {detail}")
        self.what = what


class ZkConnectionLossError(KafkaZkError):
    """The ZooKeeper session is not usable (connection lost, session expired, closed or timed out).

    The outcome of the request in flight is unknown; callers re-read before retrying.
    """


class ZkAuthFailedError(ZkConnectionLossError):
    """SASL authentication to ZooKeeper failed (a wrong password, an unknown user).

    Kafka's ``ZooKeeperClientAuthFailedException``: the broker does not start.
    """


class ZkOperationError(KafkaZkError):
    """ZooKeeper refused a request for a reason the caller is not expected to handle.

    Args:
        path: the znode path of the request.
        reason: the ZooKeeper error (e.g. ``"NoAuthError"``).
    """

    def __init__(self, path: str, reason: str) -> None:
        super().__init__(f"ZooKeeper request on {path} failed: {reason}")
        self.path = path
        self.reason = reason


class BrokerIdAlreadyRegisteredError(KafkaZkError):
    """``/brokers/ids/<id>`` already exists: another live broker uses this ``broker.id``."""


class ControllerMovedError(KafkaZkError):
    """A controller write was fenced: ``/controller_epoch`` changed since this controller won.

    Raised when the ``check`` of the controller epoch znode version in a multi fails
    (Kafka's ``ControllerMovedException``); the caller must resign as controller.
    """


class TopicAlreadyExistsError(KafkaZkError):
    """``/brokers/topics/<topic>`` already exists (Kafka's ``TopicExistsException``)."""


class ReassignmentInProgressError(KafkaZkError):
    """``/admin/reassign_partitions`` already exists: a reassignment is still running."""


class PreferredReplicaElectionInProgressError(KafkaZkError):
    """``/admin/preferred_replica_election`` already exists: an election is still pending."""
