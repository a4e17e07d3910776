"""Which samples an epoch visits, in which order: chunk-aligned units, shuffled, sharded, windowed.

Pure and deterministic: the same ``(seed, epoch)`` gives the same order on every
rank and in every worker, which is what lets shards partition an epoch without
talking to each other.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence

import numpy as np


@dataclasses.dataclass(frozen=True)
class EpochPlan:
    """The sample order of one epoch of one shard.

    Parameters
    ----------
    nsamples : int
        Length of axis 0.
    unit : int
        Samples per unit: the least common multiple of the arrays' chunk lengths
        along axis 0, so a unit is whole chunks of every array.
    shuffle : bool
        Shuffle unit order, then samples within each window.
    seed, epoch : int
        The random state of the epoch (``numpy.random.SeedSequence((seed, epoch, ...))``).
    shards : tuple of (num_shards, shard_id)
        Applied in turn to the epoch's unit order: shard ``i`` of ``n`` takes every
        ``n``-th unit from position ``i`` (ranks first, then DataLoader workers).
    preload_chunks : int
        Units per shuffling window.
    """

    nsamples: int
    unit: int
    shuffle: bool
    seed: int
    epoch: int
    shards: tuple[tuple[int, int], ...]
    preload_chunks: int

    @property
    def nunits(self) -> int:
        """Units along axis 0 (the last may be short)."""
        return math.ceil(self.nsamples / self.unit)

    def units(self) -> list[int]:
        """This shard's units, in the epoch's order."""
        rng = np.random.default_rng(np.random.SeedSequence((self.seed, self.epoch)))
        order = rng.permutation(self.nunits) if self.shuffle else np.arange(self.nunits)
        for num_shards, shard_id in self.shards:
            order = order[shard_id::num_shards]
        return [int(u) for u in order]

    def rows(self, unit: int) -> tuple[int, int]:
        """``[start, stop)`` samples of ``unit``."""
        return unit * self.unit, min((unit + 1) * self.unit, self.nsamples)

    def windows(self) -> list[list[int]]:
        """The shard's units grouped ``preload_chunks`` at a time (shuffling windows)."""
        units = self.units()
        return [units[i : i + self.preload_chunks] for i in range(0, len(units), self.preload_chunks)]

    def nsamples_in(self, units: Sequence[int]) -> int:
        """Samples in ``units``."""
        return sum(b - a for a, b in (self.rows(u) for u in units))

    def window_order(self, index: int, n: int) -> np.ndarray[tuple[int], np.dtype[np.intp]]:
        """The order of the ``n`` samples of window ``index`` (a permutation when shuffling)."""
        if not self.shuffle:
            return np.arange(n, dtype=np.intp)
        flat = [x for pair in self.shards for x in pair]
        rng = np.random.default_rng(np.random.SeedSequence((self.seed, self.epoch, index, *flat)))
        return rng.permutation(n).astype(np.intp)
