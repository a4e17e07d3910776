"""Scripts run by the zarr-python 2.18 reference interpreter, and the comparison helpers both sides share."""
