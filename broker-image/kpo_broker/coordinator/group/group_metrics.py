"""The group coordinator's metrics, named as Kafka names them (pure logic).

Gauges of Kafka's ``kafka.coordinator.group:type=GroupMetadataManager`` MBean, computed from
the groups this broker's coordinator holds: ``NumGroups``, ``NumOffsets`` (committed offsets
over all groups) and ``NumGroups<State>`` for each :class:`GroupState` (a Dead group still
held counts as Dead, as in Kafka). Counters of Kafka's ``group-coordinator-metrics``
(``kafka.server:type=group-coordinator-metrics``): ``group-completed-rebalance-count``
(a generation's assignment stored and the group Stable), ``offset-expiration-count``
(offsets removed by ``offsets.retention.minutes``) and ``offset-deletion-count`` (removed by
OffsetDelete), kept by :class:`GroupCoordinatorCounters`.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from kpo_broker.coordinator.group.group import GroupMetadata
from kpo_broker.coordinator.group.states import GroupState

#: MBean type of the gauges (domain ``kafka.coordinator.group``).
GROUP_METADATA_MANAGER = "GroupMetadataManager"


@dataclass
class GroupCoordinatorCounters:
    """Kafka's ``group-coordinator-metrics`` counts, since the broker started.

    Attributes:
        completed_rebalances: rebalances that ended with the group Stable.
        offset_expirations: committed offsets removed because they expired.
        offset_deletions: committed offsets removed by OffsetDelete requests.
    """

    completed_rebalances: int = 0
    offset_expirations: int = 0
    offset_deletions: int = 0

    def counts(self) -> dict[str, int]:
        """Return Kafka's metric name -> count."""
        return {
            "group-completed-rebalance-count": self.completed_rebalances,
            "offset-expiration-count": self.offset_expirations,
            "offset-deletion-count": self.offset_deletions,
        }


def group_metadata_gauges(groups: Iterable[GroupMetadata]) -> dict[str, int]:
    """Return the ``GroupMetadataManager`` gauges (Kafka's names) for ``groups``.

    Args:
        groups: every group the coordinator holds (of the partitions it owns).

    Returns:
        ``NumGroups``, ``NumOffsets`` and ``NumGroups<State>`` for the five states.
    """
    held = list(groups)
    gauges = {"NumGroups": len(held), "NumOffsets": sum(len(g.offsets) for g in held)}
    for state in GroupState:
        gauges[f"NumGroups{state.value}"] = sum(1 for g in held if g.state is state)
    return gauges
