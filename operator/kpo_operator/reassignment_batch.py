"""Submissions of several objects in one AlterPartitionReassignments request (group commit).

Each step that submits targets (KIP-455) asked the controller on its own: applied at
once, 200 objects made 200 requests, each answered after the controller wrote the
reassignment to ZooKeeper (or the metadata log), and each made the next cluster read a
fresh one. :class:`SubmissionBatcher` merges the submissions asked for while one is being
sent into the next request, as the throttle writer merges its syncs: the first caller
sends what is asked at that moment, callers arriving meanwhile are sent together as soon
as it returns, and each gets the answers for its own partitions. A request names each
partition once: a caller naming a partition already in the next batch waits for a batch
of its own.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from kpo_kafka.admin_types import ApiError
from kpo_kafka.topic_partition import TopicPartition

Targets = Mapping[TopicPartition, Sequence[int] | None]
"""Partition -> its target replicas (``None``: cancel its reassignment), as KIP-455 takes them."""
Answers = dict[TopicPartition, ApiError | None]
"""Partition -> Kafka's error (``None``: accepted)."""


@dataclass
class _Batch:
    """Targets merged into one request."""

    targets: dict[TopicPartition, Sequence[int] | None] = field(default_factory=dict)
    done: threading.Event = field(default_factory=threading.Event)
    answers: Answers | None = None
    error: BaseException | None = None


class SubmissionBatcher:
    """Sends the targets of concurrent callers in as few requests as possible.

    Args:
        send: Sends one AlterPartitionReassignments request
            (:meth:`~kpo_kafka.admin.KafkaAdmin.alter_partition_reassignments`).
        sent: Called after each request with the partitions it named (e.g. to make the
            next cluster read a fresh one).

    Errors of ``send`` (``KafkaAdminError``) are raised to every caller of that request.
    """

    def __init__(
        self,
        send: Callable[[Targets], Answers],
        sent: Callable[[], None] | None = None,
    ) -> None:
        self._send = send
        self._sent = sent
        self._lock = threading.Lock()  # guards _open
        self._sending = threading.Lock()  # one request at a time
        self._open: _Batch | None = None
        self.requests = 0  # requests sent (for tests and measurements)

    def submit(self, targets: Targets) -> Answers:
        """Send ``targets`` (merged with those of concurrent callers); return their answers.

        Raises:
            KafkaAdminError: The request failed.
        """
        if not targets:
            return {}
        while True:
            with self._lock:
                batch = self._open
                if batch is None:
                    batch = self._open = _Batch()
                if batch.targets.keys().isdisjoint(targets):
                    batch.targets.update(targets)
                    break
            batch.done.wait()  # a partition of ours is in it: the next one
        with self._sending:
            with self._lock:
                if self._open is batch:
                    self._open = None  # later callers start the next batch
            if not batch.done.is_set():
                self._flush(batch)
        if batch.error is not None:
            raise batch.error
        answers = batch.answers or {}
        return {tp: answers.get(tp) for tp in targets}

    def _flush(self, batch: _Batch) -> None:
        """Send ``batch`` (the caller holds the sending lock)."""
        try:
            self.requests += 1
            batch.answers = self._send(batch.targets)
        except BaseException as exc:
            batch.error = exc
        finally:
            if self._sent is not None:
                self._sent()
            batch.done.set()
