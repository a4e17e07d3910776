"""Run in the archival venv (tests/interop/archivalenv.py): write real archival files and
reference them with kerchunk and VirtualiZarr, for each target location.

    python make_archival.py OUT NAME=PREFIX [NAME=PREFIX ...]

writes into OUT:

* ``data/nc4.nc`` (netCDF4, HDF5 underneath: chunked zlib+shuffle, chunked uncompressed,
  contiguous, an unlimited dimension, a scalar, packed int16), ``data/nc3.nc``
  (NETCDF3_CLASSIC with a record dimension: interleaved records);
* ``expected/<file>.npz``: every variable as netCDF4 reads it raw (no masking or scaling;
  for nc4 also checked equal to h5py's read);
* ``refs/<target>/<tool>-<file>.json`` and ``.parq/`` for tools ``kerchunk`` and
  ``virtualizarr``: reference sets whose target URLs start with that target's PREFIX
  (where the test serves ``data/``: a local path, ``s3://bucket/dir``, ``http://host/dir``);
* ``grib/`` a GRIB2 file written with ecCodes and kerchunk's scan of it (its chunks need
  kerchunk's ``grib`` codec, which only ecCodes decodes);
* ``versions.json``: the packages used.
"""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import numpy as np


def write_nc4(path: Path) -> None:
    import netCDF4

    rng = np.random.default_rng(4)
    with netCDF4.Dataset(path, "w", format="NETCDF4") as ds:
        ds.title = "azarr archival interop"
        ds.createDimension("time", None)
        ds.createDimension("lat", 20)
        ds.createDimension("lon", 30)
        ds.createDimension("level", 4)
        time = ds.createVariable("time", "i8", ("time",))
        time.units = "days since 2000-01-01"
        lat = ds.createVariable("lat", "f8", ("lat",), contiguous=True)
        lat[:] = np.linspace(-90, 90, 20)
        lon = ds.createVariable("lon", "f4", ("lon",), contiguous=True)
        lon[:] = np.linspace(0, 360, 30, endpoint=False)
        temp = ds.createVariable(
            "temp",
            "f4",
            ("time", "lat", "lon"),
            zlib=True,
            shuffle=True,
            chunksizes=(2, 10, 15),
            fill_value=-999.0,
        )
        temp.units = "K"
        precip = ds.createVariable("precip", "f8", ("time", "lat", "lon"), chunksizes=(3, 20, 30))
        counts = ds.createVariable("counts", "i2", ("level", "lat"), zlib=True, chunksizes=(1, 20))
        counts.scale_factor = 0.5
        counts.add_offset = 10.0
        counts.set_auto_maskandscale(False)
        flag = ds.createVariable("flag", "i4", ())
        for v in (temp, precip, counts, flag):
            v.set_auto_maskandscale(False)
        time[:] = np.arange(6)
        temp[:] = (rng.standard_normal((6, 20, 30)) * 10 + 280).astype("f4")
        precip[:] = rng.gamma(2.0, size=(6, 20, 30))
        counts[:] = rng.integers(-300, 300, size=(4, 20)).astype("i2")
        flag.assignValue(7)


def write_nc3(path: Path) -> None:
    import netCDF4

    rng = np.random.default_rng(3)
    with netCDF4.Dataset(path, "w", format="NETCDF3_CLASSIC") as ds:
        ds.createDimension("time", None)
        ds.createDimension("x", 12)
        ds.createDimension("y", 7)
        t = ds.createVariable("time", "f8", ("time",))
        a = ds.createVariable("a", "f4", ("time", "x"))
        b = ds.createVariable("b", "i2", ("time", "y"))
        static = ds.createVariable("static", "i4", ("x", "y"))
        for v in (t, a, b, static):
            v.set_auto_maskandscale(False)
        t[:] = np.arange(5) * 0.5
        a[:] = rng.standard_normal((5, 12)).astype("f4")
        b[:] = rng.integers(-1000, 1000, size=(5, 7)).astype("i2")
        static[:] = np.arange(84, dtype="i4").reshape(12, 7)


def expected(path: Path, out: Path, *, check_h5py: bool) -> None:
    import netCDF4

    values = {}
    with netCDF4.Dataset(path) as ds:
        ds.set_auto_maskandscale(False)
        for name, var in ds.variables.items():
            values[name] = np.asarray(var[...])
    if check_h5py:
        import h5py

        with h5py.File(path, "r") as f:
            for name, value in values.items():
                np.testing.assert_array_equal(f[name][()], value)
    np.savez(out, **values)


def kerchunk_refs(path: Path, url: str) -> dict:
    if path.name == "nc3.nc":
        from kerchunk.netCDF3 import NetCDF3ToZarr

        return NetCDF3ToZarr(str(path), inline_threshold=0).translate()
    from kerchunk.hdf import SingleHdf5ToZarr

    with path.open("rb") as fh:
        return SingleHdf5ToZarr(fh, url, inline_threshold=0).translate()


def virtualizarr_refs(path: Path) -> dict:
    from obspec_utils.registry import ObjectStoreRegistry
    from obstore.store import LocalStore
    from virtualizarr import open_virtual_dataset
    from virtualizarr.parsers import HDFParser, NetCDF3Parser

    parser = NetCDF3Parser() if path.name == "nc3.nc" else HDFParser()
    registry = ObjectStoreRegistry({"file://": LocalStore()})
    vds = open_virtual_dataset(f"file://{path}", registry=registry, parser=parser, loadable_variables=[])
    return vds.vz.to_kerchunk(format="dict", zarr_format=2)


def retarget(refs: dict, local: Path, prefix: str) -> dict:
    """``refs`` with target URLs naming ``local``'s files under ``prefix`` instead."""
    text = json.dumps(refs)
    for old in (f"file://{local}/", f"{local}/"):
        text = text.replace(json.dumps(old)[1:-1], prefix.rstrip("/") + "/")
    return json.loads(text)


def write_parquet(refs: dict, out: Path) -> list[str]:
    """kerchunk's Parquet writer over ``refs``; returns the 0-d variables it had to leave out
    (kerchunk 0.2.10's ``refs_to_dataframe`` fails on them: KeyError on their .zarray)."""
    from kerchunk.df import refs_to_dataframe

    scalars = sorted(
        k[: -len("/.zarray")]
        for k, v in refs["refs"].items()
        if k.endswith("/.zarray") and not json.loads(v)["shape"]
    )
    kept = {k: v for k, v in refs["refs"].items() if k.split("/", 1)[0] not in scalars}
    refs_to_dataframe(
        {**refs, "refs": kept}, str(out), record_size=5
    )  # small records: several files per variable
    return scalars


def write_grib(out: Path) -> None:
    """Two GRIB2 messages from ecCodes' sample, and kerchunk's scan of the file."""
    import eccodes
    from kerchunk.grib2 import scan_grib

    out.mkdir()
    path = out / "t.grib2"
    with path.open("wb") as fh:
        for step, offset in ((0, 250.0), (6, 260.0)):
            gid = eccodes.codes_grib_new_from_samples("GRIB2")
            ni, nj = eccodes.codes_get(gid, "Ni"), eccodes.codes_get(gid, "Nj")
            eccodes.codes_set(gid, "step", step)
            eccodes.codes_set_values(gid, offset + np.arange(ni * nj, dtype="f8") % 17)
            eccodes.codes_write(gid, fh)
            eccodes.codes_release(gid)
    (out / "refs.json").write_text(json.dumps(scan_grib(str(path))))
    with path.open("rb") as fh:
        gid = eccodes.codes_grib_new_from_file(fh)
        nj, ni = eccodes.codes_get(gid, "Nj"), eccodes.codes_get(gid, "Ni")
        np.savez(
            out / "expected.npz",
            latitude=eccodes.codes_get_array(gid, "distinctLatitudes"),
            longitude=eccodes.codes_get_array(gid, "distinctLongitudes"),
            t=eccodes.codes_get_values(gid).reshape(nj, ni),
        )
        eccodes.codes_release(gid)


def main() -> None:
    out = Path(sys.argv[1]).resolve()
    targets = dict(arg.split("=", 1) for arg in sys.argv[2:])
    if out.exists():
        shutil.rmtree(out)
    data = out / "data"
    (out / "expected").mkdir(parents=True)
    data.mkdir()
    write_nc4(data / "nc4.nc")
    write_nc3(data / "nc3.nc")
    for name in ("nc4", "nc3"):
        expected(data / f"{name}.nc", out / "expected" / f"{name}.npz", check_h5py=name == "nc4")
    local_sets = {}
    for name in ("nc4", "nc3"):
        path = data / f"{name}.nc"
        local_sets[f"kerchunk-{name}"] = kerchunk_refs(path, str(path))
        local_sets[f"virtualizarr-{name}"] = virtualizarr_refs(path)
    left_out: dict[str, list[str]] = {}
    for target, prefix in targets.items():
        folder = out / "refs" / target
        folder.mkdir(parents=True)
        for set_name, refs in local_sets.items():
            moved = retarget(refs, data, prefix)
            (folder / f"{set_name}.json").write_text(json.dumps(moved))
            left_out[set_name] = write_parquet(moved, folder / f"{set_name}.parq")
    try:
        write_grib(out / "grib")
        grib = "written"
    except Exception as exc:  # reported by the test, not hidden
        grib = f"failed: {type(exc).__name__}: {exc}"
    import importlib.metadata as md

    versions = {p: md.version(p) for p in ("kerchunk", "virtualizarr", "zarr", "netCDF4", "h5py", "eccodes")}
    (out / "versions.json").write_text(json.dumps({**versions, "grib": grib, "parquet_left_out": left_out}))


if __name__ == "__main__":
    main()
