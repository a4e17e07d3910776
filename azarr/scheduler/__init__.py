"""Scheduling of chunk I/O: bounded fan-out under a per-store request budget."""

from azarr.scheduler._budget import RequestBudget, budget_for
from azarr.scheduler._fanout import bounded_map

__all__ = ["RequestBudget", "bounded_map", "budget_for"]
