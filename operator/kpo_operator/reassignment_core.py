"""The shared core of the PartitionReassignment reconciler: clients, clocks, status writes.

:class:`ReconcilerCore` holds what every step needs (the Admin API, the object store,
the throttle writer, the rate estimators, the clocks) and the one way a step writes
status (:meth:`ReconcilerCore._write`: a merge patch only when something changed, an
Event on a phase change). The steps are in :mod:`kpo_operator.reassignment` and
:mod:`kpo_operator.reassignment_cancel`.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from kpo_kafka.admin import KafkaAdmin
from kpo_kafka.specs import PartitionTarget
from kpo_operator.cluster import ClusterSnapshot
from kpo_operator.conditions import Phase
from kpo_operator.progress import PartitionProgress, RateEstimator, partition_progress
from kpo_operator.reassignment_status import StatusUpdate, render_status, status_changed
from kpo_operator.resources import PARTITION_REASSIGNMENT
from kpo_operator.store import NORMAL, WARNING, Object, ObjectStore, object_key
from kpo_operator.throttle_writer import ThrottleWriter


class ReconcilerCore:
    """Clients, clocks and status writing shared by the reassignment steps.

    Args:
        admin: The Admin API client of the managed cluster.
        store: The Kubernetes API.
        writer: The single throttle writer.
        rate_window_s: Window of the replication-rate estimate, seconds.
        throttle_resync_s: How often a Moving object re-checks its throttles, seconds.
        clock: Monotonic seconds (rate estimates).
        now: Wall-clock time (status timestamps).
    """

    def __init__(
        self,
        admin: KafkaAdmin,
        store: ObjectStore,
        writer: ThrottleWriter,
        rate_window_s: float = 30.0,
        throttle_resync_s: float = 30.0,
        clock: Callable[[], float] = time.monotonic,
        now: Callable[[], datetime] = lambda: datetime.now(UTC),
    ) -> None:
        self.admin = admin
        self.store = store
        self.writer = writer
        self.rate_window_s = rate_window_s
        self.throttle_resync_s = throttle_resync_s
        self.clock = clock
        self.now = now
        self._rates: dict[str, RateEstimator] = {}

    def _failed(self, generation: int, problems: list[str], reason: str) -> StatusUpdate:
        return StatusUpdate(
            Phase.FAILED, "invalid: " + "; ".join(problems), generation, reason=reason
        )

    def _measure(
        self, target: PartitionTarget, original: tuple[int, ...], snapshot: ClusterSnapshot
    ) -> PartitionProgress:
        return partition_progress(target, original, snapshot.view, snapshot.sizes)

    def _write(
        self, obj: Object, old: dict[str, Any], update: StatusUpdate, reason: str | None
    ) -> None:
        """Patch the status if it changed; record an Event named ``reason`` on a new phase.

        ``old`` is updated in place to the written status.
        """
        before = old.get("phase")
        new = render_status(old, update, self.now())
        if not status_changed(old, new):
            return
        meta = obj["metadata"]
        self.store.patch_status(PARTITION_REASSIGNMENT, meta["namespace"], meta["name"], new)
        obj["status"] = {k: v for k, v in new.items() if v is not None}
        old.clear()
        old.update(obj["status"])
        if reason is not None and update.phase.value != before:
            kind = WARNING if update.phase is Phase.FAILED else NORMAL
            self.store.event(obj, kind, reason, update.message)


def object_uid(obj: Object) -> str:
    """Return ``metadata.uid`` (``namespace/name`` without one), the key of per-object state."""
    return str(obj["metadata"].get("uid") or object_key(obj))
