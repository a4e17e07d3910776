"""Train a small classifier on batches streamed from Zarr arrays with azarr.loader.

With no arguments it builds a synthetic dataset in a temporary directory (no bucket
needed) and trains a NumPy logistic regression on it::

    python examples/train_loader.py

Point it at arrays ``x`` (samples x features, float) and ``y`` (0/1 labels) in a
bucket, and/or train with torch (``pip install -e ".[torch]"``; two DataLoader
workers, each reading its own share of the chunks)::

    python examples/train_loader.py s3://bucket/train.zarr --anon --torch
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
import time
from typing import Any

import numpy as np

import azarr
from azarr.loader import BatchLoader


async def make_synthetic(url: str, n: int = 200_000, features: int = 32) -> None:
    """``x`` ~ N(0, 1), ``y`` = 1 where a fixed linear score is positive."""
    rng = np.random.default_rng(0)
    x = rng.standard_normal((n, features), dtype=np.float32)
    y = (x @ rng.standard_normal(features).astype(np.float32) > 0).astype(np.int8)
    root = await azarr.group(store=url, overwrite=True)
    await root.array("x", x, chunks=(4096, features))
    await root.array("y", y, chunks=(16384,))


async def open_arrays(url: str, storage_options: dict[str, Any] | None) -> dict[str, azarr.AsyncArray]:
    root = await azarr.open_group(url, mode="r", storage_options=storage_options)
    x, y = await root.get("x"), await root.get("y")
    assert isinstance(x, azarr.AsyncArray) and isinstance(y, azarr.AsyncArray)
    return {"x": x, "y": y}


def train_numpy(loader: BatchLoader, epochs: int) -> None:
    w = np.zeros(loader.arrays["x"].shape[1], dtype=np.float64)
    for epoch in range(epochs):
        loader.set_epoch(epoch)  # a new shuffle each epoch, reproducible from the seed
        started, seen, correct = time.perf_counter(), 0, 0
        for batch in loader:  # a plain for: the loader runs on a private event loop
            x, y = batch["x"].astype(np.float64), batch["y"]
            p = 1 / (1 + np.exp(-(x @ w)))
            w -= 0.5 * x.T @ (p - y) / len(y)
            seen, correct = seen + len(y), correct + int(((p > 0.5) == y).sum())
        rate = seen / (time.perf_counter() - started)
        print(f"epoch {epoch}: accuracy {correct / seen:.3f}, {rate:,.0f} samples/s")


def train_torch(loader: BatchLoader, epochs: int) -> None:
    import torch

    from azarr.loader import TorchIterableDataset

    dataset = TorchIterableDataset(loader)
    model = torch.nn.Linear(loader.arrays["x"].shape[1], 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.5)
    for epoch in range(epochs):
        dataset.set_epoch(epoch)
        started, seen, correct = time.perf_counter(), 0, 0
        for batch in torch.utils.data.DataLoader(dataset, batch_size=None, num_workers=2):
            logits = model(batch["x"]).squeeze(1)
            target = batch["y"].float()
            loss = torch.nn.functional.binary_cross_entropy_with_logits(logits, target)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            seen, correct = seen + len(target), correct + int(((logits > 0) == (target > 0.5)).sum())
        rate = seen / (time.perf_counter() - started)
        print(f"epoch {epoch}: accuracy {correct / seen:.3f}, {rate:,.0f} samples/s")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("url", nargs="?", help="group holding arrays x and y (default: a synthetic one)")
    parser.add_argument("--anon", action="store_true", help="anonymous access to the bucket")
    parser.add_argument("--torch", action="store_true", help="train with torch and 2 DataLoader workers")
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--batch-size", type=int, default=256)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        url = args.url
        if url is None:
            url = f"{tmp}/synthetic.zarr"
            asyncio.run(make_synthetic(url))
        arrays = asyncio.run(open_arrays(url, {"anon": True} if args.anon else None))
        loader = BatchLoader(arrays, batch_size=args.batch_size, seed=0, preload_chunks=4, drop_last=True)
        print(loader)
        (train_torch if args.torch else train_numpy)(loader, args.epochs)


if __name__ == "__main__":
    main()
