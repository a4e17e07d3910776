"""``BatchLoader``: training batches from arrays sharing axis 0, each chunk fetched once per epoch."""

from __future__ import annotations

import asyncio
import collections
import contextlib
import copy
import math
from collections.abc import AsyncIterator, Iterator, Mapping
from typing import Any

import numpy as np

from azarr.core import AsyncArray
from azarr.loader._plan import EpochPlan
from azarr.sync import iterate

Batch = np.ndarray[Any, Any] | dict[str, np.ndarray[Any, Any]]

DEFAULT_PREFETCH_BYTES = 256 * 2**20
"""Bytes of fetched windows a loader holds at most by default (256 MiB)."""

_SINGLE = "\0array"  # key of the one array when a loader is given a bare array


class BatchLoader:
    """Shuffled batches of samples (rows along axis 0) from one or several arrays.

    Reads whole chunks and shuffles in two levels, so no sample costs its own
    request: the order of chunk-aligned *units* (the rows of one chunk of every
    array) is shuffled, then the samples inside a window of ``preload_chunks``
    units. Windows are fetched ahead, concurrently, under a byte bound; every
    chunk is fetched exactly once per epoch.

    Parameters
    ----------
    arrays : AsyncArray or mapping of str to AsyncArray
        One array (batches are arrays) or several sharing the length of axis 0,
        e.g. ``{"x": images, "y": labels}`` (batches are dicts of arrays).
    batch_size : int
        Samples per batch.
    shuffle : bool
        Shuffle (default). Without it, samples come in storage order.
    seed : int
        Seed of the shuffle; the order of an epoch depends only on ``seed`` and
        the epoch number (`set_epoch`), not on timing.
    preload_chunks : int
        Units per shuffling window: larger mixes better and holds more memory
        (``preload_chunks`` x unit bytes per window).
    drop_last : bool
        Drop the last batch of the shard's epoch if it is short.
    max_prefetch_bytes : int
        Bytes of windows held at once (fetched or being fetched), in bytes. At
        least one window is always held, whatever this says. Below the store's
        request budget in chunk bytes plus two windows, requests run in rounds
        with idle gaps (see ``docs/recipes.md``).

    Raises
    ------
    ValueError
        No arrays, arrays of different lengths along axis 0, 0-d arrays, or a
        non-positive ``batch_size`` / ``preload_chunks``.

    Notes
    -----
    The unit is the least common multiple of the arrays' chunk lengths along
    axis 0, so arrays chunked differently still have each chunk read once.
    ``async for batch in loader`` runs on the caller's event loop; a plain
    ``for`` runs it on the sync facade's I/O loop (`azarr.sync.iterate`). `shard` splits the units of
    an epoch between data-parallel ranks or workers (disjoint, together
    complete); `azarr.loader.TorchIterableDataset` does that for
    DataLoader workers. Like ``torch.utils.data.DistributedSampler``, the epoch
    changes only through `set_epoch`.
    """

    def __init__(
        self,
        arrays: AsyncArray | Mapping[str, AsyncArray],
        *,
        batch_size: int,
        shuffle: bool = True,
        seed: int = 0,
        preload_chunks: int = 4,
        drop_last: bool = False,
        max_prefetch_bytes: int = DEFAULT_PREFETCH_BYTES,
    ) -> None:
        self._single = isinstance(arrays, AsyncArray)
        named: dict[str, AsyncArray] = {_SINGLE: arrays} if isinstance(arrays, AsyncArray) else dict(arrays)
        if not named:
            raise ValueError("BatchLoader needs at least one array")
        lengths = {name: a.shape[0] if a.ndim else None for name, a in named.items()}
        if None in lengths.values():
            raise ValueError("BatchLoader arrays need at least one dimension (samples along axis 0)")
        if len(set(lengths.values())) > 1:
            raise ValueError(f"arrays must share the length of axis 0, got {self._show(lengths)}")
        if batch_size < 1 or preload_chunks < 1:
            raise ValueError(
                f"batch_size and preload_chunks must be >= 1, got {batch_size} and {preload_chunks}"
            )
        self.arrays = named
        self.batch_size = int(batch_size)
        self.shuffle = bool(shuffle)
        self.seed = int(seed)
        self.preload_chunks = int(preload_chunks)
        self.drop_last = bool(drop_last)
        self.max_prefetch_bytes = int(max_prefetch_bytes)
        self.epoch = 0
        self.shards: tuple[tuple[int, int], ...] = ()
        self.nsamples = int(next(iter(lengths.values())) or 0)
        self.unit = math.lcm(*(a.chunks[0] for a in named.values()))
        self._row_bytes = {name: a.dtype.itemsize * math.prod(a.shape[1:]) for name, a in named.items()}

    def _show(self, mapping: Mapping[str, Any]) -> str:
        return ", ".join(f"{'array' if k == _SINGLE else k}: {v}" for k, v in mapping.items())

    # ------------------------------------------------------------------ configuration
    def set_epoch(self, epoch: int) -> None:
        """Use ``epoch`` for the next iterations (each epoch has its own shuffle)."""
        self.epoch = int(epoch)

    def shard(self, num_shards: int, shard_id: int) -> BatchLoader:
        """A loader over shard ``shard_id`` of ``num_shards`` of this loader's units.

        Shards of one loader (same seed and epoch) are disjoint and together cover
        every sample; sharding a shard splits it further (ranks, then workers).

        Raises
        ------
        ValueError
            ``shard_id`` not in ``range(num_shards)``.
        """
        if num_shards < 1 or not 0 <= shard_id < num_shards:
            raise ValueError(f"shard_id must be in range({num_shards}), got {shard_id}")
        other = copy.copy(self)
        other.shards = (*self.shards, (int(num_shards), int(shard_id)))
        return other

    def plan(self, epoch: int | None = None) -> EpochPlan:
        """The sample order of ``epoch`` (default: the current one) for this shard."""
        return EpochPlan(
            nsamples=self.nsamples,
            unit=self.unit,
            shuffle=self.shuffle,
            seed=self.seed,
            epoch=self.epoch if epoch is None else int(epoch),
            shards=self.shards,
            preload_chunks=self.preload_chunks,
        )

    @property
    def num_samples(self) -> int:
        """Samples this shard yields per epoch (before ``drop_last``)."""
        plan = self.plan()
        return plan.nsamples_in(plan.units())

    def __len__(self) -> int:
        """Batches per epoch of this shard."""
        n = self.num_samples
        return n // self.batch_size if self.drop_last else -(-n // self.batch_size)

    # ------------------------------------------------------------------ iteration
    def __aiter__(self) -> AsyncIterator[Batch]:
        return self._batches(self.plan())

    def __iter__(self) -> Iterator[Batch]:
        plan = self.plan()
        return iterate(lambda: self._batches(plan))

    async def _fetch(self, plan: EpochPlan, units: list[int]) -> dict[str, np.ndarray[Any, Any]]:
        """Read the rows of ``units`` (whole chunks) into one buffer per array, in unit order."""
        n = plan.nsamples_in(units)
        out = {name: np.empty((n, *a.shape[1:]), dtype=a.dtype) for name, a in self.arrays.items()}
        reads = []
        offset = 0
        for unit in units:
            start, stop = plan.rows(unit)
            for name, a in self.arrays.items():
                target = out[name][offset : offset + stop - start]
                reads.append(a.get_basic_selection(slice(start, stop), out=target))
            offset += stop - start
        await asyncio.gather(*reads)
        return out

    def _window_bytes(self, plan: EpochPlan, units: list[int]) -> int:
        return plan.nsamples_in(units) * sum(self._row_bytes.values())

    async def _batches(self, plan: EpochPlan) -> AsyncIterator[Batch]:
        windows = plan.windows()
        pending: collections.deque[tuple[int, asyncio.Task[dict[str, np.ndarray[Any, Any]]]]] = (
            collections.deque()
        )
        held = 0
        ahead = 0  # next window to start fetching

        def top_up() -> None:
            nonlocal held, ahead
            while ahead < len(windows):
                nbytes = self._window_bytes(plan, windows[ahead])
                if pending and held + nbytes > self.max_prefetch_bytes:
                    return
                pending.append((nbytes, asyncio.ensure_future(self._fetch(plan, windows[ahead]))))
                held += nbytes
                ahead += 1

        carry: dict[str, np.ndarray[Any, Any]] | None = None
        try:
            for index in range(len(windows)):
                top_up()
                nbytes, task = pending.popleft()
                data = await task
                order = plan.window_order(index, next(iter(data.values())).shape[0])
                start = 0
                if carry is not None:  # finish the batch the previous window began
                    need = self.batch_size - len(next(iter(carry.values())))
                    take = order[:need]
                    carry = {k: np.concatenate([carry[k], v[take]]) for k, v in data.items()}
                    start = len(take)
                    if len(next(iter(carry.values()))) == self.batch_size:
                        yield self._wrap(carry)
                        carry = None
                while carry is None and start + self.batch_size <= len(order):
                    take = order[start : start + self.batch_size]
                    yield self._wrap({k: v[take] for k, v in data.items()})
                    start += self.batch_size
                if carry is None and start < len(order):
                    carry = {k: v[order[start:]] for k, v in data.items()}
                del data
                held -= nbytes
            if carry is not None and not self.drop_last:
                yield self._wrap(carry)
        finally:
            for _, task in pending:
                task.cancel()
            for _, task in pending:
                with contextlib.suppress(BaseException):
                    await task

    def _wrap(self, batch: dict[str, np.ndarray[Any, Any]]) -> Batch:
        return batch[_SINGLE] if self._single else batch

    def __repr__(self) -> str:
        shards = "".join(f", shard {i}/{n}" for n, i in self.shards)
        return (
            f"BatchLoader({self._show({k: a.shape for k, a in self.arrays.items()})}, "
            f"batch_size={self.batch_size}, unit={self.unit} samples, epoch={self.epoch}{shards})"
        )
