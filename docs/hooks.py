"""mkdocs hook: publish the benchmark plots (``benchmarks/results/*.png``) with the site.

The performance page includes the result tables from ``benchmarks/results/*.md``
(pymdownx.snippets) and shows these plots as ``results/<name>.png``, so the
page always shows the last committed run without copies under ``docs/``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from mkdocs.structure.files import File, Files

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
