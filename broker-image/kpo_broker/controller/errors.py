"""Named errors of the controller.

Each error that a broker request can receive carries the Kafka error code the broker
puts in its response (:attr:`ControllerError.error_code`), so request handlers map an
exception from a controller future onto a response without knowing the controller.
"""

from __future__ import annotations

#: Kafka error codes used by the controller (Kafka protocol guide, "Error Codes").
NONE = 0
UNKNOWN_SERVER_ERROR = -1
UNKNOWN_TOPIC_OR_PARTITION = 3
BROKER_NOT_AVAILABLE = 8
INVALID_REPLICA_ASSIGNMENT = 39
NOT_CONTROLLER = 41
STALE_BROKER_EPOCH = 77
PREFERRED_LEADER_NOT_AVAILABLE = 80
ELIGIBLE_LEADERS_NOT_AVAILABLE = 83
ELECTION_NOT_NEEDED = 84
NO_REASSIGNMENT_IN_PROGRESS = 85


class ControllerError(Exception):
    """Base class of the controller's errors.

    Attributes:
        error_code: the Kafka error code a broker answers with for this error.
    """

    error_code: int = UNKNOWN_SERVER_ERROR


class NotControllerError(ControllerError):
    """The broker is not (or no longer) the active controller (``NOT_CONTROLLER``, 41).

    Raised into the futures of ControlledShutdown and ElectLeaders events when the
    controller is a standby, resigned, or is shutting down; the client retries against
    the current controller.
    """

    error_code = NOT_CONTROLLER


class StaleBrokerEpochError(ControllerError):
    """A ControlledShutdown named an older broker epoch than the registered one (KIP-380, 77)."""

    error_code = STALE_BROKER_EPOCH


class BrokerNotAvailableError(ControllerError):
    """A ControlledShutdown came from an unregistered broker (``BROKER_NOT_AVAILABLE``, 8)."""

    error_code = BROKER_NOT_AVAILABLE


class RequestBatchNotEmptyError(ControllerError):
    """A new request batch was started while the previous one still holds requests.

    A controller bug (Kafka's ``IllegalStateException`` in ``newBatch``): every event
    must send what it batched before the next one starts.
    """


class StateChangeFailedError(ControllerError):
    """A partition or replica could not be moved to its target state.

    Kafka's ``StateChangeFailedException``: e.g. no live replica to lead a new
    partition, or a partition state written by a newer controller.
    """
