"""Checks of a plan's inputs and result, and the errors :func:`kpo_placement.planner.plan` raises.

Before planning: the options must fit the model (:func:`check_options`) and the replicas
must fit the eligible brokers in total (:func:`check_capacity`). After planning: the
target must break no hard goal (:func:`check_result`, goals of
:func:`kpo_placement.goals.hard_goal_violations`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from kpo_placement import goals
from kpo_placement.goals import DISK, REPLICAS, Violation
from kpo_placement.model import ClusterModel
from kpo_placement.plan_options import MODES
from kpo_placement.state import PlanState

if TYPE_CHECKING:
    from kpo_placement.plan_options import PlanOptions


class PlanError(Exception):
    """No plan can be made; subclasses say why."""


class InvalidOptionsError(PlanError, ValueError):
    """The :class:`PlanOptions` do not fit the model (unknown broker, bad number, ...)."""


class InsufficientCapacityError(PlanError):
    """The eligible brokers cannot hold every replica within the hard goals.

    Raised before planning when the totals cannot fit (disk under the threshold, replica
    cap, RF above the number of brokers), and in ``remove-brokers`` mode when a broker
    cannot be drained. ``remove-brokers`` is refused rather than partly done.
    """


class UnsatisfiableGoalError(PlanError):
    """Hard goals are still broken after planning.

    Attributes:
        violations: What is broken (:class:`kpo_placement.goals.Violation`).
    """

    def __init__(self, violations: list[Violation]) -> None:
        self.violations = violations
        shown = "; ".join(v.detail for v in violations[:5])
        more = f" (and {len(violations) - 5} more)" if len(violations) > 5 else ""
        super().__init__(f"hard goals cannot be met: {shown}{more}")


def check_options(model: ClusterModel, options: PlanOptions) -> None:
    """Raise :class:`InvalidOptionsError` when ``options`` do not fit ``model``."""
    if options.mode not in MODES:
        raise InvalidOptionsError(f"unknown mode {options.mode!r}; one of {', '.join(MODES)}")
    if options.balance_tolerance < 1.0:
        raise InvalidOptionsError(
            f"balance_tolerance must be >= 1, not {options.balance_tolerance}"
        )
    if not 0.0 < options.disk_threshold <= 1.0:
        raise InvalidOptionsError(f"disk_threshold must be in (0, 1], not {options.disk_threshold}")
    if options.max_replicas_per_broker is not None and options.max_replicas_per_broker < 1:
        raise InvalidOptionsError("max_replicas_per_broker must be >= 1")
    if options.max_rounds < 1 or options.top_k < 1 or options.candidates_per_broker < 1:
        raise InvalidOptionsError("max_rounds, top_k and candidates_per_broker must be >= 1")
    known = set(model.broker_ids.tolist())
    unknown = sorted(set(options.brokers_to_add + options.brokers_to_remove) - known)
    if unknown:
        raise InvalidOptionsError(f"brokers not in the model: {unknown}")
    if options.mode == "add-brokers":
        if not options.brokers_to_add:
            raise InvalidOptionsError("add-brokers needs brokers_to_add")
        counts = goals.broker_loads(model, model.replicas)[:, REPLICAS]
        for broker_id in options.brokers_to_add:
            b = model.position_of(broker_id)
            if not model.alive[b] or counts[b] > 0:
                raise InvalidOptionsError(
                    f"broker {broker_id} to add must be alive and empty "
                    f"(alive={bool(model.alive[b])}, replicas={int(counts[b])})"
                )
    if options.mode == "remove-brokers" and not options.brokers_to_remove:
        raise InvalidOptionsError("remove-brokers needs brokers_to_remove")


def check_capacity(model: ClusterModel, options: PlanOptions, eligible: np.ndarray) -> None:
    """Raise :class:`InsufficientCapacityError` when the totals cannot fit the eligible brokers."""
    loads = goals.broker_loads(model, model.replicas)
    problems = []
    room = options.disk_threshold * model.disk_capacity[eligible].sum()
    if loads[:, DISK].sum() > room:
        problems.append(
            f"{loads[:, DISK].sum():.0f} bytes do not fit under {options.disk_threshold:.0%} "
            f"of the eligible brokers' disks ({room:.0f} bytes)"
        )
    count = int(eligible.sum())
    cap = options.max_replicas_per_broker
    if cap is not None and loads[:, REPLICAS].sum() > cap * count:
        problems.append(f"{int(loads[:, REPLICAS].sum())} replicas exceed {cap} x {count} brokers")
    max_rf = int(model.rf.max()) if model.num_partitions else 0
    if max_rf > count:
        problems.append(f"replication factor {max_rf} exceeds the {count} eligible brokers")
    if problems:
        what = "cannot remove brokers: " if options.mode == "remove-brokers" else ""
        raise InsufficientCapacityError(what + "; ".join(problems))


def check_result(
    model: ClusterModel,
    options: PlanOptions,
    state: PlanState,
    eligible: np.ndarray,
    before: list[Violation],
) -> None:
    """Raise when the target breaks a hard goal (in ``leaders`` mode: a new one)."""
    found = goals.hard_goal_violations(
        model,
        state.assignment,
        eligible=eligible,
        disk_threshold=options.disk_threshold,
        max_replicas_per_broker=options.max_replicas_per_broker,
    )
    if options.mode == "leaders":
        found = [v for v in found if v not in before]
    if not found:
        return
    if options.mode == "remove-brokers" and any(v.goal == goals.INELIGIBLE_BROKER for v in found):
        stuck = [v.detail for v in found if v.goal == goals.INELIGIBLE_BROKER]
        raise InsufficientCapacityError("cannot remove brokers: " + "; ".join(stuck))
    raise UnsatisfiableGoalError(found)
