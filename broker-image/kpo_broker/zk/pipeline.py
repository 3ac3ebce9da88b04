"""A sliding window of pipelined ZooKeeper requests (Kafka's ``ZooKeeperClient.handleRequests``).

Kafka 1.1 (KAFKA-5642) made its controller read and write ZooKeeper asynchronously: each
request is sent as soon as fewer than ``zookeeper.max.in.flight.requests`` (default 10)
are awaiting their response, so a batch of N requests costs about N / window round trips
instead of N, while the client never has more than the window outstanding. ZooKeeper
answers the requests of one session in the order they were sent, so waiting for the
oldest request in flight before sending the next is the same as Kafka's semaphore
released by each response's callback.

:func:`pipeline` is the window alone, without I/O: the caller gives how to send one
request (kazoo's ``*_async`` call returning an ``IAsyncResult``) and how to wait for
one (``IAsyncResult.get``), so the logic is testable with any fake.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Sequence
from typing import TypeVar

Request = TypeVar("Request")
Pending = TypeVar("Pending")
Result = TypeVar("Result")

#: Kafka's ``zookeeper.max.in.flight.requests`` default.
DEFAULT_MAX_IN_FLIGHT_REQUESTS = 10


def round_trips(count: int, window: int) -> int:
    """Return the round trips a batch of ``count`` requests costs with ``window`` in flight.

    Each of those is a network round trip the batch waits for at least (``count`` divided
    by ``window``, rounded up); 0 for an empty batch.

    Raises:
        ValueError: ``window`` is below 1 or ``count`` below 0.
    """
    if window < 1 or count < 0:
        raise ValueError(f"need window >= 1 and count >= 0, got {window} and {count}")
    return -(-count // window)


def pipeline(
    requests: Sequence[Request],
    window: int,
    send: Callable[[Request], Pending],
    wait: Callable[[Request, Pending], Result],
) -> list[Result]:
    """Send ``requests`` in order with at most ``window`` awaiting a response; collect results.

    Request ``i + window`` is sent only after the response of request ``i`` was waited
    for (the oldest first, as ZooKeeper answers in order).

    Args:
        requests: the requests, sent in this order.
        window: the most requests in flight at once (``zookeeper.max.in.flight.requests``).
        send: sends one request and returns what to wait on (kazoo's ``IAsyncResult``).
        wait: waits for one sent request's response and returns its result; an exception
            it raises stops the batch (requests still in flight are not waited for).

    Returns:
        per request, in order: what ``wait`` returned.

    Raises:
        ValueError: ``window`` is below 1.
    """
    if window < 1:
        raise ValueError(f"the window must be at least 1, got {window}")
    results: list[Result] = []
    in_flight: deque[tuple[Request, Pending]] = deque()
    for request in requests:
        if len(in_flight) >= window:
            oldest, pending = in_flight.popleft()
            results.append(wait(oldest, pending))
        in_flight.append((request, send(request)))
    while in_flight:
        oldest, pending = in_flight.popleft()
        results.append(wait(oldest, pending))
    return results
