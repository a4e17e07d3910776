"""A hypothesis fuzzer: mutated stores give data or an AzarrError, quickly and in bounded memory.

Default run: ``AZARR_FUZZ_EXAMPLES`` (300) cases. ``nox -s fuzz`` runs
>= 20,000 and writes its figures (cases, seconds, peak RSS growth, slowest
case) to ``AZARR_FUZZ_REPORT`` if set. Every case that once broke azarr is
pinned in tests/hostile/ (test_hostile_corpus.py).
"""

from __future__ import annotations

import asyncio
import json
import os
import time
from typing import Any

import pytest
from fuzz_stores import FUZZ_MAX_CHUNK_BYTES, fuzz_settings, hostile_store, is_document, run_case, templates
from hypothesis import given
from rss import MiB, measure_rss

import azarr
from azarr.errors import AzarrError

EXAMPLES = int(os.environ.get("AZARR_FUZZ_EXAMPLES", "300"))
CASE_SECONDS = 5.0
RSS_BUDGET = 256 * MiB


def test_templates_read_back_unmutated() -> None:
    # The fuzzer's starting points are valid: every one opens and reads without error.
    assert sum(name.startswith("v3-") for name in templates()) >= 9  # Zarr v3 ones too
    loop = asyncio.new_event_loop()
    try:
        for name, files in templates().items():
            loop.run_until_complete(run_case(name, files))
    finally:
        loop.close()


@pytest.mark.timeout(0)
def test_fuzz_mutated_stores() -> None:
    loop = asyncio.new_event_loop()
    stats: dict[str, Any] = {"cases": 0, "errors": 0, "slowest_s": 0.0, "slowest_case": None}

    @fuzz_settings(EXAMPLES)
    @given(case=hostile_store())
    def one_case(case: tuple[str, dict[str, bytes]]) -> None:
        name, files = case
        start = time.perf_counter()
        try:
            loop.run_until_complete(run_case(name, files))
        except AzarrError:
            stats["errors"] += 1
        elapsed = time.perf_counter() - start
        stats["cases"] += 1
        if elapsed > stats["slowest_s"]:
            stats["slowest_s"], stats["slowest_case"] = elapsed, name
            stats["slowest_files"] = {
                k: v[:300].decode("latin-1") if is_document(k) else f"<{len(v)} bytes>"
                for k, v in files.items()
            }
        assert elapsed < CASE_SECONDS, f"case on template {name!r} took {elapsed:.1f} s"

    templates()  # built outside the measured block
    started = time.perf_counter()
    try:
        with azarr.config.set(max_chunk_bytes=FUZZ_MAX_CHUNK_BYTES), measure_rss() as growth:
            one_case()
    finally:
        loop.close()
    stats["seconds"] = round(time.perf_counter() - started, 1)
    stats["peak_rss_growth_mib"] = round(growth.bytes / MiB, 1)
    stats["slowest_s"] = round(stats["slowest_s"], 3)
    report = os.environ.get("AZARR_FUZZ_REPORT")
    if report:
        os.makedirs(os.path.dirname(report) or ".", exist_ok=True)
        with open(report, "w") as f:
            json.dump(stats, f, indent=2)
    print(f"fuzz: {stats}")
    assert stats["cases"] >= min(EXAMPLES, 50)
    assert growth.bytes < RSS_BUDGET, f"peak RSS grew by {growth.bytes / MiB:.0f} MiB"
