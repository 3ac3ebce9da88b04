"""The fetching side of an incremental fetch session (KIP-227).

Kafka's ``org.apache.kafka.clients.FetchSessionHandler``, as the replica fetcher uses it:
each fetch round adds the partitions it wants to a :class:`FetchRequestBuilder`; the
first request is a full fetch naming all of them, and once the leader has opened a session
each later request is incremental: it names only the partitions that are new or whose
fetch parameters changed, and lists the ones no longer wanted as forgotten. The leader's
response then holds only partitions with news; the others are implied unchanged.

A top-level error, a failed request or a response that does not match the session makes
the next request a full fetch again (FETCH_SESSION_ID_NOT_FOUND: with no session id;
otherwise closing the old session and asking for a new one).

Pure logic: requests are sent and responses read by the caller.
"""

from __future__ import annotations

import logging
from collections.abc import Collection
from dataclasses import dataclass
from typing import NamedTuple

from kpo_broker.server.fetch_metadata import INITIAL, INVALID_SESSION_ID, FetchMetadata
from kpo_broker.server.fetch_session import FETCH_SESSION_ID_NOT_FOUND
from kpo_kafka.topic_partition import TopicPartition

log = logging.getLogger(__name__)


class PartitionData(NamedTuple):
    """The fetch parameters of one partition (Kafka's ``FetchRequest.PartitionData``).

    A partition is sent again in an incremental fetch when any of these changes. (A named
    tuple: the fetcher builds and compares one per partition per round.)

    Attributes:
        fetch_offset: the next offset wanted.
        log_start_offset: the fetcher's log start offset (-1 unknown).
        max_bytes: at most this many bytes for the partition.
        current_leader_epoch: the fetcher's view of the leader epoch (-1 unknown).
    """

    fetch_offset: int
    log_start_offset: int
    max_bytes: int
    current_leader_epoch: int = -1


@dataclass(frozen=True)
class FetchRequestData:
    """What the next Fetch request carries.

    Attributes:
        to_send: the partitions to name in the request, in order.
        to_forget: the partitions to list in ``forgotten_topics_data``.
        session_partitions: every partition the fetch covers (named or implied).
        metadata: the request's session id and epoch.
    """

    to_send: dict[TopicPartition, PartitionData]
    to_forget: list[TopicPartition]
    session_partitions: dict[TopicPartition, PartitionData]
    metadata: FetchMetadata


class FetchSessionHandler:
    """One fetcher's session with one broker.

    Args:
        node: the broker's id (for log messages).
    """

    def __init__(self, node: int) -> None:
        self.node = node
        self.next_metadata: FetchMetadata = INITIAL
        self.session_partitions: dict[TopicPartition, PartitionData] = {}

    @property
    def session_id(self) -> int:
        """The current session id (INVALID_SESSION_ID before the broker opened one)."""
        return self.next_metadata.session_id

    def new_builder(self) -> FetchRequestBuilder:
        """Start the next request: add the wanted partitions to the returned builder."""
        return FetchRequestBuilder(self)

    def handle_response(
        self, error_code: int, session_id: int, partitions: Collection[TopicPartition]
    ) -> bool:
        """Advance the session after a response; False if its partition data is unusable.

        Kafka's ``FetchSessionHandler.handleResponse``: a full response must hold exactly
        the session's partitions, an incremental one only session partitions; a full
        response with a session id opens the session (the next fetch is incremental, epoch
        1), with session id 0 leaves the fetcher sessionless (the next fetch is full again).

        Args:
            error_code: the response's top-level error code.
            session_id: the response's session id.
            partitions: the partitions the response holds.
        """
        if error_code != 0:
            log.info(
                "broker %d could not serve fetch %s: error %d",
                self.node,
                self.next_metadata,
                error_code,
            )
            if error_code == FETCH_SESSION_ID_NOT_FOUND:
                self.next_metadata = INITIAL
            else:
                self.next_metadata = self.next_metadata.next_close_existing_attempt_new()
            return False
        received = set(partitions)
        extra = received.difference(self.session_partitions)
        if self.next_metadata.is_full:
            omitted = set(self.session_partitions).difference(received)
            if extra or omitted:
                log.info(
                    "broker %d sent an invalid full fetch response: %d extra, %d omitted",
                    self.node,
                    len(extra),
                    len(omitted),
                )
                self.next_metadata = INITIAL
                return False
            if session_id == INVALID_SESSION_ID:
                self.next_metadata = INITIAL
            else:
                self.next_metadata = FetchMetadata.new_incremental(session_id)
            return True
        if extra:
            log.info(
                "broker %d sent an invalid incremental fetch response: %d extra partitions",
                self.node,
                len(extra),
            )
            self.next_metadata = self.next_metadata.next_close_existing_attempt_new()
            return False
        if session_id == INVALID_SESSION_ID:  # the broker closed the session
            self.next_metadata = INITIAL
        else:
            self.next_metadata = self.next_metadata.next_incremental()
        return True

    def handle_error(self) -> None:
        """Note a failed request (connection, timeout): the next fetch is full, on a new session.

        Kafka's ``FetchSessionHandler.handleError``.
        """
        self.next_metadata = self.next_metadata.next_close_existing_attempt_new()


class FetchRequestBuilder:
    """Collects one round's wanted partitions and diffs them with the session.

    Kafka's ``FetchSessionHandler.Builder``.

    Args:
        handler: the session the request belongs to.
    """

    def __init__(self, handler: FetchSessionHandler) -> None:
        self._handler = handler
        self._next: dict[TopicPartition, PartitionData] = {}

    def add(self, tp: TopicPartition, data: PartitionData) -> None:
        """Want ``tp`` in this round with these parameters."""
        self._next[tp] = data

    def build(self) -> FetchRequestData:
        """Make the request's contents and update the session's partitions.

        A full fetch names every added partition. An incremental fetch names the added
        partitions that are new to the session or whose parameters changed (the changed
        ones after the new ones, as Kafka orders them), forgets the session partitions
        not added this round, and implies the rest.
        """
        handler = self._handler
        metadata = handler.next_metadata
        if metadata.is_full:
            handler.session_partitions = self._next
            return FetchRequestData(dict(self._next), [], dict(self._next), metadata)
        session = handler.session_partitions
        wanted = self._next
        to_forget = [tp for tp in session if tp not in wanted]
        for tp in to_forget:
            del session[tp]
        added: dict[TopicPartition, PartitionData] = {}
        altered: dict[TopicPartition, PartitionData] = {}
        for tp, data in wanted.items():
            previous = session.get(tp)
            if previous is None:
                added[tp] = data
            elif previous != data:
                altered[tp] = data
            session[tp] = data
        to_send = {**added, **altered}
        return FetchRequestData(to_send, to_forget, dict(session), metadata)
