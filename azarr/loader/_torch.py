"""A ``torch.utils.data.IterableDataset`` over a `BatchLoader` (the ``azarr[torch]`` extra)."""

from __future__ import annotations

import pickle
from collections.abc import Iterator
from typing import Any

import numpy as np
import torch
from torch.utils.data import IterableDataset, get_worker_info

from azarr.loader._loader import BatchLoader


class TorchIterableDataset(IterableDataset):  # type: ignore[type-arg]
    """Batches of a `BatchLoader` as tensors, split between DataLoader workers.

    Use with ``batch_size=None`` (the loader batches):

        dataset = TorchIterableDataset(BatchLoader({"x": x, "y": y}, batch_size=256))
        for epoch in range(epochs):
            dataset.set_epoch(epoch)
            for batch in DataLoader(dataset, batch_size=None, num_workers=2):
                ...

    Each worker takes its share of the epoch's chunk-aligned units
    (``loader.shard(num_workers, worker_id)`` from ``get_worker_info()``), so
    workers never fetch the same chunk and together yield every sample once.
    Under ``fork`` and ``spawn`` alike a worker rebuilds the loader's arrays
    from their pickled configuration, so no network session, lock or event loop
    of the parent is used in a child.

    Parameters
    ----------
    loader : BatchLoader
        Shard it first for data-parallel ranks (``loader.shard(world_size, rank)``).
    as_tensors : bool
        Convert batches with ``torch.from_numpy`` (default); NumPy arrays otherwise.
    """

    def __init__(self, loader: BatchLoader, *, as_tensors: bool = True) -> None:
        super().__init__()
        self.loader = loader
        self.as_tensors = as_tensors

    def set_epoch(self, epoch: int) -> None:
        """Shuffle for ``epoch`` next time workers start.

        A DataLoader starts its workers anew each epoch and they take the epoch from
        here; with ``persistent_workers=True`` they keep the one they started with.
        """
        self.loader.set_epoch(epoch)

    def __iter__(self) -> Iterator[Any]:
        loader = self.loader
        info = get_worker_info()
        if info is not None:
            # Fresh arrays and stores from configuration: nothing live crosses a fork.
            loader = pickle.loads(pickle.dumps(loader)).shard(info.num_workers, info.id)
        for batch in loader:
            yield self._convert(batch)

    def _convert(self, batch: Any) -> Any:
        if not self.as_tensors:
            return batch
        if isinstance(batch, dict):
            return {k: _tensor(v) for k, v in batch.items()}
        return _tensor(batch)


def _tensor(array: np.ndarray[Any, Any]) -> torch.Tensor:
    return torch.from_numpy(np.ascontiguousarray(array))
