"""Run zarr-python 2.18's tutorial (``docs/tutorial.rst`` of its sdist) and record what every example prints.

``python run_tutorial.py TUTORIAL {zarr,azarr} OUT.json`` (in the venv of ``refenv.SHIM``, in an empty
working directory: the tutorial writes ``data/...``). With ``azarr`` the tutorial's imports are
swapped (``import zarr`` -> ``import azarr.sync as zarr``, ``import zarr.storage`` ->
``import azarr.sync.storage``) and nothing else; with ``zarr`` it runs as written.

Each example is run with `doctest` (its directives apply: ``+SKIP``), and what it printed (or the
exception it raised, as ``doctest`` shows it) is recorded with its line in the ``.rst``, whatever
the expected output written there says. Examples that need what this machine lacks are not run,
the same way for both libraries: the ``.. doctest-requires::`` modules that are not installed
(bsddb3), LMDB (not installed), and the S3 bucket ``zarr-demo`` (no network in tests); so are the
examples that use a name only such an example defines.
"""

from __future__ import annotations

import ast
import doctest
import importlib.util
import json
import re
import sys
import traceback
from pathlib import Path
from typing import Any

#: Source patterns of examples that need something this machine does not have, and why.
ENVIRONMENT = {
    r"\bbsddb3\b": "needs bsddb3 (not installed)",
    r"\bLMDBStore\b": "needs lmdb (not installed)",
    r"\bs3fs\b|\bS3Map\b|\bs3_path\b|\bZipFileSystem\b": "reads the S3 bucket zarr-demo (no network in tests)",
}
SWAPS = (
    (r"^import zarr\.storage$", "import azarr.sync.storage"),
    (r"^import zarr$", "import azarr.sync as zarr"),
)


def _environment_skip(source: str) -> str | None:
    for pattern, reason in ENVIRONMENT.items():
        if re.search(pattern, source) and not _available(pattern):
            return reason
    return None


def _available(pattern: str) -> bool:
    if "LMDB" in pattern:
        return importlib.util.find_spec("lmdb") is not None
    if "bsddb3" in pattern:
        return importlib.util.find_spec("bsddb3") is not None
    return False  # no network


def _names(source: str) -> tuple[set[str], set[str]]:
    """Names an example reads and names it binds (empty sets if it does not parse alone)."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return set(), set()
    read, bound = set(), set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name):
            (bound if isinstance(node.ctx, ast.Store) else read).add(node.id)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            bound.update((a.asname or a.name).split(".")[0] for a in node.names)
    return read, bound


class _Recorder(doctest.DocTestRunner):
    """Keeps what each example printed instead of comparing it with the expected text."""

    def __init__(self) -> None:
        super().__init__(verbose=False, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
        self.got: list[str] = []

    def report_start(self, out: Any, test: Any, example: Any) -> None:
        pass

    def report_success(self, out: Any, test: Any, example: Any, got: str) -> None:
        self.got.append(got)

    def report_failure(self, out: Any, test: Any, example: Any, got: str) -> None:
        self.got.append(got)

    def report_unexpected_exception(self, out: Any, test: Any, example: Any, exc_info: Any) -> None:
        kind, value, _ = exc_info
        self.got.append("".join(traceback.format_exception_only(kind, value)).strip() + "\n")


def run(tutorial: Path, library: str) -> list[dict[str, Any]]:
    parser = doctest.DocTestParser()
    examples = parser.get_examples(tutorial.read_text(), name="tutorial.rst")
    globs: dict[str, Any] = {"__name__": "tutorial"}
    tainted: set[str] = set()
    records = []
    for example in examples:
        line = example.lineno + 1
        source = example.source
        read, bound = _names(source)
        outside = (read - bound) & tainted  # a name the example binds itself is its own
        skip = _environment_skip(source)
        if skip is None and outside:
            skip = f"uses {sorted(outside)}, defined by an example not run"
        if skip is not None:
            tainted |= bound
            records.append({"line": line, "source": source, "skipped": skip})
            continue
        tainted -= bound
        if library == "azarr":
            for pattern, swap in SWAPS:
                source = re.sub(pattern, swap, source, flags=re.MULTILINE)
        example.source = source
        runner = _Recorder()
        test = doctest.DocTest([example], globs, "tutorial.rst", str(tutorial), example.lineno, None)
        runner.run(test, clear_globs=False)
        globs = test.globs  # DocTest works on a copy: carry the names on to the next example
        records.append({"line": line, "source": example.source, "got": runner.got[0] if runner.got else None})
    return records


if __name__ == "__main__":
    tutorial_path, library, out = Path(sys.argv[1]), sys.argv[2], Path(sys.argv[3])
    out.write_text(json.dumps(run(tutorial_path, library), indent=1))
