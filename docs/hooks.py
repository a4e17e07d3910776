"""mkdocs hooks: publish the benchmark plots (``benchmarks/results/*.png``) with the site, and
show the command line reference's empty-string defaults.

The performance page includes the result tables from ``benchmarks/results/*.md``
(pymdownx.snippets) and shows these plots as ``results/<name>.png``, so the
page always shows the last committed run without copies under ``docs/``.

mkdocs-click writes an option's default as a code span, which for ``default=""``
(``--path``: the root) is an empty span that Markdown leaves as two literal backticks.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from mkdocs.structure.files import File, Files
from mkdocs.structure.pages import Page

BENCHMARKS = Path(__file__).resolve().parent.parent / "benchmarks"


def on_files(files: Files, config: Any) -> Files:
    for plot in sorted((BENCHMARKS / "results").glob("*.png")):
        files.append(
            File(
                f"results/{plot.name}",
                src_dir=str(BENCHMARKS),
                dest_dir=config["site_dir"],
                use_directory_urls=config["use_directory_urls"],
            )
        )
    return files


def on_page_content(html: str, page: Page, **kwargs: Any) -> str:
    if page.file.src_uri != "cli.md":
        return html
    return html.replace("<td>``</td>", '<td><code>""</code></td>')
