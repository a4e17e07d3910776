"""Peer venvs for the xarray / dask benchmarks, registered with `benchmarks.peers`.

``xarray-zarr3``  xarray (its ``zarr`` engine) + zarr-python 3.1 + s3fs + obstore + dask.distributed
``dask-zarr218``  zarr-python 2.18 + s3fs + dask.distributed (``da.from_zarr`` on zarr 2)
``xarray-zarr34`` xarray (its ``zarr`` engine) + zarr-python 3.4 + obstore + s3fs + dask.distributed,
                  on Python 3.12 (zarr-python >= 3.2 needs it)

Pinned like the other peers so runs compare; xarray, dask and s3fs at the versions azarr's own
venv uses.
"""

from __future__ import annotations

from benchmarks.peers import PEERS, Peer

_DASK = ("dask[array]==2026.8.0", "distributed==2026.8.0")

PEERS.setdefault(
    "xarray-zarr3",
    Peer(
        name="xarray-zarr3",
        label="xarray + zarr 3.1",
        requirements=("zarr==3.1.6", "xarray==2026.9.0", "s3fs==2026.9.0", "obstore==0.12.1", *_DASK),
        expect_version="3.1.",
        modules=("zarr", "xarray", "numpy", "s3fs", "obstore", "dask", "distributed"),
    ),
)
PEERS.setdefault(
    "dask-zarr218",
    Peer(
        name="dask-zarr218",
        label="zarr 2.18 + dask",
        requirements=("zarr==2.18.7", "numcodecs==0.15.2", "s3fs==2026.9.0", *_DASK),
        expect_version="2.18.",
        modules=("zarr", "numcodecs", "numpy", "s3fs", "dask", "distributed"),
    ),
)
PEERS.setdefault(
    "xarray-zarr34",
    Peer(
        name="xarray-zarr34",
        label="xarray + zarr 3.4",
        requirements=("zarr==3.4.2", "xarray==2026.9.0", "s3fs==2026.9.0", "obstore==0.12.1", *_DASK),
        expect_version="3.4.",
        modules=("zarr", "xarray", "numpy", "s3fs", "obstore", "dask", "distributed"),
        python="3.12",
    ),
)
