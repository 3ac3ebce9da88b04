"""What the planner is asked to do: its mode and limits (:class:`PlanOptions`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

__all__ = ["MODES", "Mode", "PlanOptions"]

MODES: tuple[str, ...] = ("rebalance", "add-brokers", "remove-brokers", "leaders")
"""The planner's modes (:attr:`PlanOptions.mode`)."""

Mode = Literal["rebalance", "add-brokers", "remove-brokers", "leaders"]


@dataclass(frozen=True)
class PlanOptions:
    """What to plan.

    Attributes:
        mode: ``rebalance``, ``add-brokers`` (fill ``brokers_to_add``), ``remove-brokers``
            (drain ``brokers_to_remove``) or ``leaders`` (preferred leaders only).
        brokers_to_add: Broker ids, alive and holding no replica.
        brokers_to_remove: Broker ids to drain.
        max_replicas_per_broker: Replica cap per broker (hard goal), or None.
        disk_threshold: Fraction of each broker's disk capacity never exceeded.
        balance_tolerance: Target max/mean per resource (band ``[2 - t, t]``), >= 1.
        max_rounds: Rounds per phase at most.
        seed: Kept for the baselines and reproducibility records; the planner draws nothing.
        top_k: Destinations kept per candidate per round.
        candidates_per_broker: Replicas offered per source broker per balance round.
    """

    mode: Mode = "rebalance"
    brokers_to_add: tuple[int, ...] = ()
    brokers_to_remove: tuple[int, ...] = ()
    max_replicas_per_broker: int | None = None
    disk_threshold: float = 0.8
    balance_tolerance: float = 1.05
    max_rounds: int = 200
    seed: int = 0
    top_k: int = 16
    candidates_per_broker: int = 400
