"""Print zarr-python 2.18's ``hexdigest`` of every array of a corpus (run with the reference python).

Usage: ``python digests.py CORPUS_DIR`` prints ``{"<id>": {"sha1": ..., "md5": ...}, ...}`` as JSON,
opening each manifest entry's array with ``zarr.open_array(DirectoryStore(store), path=...)``.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import zarr


def main(root: Path) -> None:
    manifest = json.loads((root / "manifest.json").read_text())
    out = {}
    for entry in manifest["arrays"]:
        store = zarr.DirectoryStore(str(root / entry["store"]))
        arr = zarr.open_array(store, mode="r", path=entry["path"])
        out[entry["id"]] = {name: arr.hexdigest(name) for name in ("sha1", "md5")}
    print(json.dumps(out))


if __name__ == "__main__":
    main(Path(sys.argv[1]))
