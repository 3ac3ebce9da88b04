"""Fetch session ids and epochs carried by Fetch v7+ requests (KIP-227).

Kafka's ``org.apache.kafka.common.requests.FetchMetadata``: a request's ``(session_id,
session_epoch)`` says whether it is a full fetch (epoch 0: open a new session, or epoch
-1: no session at all) or an incremental fetch of an existing session (epoch > 0).
"""

from __future__ import annotations

from dataclasses import dataclass

#: The session id of "no session" (Kafka's INVALID_SESSION_ID).
INVALID_SESSION_ID = 0
#: The epoch of a full fetch asking for a new session (Kafka's INITIAL_EPOCH).
INITIAL_EPOCH = 0
#: The epoch of a full fetch closing any session and asking for none (Kafka's FINAL_EPOCH).
FINAL_EPOCH = -1
_INT_MAX = 2**31 - 1


def next_epoch(prev_epoch: int) -> int:
    """Return the session epoch after ``prev_epoch`` (Kafka's ``FetchMetadata.nextEpoch``).

    FINAL_EPOCH (or any negative epoch) stays FINAL_EPOCH; the largest int32 wraps to 1,
    never to 0 (which would read as a new full fetch).
    """
    if prev_epoch < 0:
        return FINAL_EPOCH
    if prev_epoch == _INT_MAX:
        return 1
    return prev_epoch + 1


@dataclass(frozen=True)
class FetchMetadata:
    """A fetch request's session id and epoch.

    Attributes:
        session_id: the session (INVALID_SESSION_ID for none).
        epoch: INITIAL_EPOCH (full, open a session), FINAL_EPOCH (full, sessionless) or
            the epoch of an incremental fetch (> 0).
    """

    session_id: int = INVALID_SESSION_ID
    epoch: int = INITIAL_EPOCH

    @property
    def is_full(self) -> bool:
        """Whether the request names every partition it wants (epoch 0 or -1)."""
        return self.epoch in (INITIAL_EPOCH, FINAL_EPOCH)

    def next_close_existing(self) -> FetchMetadata:
        """Close this session and use none (Kafka's ``nextCloseExisting``)."""
        return FetchMetadata(self.session_id, FINAL_EPOCH)

    def next_close_existing_attempt_new(self) -> FetchMetadata:
        """Close this session and ask for a new one (``nextCloseExistingAttemptNew``)."""
        return FetchMetadata(self.session_id, INITIAL_EPOCH)

    def next_incremental(self) -> FetchMetadata:
        """Continue this session with its next incremental fetch session (``nextIncremental``)."""
        return FetchMetadata(self.session_id, next_epoch(self.epoch))

    @staticmethod
    def new_incremental(session_id: int) -> FetchMetadata:
        """Start the incremental fetches of a session the broker just created (epoch 1)."""
        return FetchMetadata(session_id, next_epoch(INITIAL_EPOCH))


#: The metadata of a sessionless request (Fetch v4-v6 or session id 0 and epoch -1).
SESSIONLESS = FetchMetadata(INVALID_SESSION_ID, FINAL_EPOCH)
#: The first request of a client that wants a session.
INITIAL = FetchMetadata(INVALID_SESSION_ID, INITIAL_EPOCH)
