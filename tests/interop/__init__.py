"""Interop tests against zarr-python 2.18 (reference venv built by ``refenv.py``)."""
