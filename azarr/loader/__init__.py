"""Training batches from Zarr arrays in a bucket: chunk-aligned shuffling, bounded prefetch.

    loader = azarr.loader.BatchLoader({"x": images, "y": labels}, batch_size=256, seed=0)
    for epoch in range(10):
        loader.set_epoch(epoch)
        async for batch in loader:          # or a plain ``for`` (on azarr.sync's I/O loop)
            train_step(batch["x"], batch["y"])

Machine-learning loaders that read a sample at a time read each chunk once per
*sample*. `BatchLoader` reads whole chunks once per epoch and shuffles
in two levels (unit order, then samples inside a window of ``preload_chunks``
units); `BatchLoader.shard` splits an epoch between ranks and workers;
`TorchIterableDataset` (``azarr[torch]``) does it for DataLoader
workers and is fork- and spawn-safe. Batches are NumPy arrays otherwise (JAX
and TensorFlow take those as they are).
"""

from __future__ import annotations

from typing import Any

from azarr.loader._loader import DEFAULT_PREFETCH_BYTES, Batch, BatchLoader
from azarr.loader._plan import EpochPlan

__all__ = ["DEFAULT_PREFETCH_BYTES", "Batch", "BatchLoader", "EpochPlan", "TorchIterableDataset"]


def __getattr__(name: str) -> Any:
    if name == "TorchIterableDataset":  # imports torch: only when asked for
        from azarr.loader._torch import TorchIterableDataset

        return TorchIterableDataset
    raise AttributeError(f"module 'azarr.loader' has no attribute {name!r}")
