"""What sync helpers (accessors, attributes) need from the node they belong to."""

from __future__ import annotations

from typing import Any, Protocol


class Runner(Protocol):
    """A sync node: runs a coroutine with its default timeout unless one is given."""

    def _run(self, coro: Any, timeout: float | None) -> Any: ...


class Writer(Runner, Protocol):
    """A sync array: also runs writes, under its synchronizer's lock where one is needed."""

    def _write(self, coro: Any, timeout: float | None) -> Any: ...
