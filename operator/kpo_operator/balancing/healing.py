"""Where the replicas of a damaged or over-full Kafka cluster go (pure planning).

A BalancingPolicy heals its cluster with two plans, each a :class:`HealPlan` of new
replica lists (and, where needed, log dirs) that the reconciler writes as ordinary
partition reassignments:

- :func:`replace_replicas` restores the replication factor after a broker failure and
  moves replicas off failed or full disks: each replica on a leaving broker is replaced
  *in place* (same position in the replica list, so the preferred leader stays first
  unless it is the one leaving) by a live broker chosen as below.
- :func:`relieve_usage` brings every log dir (or every broker, its dirs summed) back to
  at most a fraction of its file system: it picks the replicas with the fewest bytes
  that remove the excess, and moves each to another log dir of the same broker when one
  can take it (an intra-broker move, KIP-113), else to another broker.

A third plan, :func:`balance_bytes`, evens out the bytes of the live brokers (Cruise
Control's ``DiskUsageDistributionGoal``, with its balance threshold as ``max / mean``, see
:func:`balance_stats`): it moves replicas from the most loaded broker to less loaded ones,
also in place and under the same rack rule.

Choosing a broker
-----------------
A destination is live, not excluded, not already a replica of the partition, not one of
the partition's leaving brokers, and has room for one replica of the partition.

Racks follow Kafka's rack-aware replica assignment (``AdminUtils.assignReplicasToBrokers``,
KIP-36 "Rack aware replica assignment"): a rack takes a second replica of a partition only
once every rack holds one. As in Cruise Control's ``RackAwareGoal``, this is a hard
rule: while some rack of a live broker holds none of the partition's remaining replicas,
only brokers of such racks qualify, and if none of them qualifies (all excluded, or
without room) the replica is reported unplaceable rather than doubled up on a rack. The
racks counted are those of every live broker, including excluded and leaving ones: a rack
whose brokers cannot take the replica now is still a rack of the cluster. When no live
broker has ``broker.rack``, racks are ignored; when some have one and others not, "no rack"
is one more rack value (where Kafka's safe mode would ignore racks altogether).

Among the qualifying brokers the least loaded wins: fewest bytes (the sizes of the
partitions it holds), then fewest replicas, then the lowest id, so that a plan is
reproducible. Loads start from the replica lists of every partition of the cluster and
follow each assignment; the idea is that of Cruise Control's ``ReplicaDistributionGoal``
and ``DiskUsageDistributionGoal``, applied greedily to the replicas that must move.

Disk usage
----------
A log dir's file-system size and the bytes usable by the broker come from
DescribeLogDirs v4 (``TotalBytes``, ``UsableBytes``, KIP-827); its used bytes are their
difference. A dir (or broker) is above ``threshold`` when ``used > threshold * total``;
its excess is the difference. The ideas are Cruise Control's ``DiskCapacityGoal`` (no
broker above a capacity threshold), ``IntraBrokerDiskCapacityGoal`` (the same per disk of
a JBOD broker, moving replicas between a broker's disks first) and
``DiskUsageDistributionGoal`` (prefer the emptiest destination).

Log dirs in a plan follow the reassignment JSON of ``kafka-reassign-partitions``: one entry
per replica, in the order of the replica list, with ``"any"`` for a replica whose dir the
broker chooses.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from kpo_kafka.specs import ANY_LOG_DIR
from kpo_kafka.topic_partition import TopicPartition

__all__ = [
    "ANY_LOG_DIR",
    "BalanceStats",
    "HealPlan",
    "LogDirUsage",
    "balance_bytes",
    "balance_stats",
    "relieve_usage",
    "replace_replicas",
    "usage_by_broker",
]


@dataclass(frozen=True)
class HealPlan:
    """The moves that heal a cluster, ready to be written as partition reassignments.

    Attributes:
        targets: partition -> its new replica list (preferred leader first), for every
            partition the plan changes. A partition whose replicas only change log dir
            keeps its replica list here.
        log_dirs: partition -> one log dir per replica, same length and order as
            ``targets[tp]``, only for the partitions whose move names log dirs;
            ``"any"`` (:data:`ANY_LOG_DIR`) for the replicas whose dir the broker chooses.
        unplaceable: partition -> why it could not be (fully) fixed. A partition may be
            both here and in ``targets`` when only some of its replicas could move.
        moved_bytes: bytes the plan copies: the partition's size for every new replica,
            including the copies between log dirs of one broker.
        local_bytes: the part of ``moved_bytes`` copied between log dirs of one broker
            (throttled by ``replica.alter.log.dirs.io.max.bytes.per.second``, not by the
            replication throttles).
        unrelieved: ``(broker, path)`` of a log dir, or ``(broker, None)`` of a broker
            judged as a whole, -> bytes it stays above the threshold after the plan
            (only from :func:`relieve_usage`).
    """

    targets: dict[TopicPartition, tuple[int, ...]]
    log_dirs: dict[TopicPartition, tuple[str, ...]]
    unplaceable: dict[TopicPartition, str]
    moved_bytes: int
    local_bytes: int = 0
    unrelieved: dict[tuple[int, str | None], int] = field(default_factory=dict)


@dataclass(frozen=True)
class LogDirUsage:
    """One online log dir of a live broker, as DescribeLogDirs v4 reports it (KIP-827).

    Attributes:
        broker: the broker id.
        path: the log dir's absolute path.
        total_bytes: size of the dir's file system in bytes (``TotalBytes``).
        usable_bytes: bytes of it the broker may still use (``UsableBytes``).
        replicas: partition -> bytes of its replica in this dir.
    """

    broker: int
    path: str
    total_bytes: int
    usable_bytes: int
    replicas: Mapping[TopicPartition, int] = field(default_factory=dict)

    @property
    def used_bytes(self) -> int:
        """Bytes in use: ``total_bytes - usable_bytes``, and 0 if that is negative."""
        return max(0, self.total_bytes - self.usable_bytes)

    @property
    def used_fraction(self) -> float:
        """Used share of the file system, ``used_bytes / total_bytes``; 0.0 when total <= 0."""
        if self.total_bytes <= 0:
            return 0.0
        return self.used_bytes / self.total_bytes


def usage_by_broker(dirs: Iterable[LogDirUsage]) -> dict[int, tuple[int, int]]:
    """Sum the log dirs of each broker.

    Args:
        dirs: log dirs of any brokers.

    Returns:
        broker -> ``(used_bytes, total_bytes)`` over its dirs, in broker id order.
    """
    used: dict[int, int] = defaultdict(int)
    total: dict[int, int] = defaultdict(int)
    for usage in dirs:
        used[usage.broker] += usage.used_bytes
        total[usage.broker] += usage.total_bytes
    return {broker: (used[broker], total[broker]) for broker in sorted(used)}


def _limit(threshold: float, total: int) -> int:
    """Return the most bytes in use that keep ``total`` at or below ``threshold``."""
    if total <= 0:
        return 0
    return math.floor(threshold * total)


def _rack_text(racks: Iterable[str | None]) -> str:
    names = sorted(racks, key=lambda rack: (rack is None, rack or ""))
    return ", ".join("(no rack)" if rack is None else rack for rack in names)


class _Capacity(Protocol):
    """What brokers may still receive, and the log dir a received replica goes to."""

    def fits(self, broker: int, size: int) -> bool: ...

    def take(self, broker: int, size: int) -> str: ...


class _Room:
    """Room in bytes per broker, without log dirs; ``None``: unlimited."""

    def __init__(self, room: Mapping[int, int] | None) -> None:
        self._room = None if room is None else dict(room)

    def fits(self, broker: int, size: int) -> bool:
        return self._room is None or self._room.get(broker, 0) >= size

    def take(self, broker: int, size: int) -> str:
        if self._room is not None:
            self._room[broker] = self._room.get(broker, 0) - size
        return ANY_LOG_DIR


class _DirRoom:
    """Room under a usage threshold per log dir and per broker, following each move.

    A broker may receive a replica when one of its dirs stays at or below the threshold
    after receiving it, and so does the broker as a whole; the replica goes to the dir
    that is the least used after receiving it. Bytes that moves will free are not
    counted as room: they are freed only when the moves complete.
    """

    def __init__(self, dirs: Iterable[LogDirUsage], threshold: float) -> None:
        self._threshold = threshold
        self._used: dict[tuple[int, str], int] = {}
        self._total: dict[tuple[int, str], int] = {}
        self._paths: dict[int, list[str]] = defaultdict(list)
        self._broker_used: dict[int, int] = defaultdict(int)
        self._broker_total: dict[int, int] = defaultdict(int)
        for usage in dirs:
            key = (usage.broker, usage.path)
            if key in self._used:
                continue
            self._used[key] = usage.used_bytes
            self._total[key] = usage.total_bytes
            self._paths[usage.broker].append(usage.path)
            self._broker_used[usage.broker] += usage.used_bytes
            self._broker_total[usage.broker] += usage.total_bytes
        for paths in self._paths.values():
            paths.sort()

    def _dir_fits(self, broker: int, path: str, size: int) -> bool:
        key = (broker, path)
        return self._used[key] + size <= _limit(self._threshold, self._total[key])

    def _best_dir(self, broker: int, size: int, skip: str | None = None) -> str | None:
        best: tuple[float, str] | None = None
        for path in self._paths.get(broker, ()):
            if path == skip or not self._dir_fits(broker, path, size):
                continue
            key = (broker, path)
            # A dir that fits has a positive total (its limit is 0 otherwise).
            fraction = (self._used[key] + size) / self._total[key] if self._total[key] else 0.0
            if best is None or (fraction, path) < best:
                best = (fraction, path)
        return None if best is None else best[1]

    def fits(self, broker: int, size: int) -> bool:
        broker_limit = _limit(self._threshold, self._broker_total.get(broker, 0))
        if self._broker_used.get(broker, 0) + size > broker_limit:
            return False
        return self._best_dir(broker, size) is not None

    def take(self, broker: int, size: int) -> str:
        path = self._best_dir(broker, size)
        if path is None:  # callers ask fits() first
            raise AssertionError(f"no log dir of broker {broker} has room for {size} bytes")
        self._used[(broker, path)] += size
        self._broker_used[broker] += size
        return path

    def take_local(self, broker: int, source: str, size: int) -> str | None:
        """Place a replica of ``source`` in another dir of ``broker``; None if none fits."""
        path = self._best_dir(broker, size, skip=source)
        if path is not None:
            self._used[(broker, path)] += size
        return path


@dataclass(frozen=True)
class _Replacement:
    replicas: tuple[int, ...]
    log_dirs: dict[int, str]  # position -> log dir of its new replica
    reasons: tuple[tuple[int, str], ...]  # (broker, why) of each leaving replica that stays


class _Placer:
    """Rack-aware, least-loaded choice of brokers, with loads that follow each choice."""

    def __init__(
        self,
        partitions: Mapping[TopicPartition, Sequence[int]],
        live: Mapping[int, str | None],
        sizes: Mapping[TopicPartition, int],
        excluded: Collection[int],
        capacity: _Capacity,
    ) -> None:
        self._live = sorted(live)
        self._rack = dict(live)
        self._rack_aware = any(rack is not None for rack in live.values())
        self._live_racks = frozenset(live.values())
        self._excluded = frozenset(excluded)
        self._capacity = capacity
        self._bytes: dict[int, int] = defaultdict(int)
        self._count: dict[int, int] = defaultdict(int)
        for tp, replicas in partitions.items():
            size = sizes.get(tp, 0)
            for broker in replicas:
                self._bytes[broker] += size
                self._count[broker] += 1

    def replace(self, replicas: Sequence[int], leaving: Collection[int], size: int) -> _Replacement:
        """Replace, in place and in list order, each replica on a ``leaving`` broker."""
        new = list(replicas)
        dirs: dict[int, str] = {}
        reasons: list[tuple[int, str]] = []
        for position, broker in enumerate(replicas):
            if broker not in leaving:
                continue
            used = {self._rack[b] for b in new if b not in leaving and b in self._rack}
            restricted = self._rack_aware and not self._live_racks <= used
            target = self._choose(new, leaving, used if restricted else set(), size)
            if target is None:
                where = f" outside racks {_rack_text(used)}" if restricted else ""
                reasons.append(
                    (
                        broker,
                        f"no live broker{where} that is not excluded and not a replica "
                        f"has room for {size} bytes",
                    )
                )
                continue
            new[position] = target
            dirs[position] = self._capacity.take(target, size)
            self._bytes[target] += size
            self._count[target] += 1
            self._bytes[broker] -= size
            self._count[broker] -= 1
        return _Replacement(tuple(new), dirs, tuple(reasons))

    def _choose(
        self, current: Sequence[int], leaving: Collection[int], used: set[str | None], size: int
    ) -> int | None:
        best: tuple[int, int, int] | None = None
        for broker in self._live:
            if broker in current or broker in leaving or broker in self._excluded:
                continue
            if used and self._rack[broker] in used:
                continue
            if not self._capacity.fits(broker, size):
                continue
            key = (self._bytes[broker], self._count[broker], broker)
            if best is None or key < best:
                best = key
        return None if best is None else best[2]


def _check_sizes(sizes: Mapping[TopicPartition, int]) -> None:
    negative = sorted(tp for tp, size in sizes.items() if size < 0)
    if negative:
        raise ValueError(f"negative partition sizes: {', '.join(map(str, negative))}")


def replace_replicas(
    partitions: Mapping[TopicPartition, Sequence[int]],
    live: Mapping[int, str | None],
    leaving: Mapping[TopicPartition, Collection[int]],
    sizes: Mapping[TopicPartition, int],
    excluded: Collection[int] = (),
    room: Mapping[int, int] | None = None,
) -> HealPlan:
    """Replace, in place, the replicas on leaving brokers by live brokers.

    Each replica of a partition on one of ``leaving[tp]`` is replaced at the same
    position of the replica list by a live broker that is not excluded, not already a
    replica, not in ``leaving[tp]``, has room for the partition and keeps the partition's
    replicas on distinct racks while a rack of a live broker holds none of them; the
    least loaded such broker wins (see the module docstring). Partitions are placed
    largest first (then in partition order), so that the big ones find room and the
    small ones even out the load; the replicas of one partition are replaced in list
    order.

    A replica that no broker can take stays where it is (the partition keeps its
    leaving broker at that position) and the partition is reported in
    ``unplaceable``; its other replicas are still replaced. A partition none of whose
    replicas is on a leaving broker is ignored.

    Args:
        partitions: replica lists (preferred leader first) of every partition of the
            cluster; they give the brokers' loads.
        live: live broker id -> its rack (None: no ``broker.rack``).
        leaving: partition -> brokers whose replica of it must go (failed brokers,
            brokers whose log dir failed or is full).
        sizes: partition -> bytes of one of its replicas; a missing partition is 0 bytes.
        excluded: brokers that must not receive a replica (for example over a disk
            threshold); their replicas that are not leaving stay.
        room: broker -> bytes it may still receive, decreased by each assignment; a
            broker missing from it receives nothing but empty replicas. None: unlimited.

    Returns:
        The plan: ``targets`` for every partition with at least one replica replaced,
        no ``log_dirs`` (the brokers choose the dirs), ``unplaceable`` with one reason
        per replica that stays, ``moved_bytes`` the sizes of the new replicas.

    Raises:
        ValueError: a size in ``sizes`` is negative.
    """
    _check_sizes(sizes)
    placer = _Placer(partitions, live, sizes, excluded, _Room(room))
    work: list[tuple[int, TopicPartition, frozenset[int]]] = []
    for tp, brokers in leaving.items():
        replicas = partitions.get(tp)
        if replicas is None:
            continue
        gone = frozenset(brokers)
        if gone & set(replicas):
            work.append((sizes.get(tp, 0), tp, gone))
    work.sort(key=lambda item: (-item[0], item[1]))

    targets: dict[TopicPartition, tuple[int, ...]] = {}
    unplaceable: dict[TopicPartition, str] = {}
    moved = 0
    for size, tp, gone in work:
        result = placer.replace(partitions[tp], gone, size)
        if result.log_dirs:
            targets[tp] = result.replicas
            moved += size * len(result.log_dirs)
        if result.reasons:
            unplaceable[tp] = "; ".join(
                f"replica on broker {broker}: {why}" for broker, why in result.reasons
            )
    return HealPlan(
        targets=dict(sorted(targets.items())),
        log_dirs={},
        unplaceable=dict(sorted(unplaceable.items())),
        moved_bytes=moved,
    )


@dataclass(frozen=True)
class _Over:
    """A log dir (path) or a whole broker (path None) above the threshold."""

    broker: int
    path: str | None
    fraction: float
    excess: int
    replicas: Mapping[TopicPartition, int]


def _over_threshold(dirs: Sequence[LogDirUsage], threshold: float, per_broker: bool) -> list[_Over]:
    found: list[_Over] = []
    if per_broker:
        replicas: dict[int, dict[TopicPartition, int]] = defaultdict(dict)
        for usage in dirs:
            for tp, size in usage.replicas.items():
                replicas[usage.broker][tp] = max(size, replicas[usage.broker].get(tp, 0))
        for broker, (used, total) in usage_by_broker(dirs).items():
            excess = used - _limit(threshold, total)
            if excess > 0:
                fraction = used / total if total > 0 else 0.0
                found.append(_Over(broker, None, fraction, excess, replicas[broker]))
    else:
        for usage in dirs:
            excess = usage.used_bytes - _limit(threshold, usage.total_bytes)
            if excess > 0:
                found.append(
                    _Over(usage.broker, usage.path, usage.used_fraction, excess, usage.replicas)
                )
    found.sort(key=lambda over: (-over.fraction, over.broker, over.path or ""))
    return found


def _fewest_bytes(
    candidates: Mapping[TopicPartition, int], excess: int
) -> list[tuple[TopicPartition, int]]:
    """Pick replicas whose sizes add up to at least ``excess`` with few bytes.

    While some candidate alone covers what is still needed, the smallest such is taken
    and the pick is complete; otherwise the largest is taken and the search goes on.
    Then, largest first and as long as one can, a picked replica is left out, or swapped
    for the smallest unpicked one that is smaller, whenever the sum stays at least
    ``excess``. All candidates are picked when even their sum falls short. Ties go to
    the lower partition; the pick is returned largest first.
    """

    def order(item: tuple[TopicPartition, int]) -> tuple[int, TopicPartition]:
        return (item[1], item[0])

    remaining = sorted(candidates.items(), key=lambda item: (-item[1], item[0]))
    picked: list[tuple[TopicPartition, int]] = []
    need = excess
    while need > 0 and remaining:
        covering = [item for item in remaining if item[1] >= need]
        item = min(covering, key=order) if covering else remaining[0]
        remaining.remove(item)
        picked.append(item)
        need -= item[1]
    total = sum(size for _, size in picked)
    improved = total >= excess
    while improved:
        improved = False
        for item in sorted(picked, key=order, reverse=True):
            slack = total - excess
            if item[1] <= slack:
                picked.remove(item)
                remaining.append(item)
                total -= item[1]
                improved = True
                break
            smaller = [other for other in remaining if item[1] - slack <= other[1] < item[1]]
            if smaller:
                other = min(smaller, key=order)
                picked[picked.index(item)] = other
                remaining[remaining.index(other)] = item
                total += other[1] - item[1]
                improved = True
                break
    return sorted(picked, key=lambda item: (-item[1], item[0]))


def relieve_usage(
    partitions: Mapping[TopicPartition, Sequence[int]],
    live: Mapping[int, str | None],
    dirs: Sequence[LogDirUsage],
    threshold: float,
    per_broker: bool = False,
    busy: Collection[TopicPartition] = (),
) -> HealPlan:
    """Move replicas off the log dirs (or brokers) above a usage threshold.

    Each log dir above ``threshold`` (with ``per_broker``: each broker whose dirs summed
    are above it), fullest first, sheds replicas whose sizes add up to its excess
    (``used - threshold * total`` bytes) with few bytes: the smallest replica that
    covers the excess alone, else the largest ones until the smallest that covers the
    rest, then without any that is not needed and with smaller ones swapped in where
    they suffice. Each picked replica goes:

    1. when judging dirs, to another online log dir of the same broker that stays at or
       below the threshold after receiving it, the least used after receiving it wins:
       ``targets[tp]`` keeps the replica list, ``log_dirs[tp]`` names that dir at the
       broker's position and ``"any"`` elsewhere;
    2. else to another broker, as :func:`replace_replicas` chooses (rack aware, least
       loaded), with room per log dir: a broker qualifies when one of its dirs, and the
       broker as a whole, stays at or below the threshold after receiving the replica;
       the move names that dir (the least used after receiving it) in ``log_dirs[tp]``,
       so that the broker cannot put the replica in a fuller one.

    A picked replica that cannot go anywhere is left and the pick is redone for what is
    still in excess, without it. A dir or broker still above the threshold after that
    is reported in ``unrelieved`` and its replicas that could not go in ``unplaceable``.

    A partition moves at most once in a plan: partitions in ``busy``, partitions already
    moved for another dir, empty replicas and replicas of a partition that does not list
    the broker are never picked. Room freed by the moves is not counted until they
    complete. Dirs of brokers not in ``live`` are ignored.

    Args:
        partitions: replica lists (preferred leader first) of every partition of the
            cluster; they give the brokers' loads.
        live: live broker id -> its rack (None: no ``broker.rack``).
        dirs: every online log dir of every live broker, with its replicas' sizes. A
            partition's size is its largest replica in ``dirs``; a broker without dirs
            receives nothing.
        threshold: the highest used fraction allowed for any dir and any broker, in
            (0, 1], e.g. 0.85.
        per_broker: False: each log dir is judged alone; True: a broker's dirs are summed
            and only moves to other brokers help.
        busy: partitions already being moved.

    Returns:
        The plan; ``moved_bytes`` counts every new replica (``local_bytes`` those between
        dirs of one broker) and ``unrelieved`` the bytes still above the threshold.

    Raises:
        ValueError: ``threshold`` is not within (0, 1], or a replica size is negative.
    """
    if not 0 < threshold <= 1:
        raise ValueError(f"threshold must be within (0, 1]: {threshold}")
    online = [usage for usage in dirs if usage.broker in live]
    sizes: dict[TopicPartition, int] = {}
    for usage in online:
        _check_sizes(usage.replicas)
        for tp, size in usage.replicas.items():
            sizes[tp] = max(size, sizes.get(tp, 0))
    room = _DirRoom(online, threshold)
    placer = _Placer(partitions, live, sizes, (), room)
    skip = frozenset(busy)

    targets: dict[TopicPartition, tuple[int, ...]] = {}
    log_dirs: dict[TopicPartition, tuple[str, ...]] = {}
    unplaceable: dict[TopicPartition, list[str]] = defaultdict(list)
    unrelieved: dict[tuple[int, str | None], int] = {}
    moved = 0
    local = 0

    def movable(over: _Over, tp: TopicPartition, size: int) -> bool:
        replicas = partitions.get(tp, ())
        return size > 0 and tp not in skip and tp not in targets and over.broker in replicas

    for over in _over_threshold(online, threshold, per_broker):
        need = over.excess
        tried: set[TopicPartition] = set()
        failures: dict[TopicPartition, str] = {}
        while need > 0:
            candidates = {
                tp: size
                for tp, size in over.replicas.items()
                if tp not in tried and movable(over, tp, size)
            }
            if not candidates:
                break
            for tp, size in _fewest_bytes(candidates, need):
                tried.add(tp)
                replicas = tuple(partitions[tp])
                position = replicas.index(over.broker)
                if over.path is not None:
                    path = room.take_local(over.broker, over.path, size)
                    if path is not None:
                        targets[tp] = replicas
                        log_dirs[tp] = tuple(
                            path if i == position else ANY_LOG_DIR for i in range(len(replicas))
                        )
                        moved += size
                        local += size
                        need -= size
                        continue
                result = placer.replace(replicas, (over.broker,), sizes[tp])
                if result.log_dirs:
                    targets[tp] = result.replicas
                    log_dirs[tp] = tuple(
                        result.log_dirs.get(i, ANY_LOG_DIR) for i in range(len(replicas))
                    )
                    moved += sizes[tp]
                    need -= size
                    continue
                where = "" if over.path is None else f" in {over.path}"
                local_reason = (
                    ""
                    if over.path is None
                    else f"no other log dir of broker {over.broker} stays at or below "
                    f"{threshold:g} with {size} more bytes; "
                )
                failures[tp] = (
                    f"replica on broker {over.broker}{where}: {local_reason}"
                    f"{'; '.join(why for _, why in result.reasons)}"
                )
        if need > 0:
            unrelieved[(over.broker, over.path)] = need
            for tp, reason in failures.items():
                unplaceable[tp].append(reason)

    return HealPlan(
        targets=dict(sorted(targets.items())),
        log_dirs=dict(sorted(log_dirs.items())),
        unplaceable={tp: "; ".join(reasons) for tp, reasons in sorted(unplaceable.items())},
        moved_bytes=moved,
        local_bytes=local,
        unrelieved=dict(
            sorted(unrelieved.items(), key=lambda item: (item[0][0], item[0][1] or ""))
        ),
    )


@dataclass(frozen=True)
class BalanceStats:
    """How evenly the replicas' bytes spread over the live brokers.

    Attributes:
        mean_bytes: the bytes of all live brokers over their number (0.0 without any).
        max_bytes: the bytes of the most loaded live broker (0 without any).
        max_broker: that broker, the lowest id among equals; None without live brokers.
        ratio: ``max_bytes / mean_bytes``, 1.0 when ``mean_bytes`` is 0; a cluster is
            balanced within a tolerance ``t`` (e.g. 1.10) when ``ratio <= t``.
    """

    mean_bytes: float
    max_bytes: int
    max_broker: int | None
    ratio: float


def _broker_bytes(
    partitions: Mapping[TopicPartition, Sequence[int]],
    live: Mapping[int, str | None],
    sizes: Mapping[TopicPartition, int],
) -> dict[int, int]:
    """Live broker -> the sizes of the partitions it holds a replica of, in id order."""
    loads = dict.fromkeys(sorted(live), 0)
    for tp, replicas in partitions.items():
        size = sizes.get(tp, 0)
        for broker in set(replicas):
            if broker in loads:
                loads[broker] += size
    return loads


def _stats(loads: Mapping[int, int]) -> BalanceStats:
    if not loads:
        return BalanceStats(mean_bytes=0.0, max_bytes=0, max_broker=None, ratio=1.0)
    mean = sum(loads.values()) / len(loads)
    broker = min(loads, key=lambda b: (-loads[b], b))
    top = loads[broker]
    return BalanceStats(
        mean_bytes=mean, max_bytes=top, max_broker=broker, ratio=top / mean if mean else 1.0
    )


def balance_stats(
    partitions: Mapping[TopicPartition, Sequence[int]],
    live: Mapping[int, str | None],
    sizes: Mapping[TopicPartition, int],
) -> BalanceStats:
    """Measure how evenly the partitions' bytes spread over the live brokers.

    A live broker's bytes are the sizes of the partitions it holds a replica of; replicas
    on brokers that are not live are ignored, and every live broker counts in the mean,
    those without replicas too.

    Args:
        partitions: replica lists of every partition of the cluster.
        live: live broker id -> its rack (only the ids matter here).
        sizes: partition -> bytes of one of its replicas; a missing partition is 0 bytes.

    Returns:
        The mean, the most loaded broker and the ratio of its bytes to the mean.

    Raises:
        ValueError: a size in ``sizes`` is negative.
    """
    _check_sizes(sizes)
    return _stats(_broker_bytes(partitions, live, sizes))


def balance_bytes(
    partitions: Mapping[TopicPartition, Sequence[int]],
    live: Mapping[int, str | None],
    sizes: Mapping[TopicPartition, int],
    tolerance: float,
    busy: Collection[TopicPartition] = (),
    max_moves: int = 1000,
    room: Mapping[int, int] | None = None,
) -> HealPlan:
    """Move replicas off the most loaded live brokers until the bytes are balanced.

    The cluster is balanced when every live broker holds at most ``tolerance`` times the
    mean bytes of the live brokers (:func:`balance_stats`). Until it is, greedily: the
    most loaded live broker (the lowest id among equals) gives one replica to a less
    loaded live broker. Of all its replicas and their destinations, the move of ``s``
    bytes from this source to a destination wins that

    1. strictly lowers the larger of the two brokers' bytes: ``dst + s < src`` (with
       ``s > 0``), so that no broker ends above the source's bytes before the move;
    2. makes that larger value, ``max(src - s, dst + s)``, the smallest;
    3. among equals, does not move more than half the gap (``s <= (src - dst) / 2``),
       then goes to the less loaded destination, the lower broker id, the lower
       partition.

    A destination is live, holds no replica of the partition, has room for it and
    keeps the rack rule of :func:`replace_replicas`: while a rack of a live broker holds
    none of the partition's other replicas (the moving one frees its rack), only brokers
    of such racks qualify. Each move replaces the replica in place (the preferred leader
    stays first unless it is the one moving) and updates the loads.

    The plan stops as soon as the most loaded broker cannot be improved by any move,
    even if another broker could be: moving replicas between less loaded brokers does
    not lower the maximum. It also stops after ``max_moves`` moves. Since each move
    lowers the larger of the two loads it changes and leaves the total alone, the
    maximum (and the ratio of :func:`balance_stats`) never grows.

    A partition moves at most once in a plan (one replica); partitions in ``busy``,
    empty partitions (size 0) and replica lists naming a broker twice are never moved.
    Leadership is ignored: the caller puts partitions without a leader in ``busy``.

    Args:
        partitions: replica lists (preferred leader first) of every partition of the
            cluster; they give the brokers' loads.
        live: live broker id -> its rack (None: no ``broker.rack``).
        sizes: partition -> bytes of one of its replicas; a missing partition is 0 bytes.
        tolerance: the highest ``max / mean`` allowed, at least 1, e.g. 1.10.
        busy: partitions that must not move (being moved, offline).
        max_moves: the most replica moves (partitions) in the plan.
        room: broker -> bytes it may still receive, decreased by each move; a broker
            missing from it receives nothing. None: unlimited.

    Returns:
        The plan: ``targets`` for each partition moved, ``moved_bytes`` their sizes, no
        ``log_dirs`` (the brokers choose the dirs) and no ``unplaceable``.

    Raises:
        ValueError: a size is negative, ``tolerance`` is below 1 or ``max_moves`` is
            negative.
    """
    _check_sizes(sizes)
    if not tolerance >= 1:  # also refuses NaN
        raise ValueError(f"tolerance must be at least 1: {tolerance}")
    if max_moves < 0:
        raise ValueError(f"max_moves must not be negative: {max_moves}")
    loads = _broker_bytes(partitions, live, sizes)
    targets: dict[TopicPartition, tuple[int, ...]] = {}
    moved = 0
    if not loads:
        return HealPlan(targets={}, log_dirs={}, unplaceable={}, moved_bytes=0)
    limit = tolerance * sum(loads.values()) / len(loads)
    rack = dict(live)
    rack_aware = any(value is not None for value in live.values())
    live_racks = frozenset(live.values())
    capacity = _Room(room)
    skip = frozenset(busy)

    # Live broker -> the partitions it may give away.
    held: dict[int, set[TopicPartition]] = {broker: set() for broker in loads}
    for tp, replicas in partitions.items():
        if tp in skip or sizes.get(tp, 0) <= 0 or len(set(replicas)) != len(replicas):
            continue
        for broker in replicas:
            if broker in held:
                held[broker].add(tp)

    while len(targets) < max_moves:
        source = min(loads, key=lambda b: (-loads[b], b))
        top = loads[source]
        if top <= limit:
            break
        order = sorted(loads, key=lambda b: (loads[b], b))
        best: tuple[int, bool, int, int, TopicPartition] | None = None
        for tp in held[source]:
            size = sizes[tp]
            others = [b for b in partitions[tp] if b != source]
            used = {rack[b] for b in others if b in rack}
            restricted = rack_aware and not live_racks <= used
            # The least loaded qualifying destination is this replica's best (every
            # criterion grows with the destination's load), and past a load of
            # ``top - size`` no destination improves.
            for dst in order:
                if loads[dst] + size >= top:
                    break
                if dst in others or (restricted and rack[dst] in used):
                    continue
                if not capacity.fits(dst, size):
                    continue
                key = (
                    max(top - size, loads[dst] + size),
                    2 * size > top - loads[dst],
                    loads[dst],
                    dst,
                    tp,
                )
                if best is None or key < best:
                    best = key
                break
        if best is None:
            break
        _, _, _, dst, tp = best
        size = sizes[tp]
        replicas = list(partitions[tp])
        replicas[replicas.index(source)] = dst
        targets[tp] = tuple(replicas)
        capacity.take(dst, size)
        loads[source] -= size
        loads[dst] += size
        moved += size
        for broker in partitions[tp]:
            if broker in held:
                held[broker].discard(tp)

    return HealPlan(
        targets=dict(sorted(targets.items())), log_dirs={}, unplaceable={}, moved_bytes=moved
    )
