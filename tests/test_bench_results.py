"""``benchmarks/results/`` holds the latest run of each benchmark, and the history table of
``benchmarks/README.md`` marks exactly those files in bold (issue #33).

A run committed without its row, a file removed while still bold, or a page pointing at a
removed result fails here; the docs build (``mkdocs build --strict``) catches only the
``--8<--`` includes. Names not in bold are earlier runs kept in git, so they are not looked
for on disk.
"""

from __future__ import annotations

import re
from fnmatch import fnmatch
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "benchmarks" / "results"
README = ROOT / "benchmarks" / "README.md"
TABLE_HEADING = "## Results: the latest run of each benchmark, and the history"
#: A result file's name or pattern in the table: ``cloud-*-https-gotls.*``, ``sharding-1024mib-{20,0}ms.*``.
NAME = re.compile(r"^[a-z0-9][\w{},*-]*\.(?:md|json|png|\*|\{[a-z,]+\})$")
CODE = re.compile(r"(\*\*)?`([^`]+)`(\*\*)?")


def _expand(pattern: str) -> list[str]:
    """Expand the table's brace alternatives (``{20,0}``), as the shell would."""
    match = re.search(r"\{([^{}]*)\}", pattern)
    if match is None:
        return [pattern]
    head, tail = pattern[: match.start()], pattern[match.end() :]
    return [name for alt in match.group(1).split(",") for name in _expand(head + alt + tail)]


def _table_names() -> tuple[list[str], list[str]]:
    """The file-column names of the history table: (bold, not bold), braces expanded."""
    text = README.read_text()
    start = text.index(TABLE_HEADING)
    end = text.index("\n## ", start + len(TABLE_HEADING))
    bold: list[str] = []
    plain: list[str] = []
    for line in text[start:end].splitlines():
        cells = line.split(" | ")
        if not line.startswith("| 20") or len(cells) < 4:
            continue
        for match in CODE.finditer(cells[2]):
            if NAME.match(match.group(2)):
                target = bold if match.group(1) and match.group(3) else plain
                target.extend(_expand(match.group(2)))
    return bold, plain


def _present() -> list[str]:
    return sorted(p.name for p in RESULTS.iterdir() if p.is_file())


def test_the_table_reads_as_expected() -> None:
    bold, plain = _table_names()
    assert len(bold) >= 20 and len(plain) >= 20, (len(bold), len(plain))


def test_every_bold_name_is_a_present_file() -> None:
    bold, _ = _table_names()
    present = _present()
    missing = [name for name in bold if not any(fnmatch(f, name) for f in present)]
    assert not missing, (
        f"bold in benchmarks/README.md's history table but not in benchmarks/results/: {missing}"
    )


def test_every_present_file_is_bold_in_the_table() -> None:
    bold, _ = _table_names()
    unmarked = [f for f in _present() if not any(fnmatch(f, name) for name in bold)]
    assert not unmarked, (
        f"in benchmarks/results/ but not bold in benchmarks/README.md's history table: {unmarked}"
    )


def test_pages_name_only_present_results() -> None:
    """The docs and the README point only at results that exist (the benchmarks' and the
    noxfile's docstrings name the files a command writes, which need not be committed)."""
    pages = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
    present = set(_present())
    dangling = []
    for page in pages:
        for name in re.findall(r"benchmarks/results/([\w.-]+\.(?:md|json|png))", page.read_text()):
            if name not in present:
                dangling.append(f"{page.relative_to(ROOT)}: {name}")
    assert not dangling, dangling
