"""Every code block of the documentation site (``docs/**/*.md``) runs, so the docs cannot rot.

A small collector, not a plugin: per page, the ``python`` blocks run in order in one
namespace (a tutorial builds on its earlier blocks) with top-level ``await`` allowed,
as in ``python -m asyncio`` or Jupyter, inside a fresh working directory; a block that
calls ``asyncio.run`` (a complete script) runs in a thread without an event loop.
``bash`` blocks run with ``bash -euo pipefail`` in the same directory, with the venv's
``azarr`` on ``PATH``. Other languages (``text``, ``json``, ``yaml``) are output or
configuration and are not run.

A block may be marked on the line before its fence:

``<!-- docs-test: requires azarr.sync -->``
    the synchronous twin of an async example; runs (in its own namespace, in a
    thread) once the module exists, and is skipped until then;
``<!-- docs-test: skip REASON -->``
    never run (installing packages, real cloud accounts); the reason is required
    and the number of such blocks is capped below.

Pages about S3, GCS, Azure and HTTP run against SeaweedFS, fake-gcs-server, Azurite and
the test HTTP server, whose endpoints and credentials reach the examples through the
environment variables the examples read (``AWS_ENDPOINT_URL``, ``AWS_ACCESS_KEY_ID``, ...).
"""

from __future__ import annotations

import ast
import asyncio
import importlib.util
import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
PAGES = sorted(p.relative_to(ROOT).as_posix() for p in DOCS.rglob("*.md"))
RUN_LANGS = {"python", "py", "bash", "sh"}
FENCE = re.compile(r"^(?P<indent>[ \t]*)(?P<fence>`{3,}|~{3,})\s*(?P<lang>[\w+-]*)")
MARK = re.compile(r"<!--\s*docs-test:\s*(?P<what>.*?)\s*-->")
#: Blocks marked "skip" across all pages, at most (each needs a reason in the page).
MAX_SKIPPED = 8


@dataclass(frozen=True)
class Block:
    page: str
    line: int
    lang: str
    code: str
    mark: str | None

    @property
    def where(self) -> str:
        return f"{self.page}:{self.line}"


def collect(page: str) -> list[Block]:
    """The fenced code blocks of ``page`` with their marks (indented fences in tabs included)."""
    lines = (ROOT / page).read_text().splitlines()
    blocks: list[Block] = []
    i = 0
    previous = ""
    while i < len(lines):
        match = FENCE.match(lines[i])
        if not match:
            if lines[i].strip():
                previous = lines[i].strip()
            i += 1
            continue
        indent, fence, lang = match["indent"], match["fence"], match["lang"].lower()
        body = []
        j = i + 1
        while j < len(lines) and not lines[j].strip().startswith(fence):
            body.append(lines[j][len(indent) :] if lines[j].startswith(indent) else lines[j].lstrip())
            j += 1
        mark = MARK.search(previous)
        blocks.append(Block(page, i + 1, lang, "\n".join(body) + "\n", mark["what"] if mark else None))
        previous = ""
        i = j + 1
    return blocks


def _server_env(page: str, request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    """Point the examples of the storage guide at the test servers (as real users' env would)."""
    if page != "docs/guides/stores.md":
        return
    s3 = request.getfixturevalue("seaweedfs")
    bucket = s3.create_bucket()
    monkeypatch.setenv("AWS_ENDPOINT_URL", s3.endpoint_url)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", s3.key)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", s3.secret)
    monkeypatch.setenv("BUCKET", bucket)
    gcs = request.getfixturevalue("fake_gcs")
    monkeypatch.setenv("STORAGE_EMULATOR_HOST", gcs.endpoint_url)
    monkeypatch.setenv("GCS_BUCKET", gcs.create_bucket())
    http = request.getfixturevalue("http_server")
    monkeypatch.setenv("HTTP_ROOT", str(http.root))
    monkeypatch.setenv("HTTP_URL", http.url)
    azurite = request.getfixturevalue("azurite")
    monkeypatch.setenv("AZURE_STORAGE_CONNECTION_STRING", azurite.connection_string)
    monkeypatch.setenv("AZURE_CONTAINER", azurite.create_container())


def _run_bash(block: Block, cwd: Path) -> None:
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    proc = subprocess.run(
        ["bash", "-euo", "pipefail", "-c", block.code],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, f"{block.where} exited {proc.returncode}\n{proc.stdout}\n{proc.stderr}"


async def _run_python(block: Block, namespace: dict[str, Any], *, in_thread: bool) -> None:
    code = compile(block.code, block.where, "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)
    if in_thread or "asyncio.run(" in block.code:
        await asyncio.to_thread(exec, code, namespace)
        return
    result = eval(code, namespace)
    if asyncio.iscoroutine(result):
        await result


@pytest.mark.parametrize("page", [p for p in PAGES if any(b.lang in RUN_LANGS for b in collect(p))])
async def test_page_code_blocks(
    page: str, tmp_path: Path, request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch
) -> None:
    blocks = [b for b in collect(page) if b.lang in RUN_LANGS]
    _server_env(page, request, monkeypatch)
    monkeypatch.chdir(tmp_path)
    has_sync = importlib.util.find_spec("azarr.sync") is not None
    async_ns: dict[str, Any] = {"__name__": "__docs__"}
    sync_ns: dict[str, Any] = {"__name__": "__docs__"}
    for block in blocks:
        if block.mark and block.mark.startswith("skip"):
            continue
        sync_twin = block.mark == "requires azarr.sync"
        if sync_twin and not has_sync:
            continue
        if block.lang in ("bash", "sh"):
            _run_bash(block, tmp_path)
        else:
            try:
                await _run_python(block, sync_ns if sync_twin else async_ns, in_thread=sync_twin)
            except Exception as exc:
                raise AssertionError(f"{block.where}: {type(exc).__name__}: {exc}") from exc
    await _close_stores(async_ns)


async def _close_stores(namespace: dict[str, Any]) -> None:
    """Close the stores a page's examples left open (their aiohttp sessions), as a script's exit would."""
    from azarr.storage import Store

    stores = {
        id(s): s for v in namespace.values() for s in (v, getattr(v, "store", None)) if isinstance(s, Store)
    }
    for store in stores.values():
        await store.close()


def test_marks_are_known_and_skips_are_few() -> None:
    skipped = []
    for page in PAGES:
        for block in collect(page):
            if block.mark is None:
                continue
            assert block.mark == "requires azarr.sync" or re.fullmatch(r"skip \S.*", block.mark), (
                f"{block.where}: unknown mark {block.mark!r}"
            )
            if block.mark.startswith("skip"):
                skipped.append(block.where)
    assert len(skipped) <= MAX_SKIPPED, f"too many skipped blocks: {skipped}"


TUTORIAL_SECTIONS = [
    "Creating an array",
    "Reading and writing data",
    "Persistent arrays",
    "Resizing and appending",
    "Compressors",
    "Filters",
    "Groups",
    "Array and group diagnostics",
    "User attributes",
    "Advanced indexing",
    "Storage alternatives",
    "Consolidating metadata",
    "Copying and migrating data",
    "Object arrays",
    "Datetimes and timedeltas",
    "Chunk optimizations",
    "Parallel computing and synchronization",
    "Pickle support",
]


def test_tutorial_covers_the_zarr_tutorial_sections() -> None:
    headings = [
        line.lstrip("#").strip()
        for line in (DOCS / "tutorial.md").read_text().splitlines()
        if line.startswith("## ")
    ]
    missing = [s for s in TUTORIAL_SECTIONS if s not in headings]
    assert not missing, f"tutorial sections missing: {missing}"


def test_every_async_tutorial_section_has_a_sync_twin() -> None:
    """Each tutorial section shows the sync form beside the async one (content tabs)."""
    text = (DOCS / "tutorial.md").read_text()
    for section in re.split(r"^## ", text, flags=re.M)[1:]:
        title = section.splitlines()[0]
        if '=== "async"' in section:
            assert '=== "sync"' in section, f"section {title!r} has async tabs without sync ones"


def test_readme_links_to_the_docs() -> None:
    readme = (ROOT / "README.md").read_text()
    for page in ("docs/quickstart.md", "docs/tutorial.md", "docs/cli.md"):
        assert page in readme, f"README does not link {page}"


def test_every_public_name_is_in_the_api_reference() -> None:
    import azarr

    reference = "".join(p.read_text() for p in (DOCS / "api").glob("*.md"))
    documented = set(re.findall(r"^::: azarr\.(?:[\w.]+\.)?(\w+)", reference, flags=re.M))
    modules = {"config", "errors", "scheduler", "storage"}
    missing = sorted(
        n for n in azarr.__all__ if n not in documented and n not in modules and not n.startswith("_")
    )
    assert not missing, f"public names without an API reference entry: {missing}"


def test_every_public_name_has_a_docstring() -> None:
    """What the API reference renders: each public function, class, method and property has a docstring
    (inherited ones count, as mkdocstrings shows them)."""
    import inspect

    import azarr

    def undocumented(owner: str, obj: Any) -> list[str]:
        missing = [] if inspect.getdoc(obj) else [owner]
        if inspect.isclass(obj):
            for name, value in vars(obj).items():
                if name.startswith("_"):
                    continue
                if (callable(value) or isinstance(value, property)) and not any(
                    inspect.getdoc(base.__dict__[name]) for base in obj.__mro__ if name in base.__dict__
                ):
                    missing.append(f"{owner}.{name}")
        return missing

    missing = []
    for name in azarr.__all__:
        obj = getattr(azarr, name)
        if not name.startswith("_") and not inspect.ismodule(obj):
            missing += undocumented(f"azarr.{name}", obj)
    for module in (azarr.config, azarr.errors, azarr.scheduler, azarr.storage):
        for name in getattr(module, "__all__", dir(module)):
            obj = getattr(module, name)
            defined_in_azarr = getattr(obj, "__module__", "").startswith("azarr")
            if (
                not name.startswith("_")
                and defined_in_azarr
                and (inspect.isclass(obj) or inspect.isfunction(obj))
            ):
                missing += undocumented(f"{module.__name__}.{name}", obj)
    assert not missing, f"public names without a docstring: {sorted(set(missing))}"


def _source_lines_matching(pattern: str) -> list[str]:
    """``path:line`` of every line of azarr/ that ``pattern`` matches."""
    regex = re.compile(pattern)
    return [
        f"{path.relative_to(ROOT)}:{number}"
        for path in sorted((ROOT / "azarr").rglob("*.py"))
        for number, line in enumerate(path.read_text().splitlines(), 1)
        if regex.search(line)
    ]


def test_docstrings_hold_no_sphinx_roles() -> None:
    """mkdocstrings renders Markdown: a Sphinx role (``:func:`x` ``) would show literally in the API pages."""
    offenders = _source_lines_matching(r":(?:py:)?(?:func|class|meth|attr|mod|data|obj|exc):`")
    assert not offenders, f"Sphinx roles in docstrings (write `name` instead): {offenders}"


def test_docstrings_hold_no_rst_blocks() -> None:
    """Nor reStructuredText block markup, which Markdown leaves as text: a literal-block ``::``
    (end the line with ``:``; the indented block is a code block already) or a simple table."""
    offenders = _source_lines_matching(r"(?:\S::|^\s*::)\s*$|^\s*={3,} +={3,}")
    assert not offenders, f"reStructuredText markup in docstrings: {offenders}"


# ---------------------------------------------------------------- the API reference as rendered
#: Subpackages with an API page of their own (issue #27: they had none).
REFERENCE_MODULES = ("azarr.sync", "azarr.service", "azarr.loader", "azarr.dask", "azarr.xarray")


def test_subpackages_have_reference_pages_in_the_nav() -> None:
    nav = (ROOT / "mkdocs.yml").read_text()
    for module in REFERENCE_MODULES:
        pages = [p for p in (DOCS / "api").glob("*.md") if re.search(rf"^::: {module}$", p.read_text(), re.M)]
        assert pages, f"no page in docs/api/ documents {module}"
        assert f"api/{pages[0].name}" in nav, f"docs/api/{pages[0].name} is not in the nav of mkdocs.yml"


def test_docs_extra_can_format_signatures() -> None:
    """mkdocstrings formats the separate signatures only with ruff or black installed."""
    extra = re.search(r"^docs = \[(.*?)^\]", (ROOT / "pyproject.toml").read_text(), flags=re.M | re.S)
    assert extra and re.search(r'"(ruff|black)\b', extra[1])


def _griffe_package() -> Any:
    """azarr as mkdocstrings reads it: static analysis, numpy docstrings, the site's extension."""
    import logging

    griffe = pytest.importorskip("griffe")
    logger = logging.getLogger("griffe")
    level = logger.level
    logger.setLevel(logging.ERROR)  # griffe warns about every unannotated parameter
    try:
        extensions = griffe.load_extensions(f"{DOCS / 'griffe_sync.py'}:SyncTwins")
        return griffe.load("azarr", docstring_parser="numpy", extensions=extensions, resolve_aliases=False)
    finally:
        logger.setLevel(level)


def test_generated_sync_api_is_documented() -> None:
    """azarr.sync's functions and methods are generated at import: the reference still shows them,
    with their async twin's docstring (numpy sections parsed) and the ``timeout`` keyword."""
    import azarr.sync

    sync = _griffe_package()["sync"]
    for name in ("open_array", "zeros", "copy_store"):
        function = sync[name].final_target
        assert function.is_function and function.docstring and "timeout" in function.parameters, name
    for name in ("open_array", "copy_store"):
        kinds = [section.kind.value for section in sync[name].final_target.docstring.parsed]
        assert "parameters" in kinds, (name, kinds)
    array = sync["Array"].final_target
    for name in ("get_basic_selection", "resize", "refresh", "hexdigest"):
        method = array[name]
        assert method.is_function and method.docstring, name
        assert "timeout" in method.parameters and getattr(azarr.sync.Array, name).__doc__, name
    assert str(array["shape"].annotation) == "tuple[int, ...]" and "property" in array["shape"].labels


def test_documented_defaults_agree_with_signatures() -> None:
    """A numpy ``name : {"a", "b"}`` type means "a" is the default: the API reference shows that
    in its Default column, so the first choice must be the signature's default."""
    package = _griffe_package()

    def functions(obj: Any) -> Any:
        for member in obj.members.values():
            if member.is_alias or (member.name.startswith("_") and not member.is_module):
                continue
            if member.is_module or member.is_class:
                yield from functions(member)
            elif member.is_function and member.docstring:
                yield member

    wrong = []
    for function in functions(package):
        for section in function.docstring.parsed:
            if section.kind.value != "parameters":
                continue
            for param in section.value:
                documented = None if param.default is None else str(param.default).strip("'\"")
                actual = (
                    function.parameters[param.name].default if param.name in function.parameters else None
                )
                if documented is not None and actual is not None and documented != str(actual).strip("'\""):
                    wrong.append(f"{function.path}({param.name}): documented {documented}, is {actual}")
    assert not wrong, wrong
