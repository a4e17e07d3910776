"""``TempStore``: a directory store in a new temporary directory, removed when closed or collected."""

from __future__ import annotations

import shutil
import tempfile
import weakref
from typing import Any

from azarr.storage._local import LocalStore


class TempStore(LocalStore):
    """A `LocalStore` in a fresh temporary directory (zarr-python 2 ``TempStore``).

    The directory is removed by `close`, or when the store is garbage
    collected, or at interpreter exit, whichever comes first (zarr-python 2
    removes it at exit only).

    Parameters
    ----------
    suffix, prefix : str
        Passed to `tempfile.mkdtemp` (prefix default ``"azarr-"``).
    dir : str, optional
        Parent directory (default: the system's temporary directory).
    """

    def __init__(self, suffix: str = "", prefix: str = "azarr-", dir: str | None = None) -> None:
        path = tempfile.mkdtemp(suffix=suffix, prefix=prefix, dir=dir)
        super().__init__(path)
        self._cleanup = weakref.finalize(self, shutil.rmtree, path, True)

    async def close(self) -> None:
        """Remove the directory and everything in it."""
        await super().close()
        self._cleanup()

    def __reduce__(self) -> Any:
        # A copy in another process would point at a directory this one removes.
        raise TypeError("a TempStore cannot be pickled: its directory belongs to this process")
