"""Cancelling a PartitionReassignment (``spec.cancel: true`` or deletion, KIP-455).

The in-flight partitions this object submitted are cancelled (Kafka reverts them to
OAR), the original replica order is restored, its throttles are removed, and only then
is the object ``Cancelled`` (or let go by the finalizer).
"""

from __future__ import annotations

from typing import Any

from kpo_kafka.topic_partition import TopicPartition
from kpo_operator.cluster import ClusterSnapshot
from kpo_operator.conditions import Phase
from kpo_operator.progress import format_time
from kpo_operator.reassignment_actions import cancelled_entries, current_target, order_restores
from kpo_operator.reassignment_core import ReconcilerCore
from kpo_operator.reassignment_status import (
    ACTIVE_STATES,
    COMPLETED,
    PENDING,
    Accepted,
    StatusUpdate,
)
from kpo_operator.resources import PARTITION_REASSIGNMENT
from kpo_operator.store import Object
from kpo_operator.throttle_writer import THROTTLING_PHASES, source_of


class CancellingReconciler(ReconcilerCore):
    """Adds the cancellation step to :class:`~kpo_operator.reassignment_core.ReconcilerCore`."""

    def _cancel(
        self,
        obj: Object,
        status: dict[str, Any],
        generation: int,
        accepted: dict[TopicPartition, Accepted],
        snapshot: ClusterSnapshot,
        deleting: bool,
    ) -> str:
        phase = status.get("phase") or ""
        view = snapshot.view
        ours = [
            tp
            for tp, a in accepted.items()
            if a.state in ACTIVE_STATES
            and tp in view.reassigning
            and (current_target(snapshot, tp) == a.target or a.state == PENDING)
        ]
        if phase not in THROTTLING_PHASES:
            if not deleting:
                update = StatusUpdate(
                    Phase.CANCELLED,
                    "cancelled before anything was submitted",
                    generation,
                    completion_time=format_time(self.now()),
                )
                self._write(obj, status, update, "Cancelled")
            return Phase.CANCELLED
        if ours:
            errors = self.admin.alter_partition_reassignments({tp: None for tp in ours})
            refused = {tp: e for tp, e in errors.items() if e is not None}
            text = f"cancelling {len(ours)} in-flight partitions (reverting to their replicas)"
            if refused:
                text += "; " + "; ".join(f"{t}-{p}: {e}" for (t, p), e in refused.items())
            update = StatusUpdate(Phase.CANCELLING, text, generation)
            self._write(obj, status, update, "Cancelling")
            return Phase.CANCELLING
        # Kafka reverts a cancelled partition to OAR in its in-flight order (target first),
        # which can change the preferred leader: restore the recorded order (no data moves).
        reorder = order_restores(accepted, view)
        if reorder:
            self.admin.alter_partition_reassignments(reorder)
            text = f"restoring the original replica order of {len(reorder)} partitions"
            self._write(obj, status, StatusUpdate(Phase.CANCELLING, text, generation), None)
            return Phase.CANCELLING
        if self.writer.sync({source_of(PARTITION_REASSIGNMENT, obj): None}).errors:
            text = "cancelled; removing throttles failed, retrying"
            self._write(obj, status, StatusUpdate(Phase.CANCELLING, text, generation), None)
            return Phase.CANCELLING
        entries = cancelled_entries(accepted, view)
        moved = sum(e["state"] == COMPLETED for e in entries)
        text = (
            f"cancelled: {len(entries) - moved} partitions reverted, {moved} had already "
            "completed; throttles removed"
        )
        update = StatusUpdate(
            Phase.CANCELLED, text, generation, entries, completion_time=format_time(self.now())
        )
        self._write(obj, status, update, "Cancelled")
        return Phase.CANCELLED

    # -- helpers ----------------------------------------------------------------------------
