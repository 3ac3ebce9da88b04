"""Split a plan's moves into waves that respect per-broker concurrency, with duration estimates.

A wave is a set of partition moves submitted together (one ``AlterPartitionReassignments``
request, KIP-455) and awaited before the next wave. During a move the partition's current
leader *sends* the partition's bytes to every adding replica, which *receives* them (Kafka's
``KafkaController.onPartitionReassignment``: the adding replicas fetch from the leader). So
a move counts as one outgoing move on its current leader and one incoming move on each
adding broker; a wave holds at most ``max_outgoing_per_broker`` /
``max_incoming_per_broker`` of them per broker, and at most ``max_bytes_per_wave`` bytes (a
single larger move gets a wave of its own). Moves that only reorder replicas (a new
preferred leader) copy nothing, use no slot, and ride in the first wave.

Duration (KIP-73, Kafka's ``ReplicationQuotaManager``): a throttled broker sends at most
``leader.replication.throttled.rate`` and receives at most
``follower.replication.throttled.rate``, both set to the throttle ``R``. A wave therefore
lasts about its busiest broker's bytes over ``R``: ``max(max bytes sent by one leader, max
bytes received by one broker) / R``. For moves of equal size this is the cluster-wide
estimate ``total / (min(leaders, followers) * R)`` (for two moves with one shared leader,
one shared follower, or neither: ``2 size / R``, ``2 size / R``, ``size / R``); with uneven
sizes it is the tighter of the two, as the busiest broker finishes last.

Packing is first-fit by decreasing bytes (ties by partition position), so the same moves
and limits always give the same waves.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from kpo_placement.planner import Move


class WaveError(ValueError):
    """The wave limits are unusable (a cap below 1, a non-positive rate or byte limit)."""


@dataclass(frozen=True)
class Wave:
    """One wave of moves.

    Attributes:
        index: 0-based wave number (waves run in order).
        moves: The moves, by decreasing bytes then partition position.
        bytes_moved: Bytes the wave copies.
        busiest_broker: Id of the broker that sends or receives the most bytes (None if
            the wave copies nothing).
        busiest_broker_bytes: Those bytes.
        predicted_duration_s: ``busiest_broker_bytes / throttle``, s.
    """

    index: int
    moves: tuple[Move, ...]
    bytes_moved: float
    busiest_broker: int | None
    busiest_broker_bytes: float
    predicted_duration_s: float


def copy_source(move: Move, leaders: Mapping[int, int] | None) -> int:
    """Return the broker id sending ``move``'s bytes: its current leader.

    Args:
        move: The move.
        leaders: Partition position -> current leader id; without an entry (or with a
            negative id) the first current replica (the preferred leader) is assumed.
    """
    leader = -1 if leaders is None else leaders.get(move.p, -1)
    return leader if leader >= 0 else move.old_replicas[0]


def split_into_waves(
    moves: Sequence[Move],
    *,
    throttle_bytes_per_s: float,
    max_incoming_per_broker: int = 5,
    max_outgoing_per_broker: int = 5,
    max_bytes_per_wave: float | None = None,
    leaders: Mapping[int, int] | None = None,
) -> list[Wave]:
    """Pack ``moves`` into waves (see the module docstring).

    Args:
        moves: The plan's moves (:attr:`Plan.moves`).
        throttle_bytes_per_s: Replication throttle R, bytes/s (KIP-73 rates).
        max_incoming_per_broker: Moves a broker receives per wave at most.
        max_outgoing_per_broker: Moves a broker sends (as leader) per wave at most.
        max_bytes_per_wave: Bytes per wave at most, or None for no limit.
        leaders: Partition position -> current leader id (see :func:`copy_source`).

    Returns:
        The waves in order; empty when there are no moves.

    Raises:
        WaveError: A cap is below 1, the throttle is not positive, or the byte limit
            is not positive.
    """
    if max_incoming_per_broker < 1 or max_outgoing_per_broker < 1:
        raise WaveError("per-broker move caps must be >= 1")
    if throttle_bytes_per_s <= 0:
        raise WaveError(f"throttle must be positive, got {throttle_bytes_per_s}")
    if max_bytes_per_wave is not None and max_bytes_per_wave <= 0:
        raise WaveError(f"max_bytes_per_wave must be positive, got {max_bytes_per_wave}")
    copying = sorted((m for m in moves if m.adding), key=lambda m: (-m.bytes_moved, m.p))
    reorders = sorted((m for m in moves if not m.adding), key=lambda m: m.p)
    packed: list[list[Move]] = []
    wave_bytes: list[float] = []
    incoming: list[dict[int, int]] = []
    outgoing: list[dict[int, int]] = []
    first_in: dict[int, int] = {}
    first_out: dict[int, int] = {}
    for move in copying:
        sender = copy_source(move, leaders)
        w = max([first_out.get(sender, 0), *(first_in.get(b, 0) for b in move.adding)])
        while w < len(packed):
            fits_bytes = (
                max_bytes_per_wave is None
                or not packed[w]
                or wave_bytes[w] + move.bytes_moved <= max_bytes_per_wave
            )
            if (
                fits_bytes
                and outgoing[w].get(sender, 0) < max_outgoing_per_broker
                and all(incoming[w].get(b, 0) < max_incoming_per_broker for b in move.adding)
            ):
                break
            w += 1
        if w == len(packed):
            packed.append([])
            wave_bytes.append(0.0)
            incoming.append({})
            outgoing.append({})
        packed[w].append(move)
        wave_bytes[w] += move.bytes_moved
        outgoing[w][sender] = outgoing[w].get(sender, 0) + 1
        _advance(first_out, sender, outgoing, max_outgoing_per_broker)
        for b in move.adding:
            incoming[w][b] = incoming[w].get(b, 0) + 1
            _advance(first_in, b, incoming, max_incoming_per_broker)
    if reorders:
        if not packed:
            packed.append([])
        packed[0].extend(reorders)
    return [_wave(i, ms, throttle_bytes_per_s, leaders) for i, ms in enumerate(packed)]


def _advance(first: dict[int, int], broker: int, counts: list[dict[int, int]], cap: int) -> None:
    """Move ``broker``'s first-wave-with-room pointer past the waves where it is full."""
    w = first.get(broker, 0)
    while w < len(counts) and counts[w].get(broker, 0) >= cap:
        w += 1
    first[broker] = w


def _wave(index: int, moves: list[Move], rate: float, leaders: Mapping[int, int] | None) -> Wave:
    """Build a :class:`Wave` with its busiest broker and predicted duration."""
    sent: dict[int, float] = {}
    received: dict[int, float] = {}
    for move in moves:
        if not move.adding:
            continue
        size = move.bytes_moved / len(move.adding)
        sender = copy_source(move, leaders)
        sent[sender] = sent.get(sender, 0.0) + move.bytes_moved
        for b in move.adding:
            received[b] = received.get(b, 0.0) + size
    busiest, most = None, 0.0
    for broker, amount in sorted([*sent.items(), *received.items()]):
        if amount > most:
            busiest, most = broker, amount
    return Wave(
        index=index,
        moves=tuple(moves),
        bytes_moved=float(sum(m.bytes_moved for m in moves)),
        busiest_broker=busiest,
        busiest_broker_bytes=most,
        predicted_duration_s=most / rate,
    )


def total_duration_s(waves: Sequence[Wave]) -> float:
    """Return the predicted duration of running ``waves`` one after the other, s."""
    return float(sum(w.predicted_duration_s for w in waves))
