"""What ``node.info`` and ``group.tree()`` return: text that also renders in a notebook.

zarr-python 2 returns objects (``InfoReporter``, ``TreeViewer``) whose ``repr`` is the report,
so a REPL or notebook shows a table or a tree rather than a quoted string. These classes are
``str`` subclasses with the same behaviour: ``print(z.info)``, ``"Shape" in z.info`` and
comparisons work as on the text, ``repr`` shows the text itself, ``_repr_html_`` gives a
notebook an HTML table (or a ``<pre>`` tree), and ``bytes(tree)`` is the ASCII-art tree.
"""

from __future__ import annotations

import html
import textwrap
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from azarr.core._array_info import codec_entries, describe_codec

if TYPE_CHECKING:
    from azarr.core.array import AsyncArray
    from azarr.core.group import AsyncGroup

#: zarr-python 2 wraps each row's value at this many columns.
_WIDTH = 80


def human_bytes(n: int) -> str:
    """``n`` with its size in binary units as zarr-python 2 prints it: ``"4000 (3.9K)"``; ``"800"`` up to 1 KiB."""
    if n <= 1024:
        return str(n)
    size = float(n)
    for unit in ("K", "M", "G", "T", "P"):
        size /= 1024
        if size < 1024 or unit == "P":
            break
    return f"{n} ({size:.1f}{unit})"


class InfoReport(str):
    """A node's ``info``: ``label : value`` rows (zarr-python 2's ``InfoReporter``).

    The text aligns values on the longest label and wraps them at 80 columns, as
    zarr-python 2 prints them; `items` keeps the rows.
    """

    items: tuple[tuple[str, str], ...]

    def __new__(cls, items: Sequence[tuple[str, object]]) -> InfoReport:
        rows = tuple((label, str(value)) for label, value in items)
        width = max((len(label) for label, _ in rows), default=0)
        lines = []
        for label, value in rows:
            wrapper = textwrap.TextWrapper(
                width=_WIDTH,
                initial_indent=f"{label:<{width}} : ",
                subsequent_indent=f"{'':<{width}} : ",
            )
            lines.append(wrapper.fill(value))
        report = super().__new__(cls, "".join(f"{line}\n" for line in lines))
        report.items = rows
        return report

    def __repr__(self) -> str:
        return str(self)

    def _repr_html_(self) -> str:
        """An HTML table of the rows (Jupyter)."""
        cells = "".join(
            f'<tr><th style="text-align: left">{html.escape(label)}</th>'
            f'<td style="text-align: left">{html.escape(value)}</td></tr>'
            for label, value in self.items
        )
        return f'<table class="zarr-info"><tbody>{cells}</tbody></table>'


class TreeReport(str):
    """A group's ``tree()``: the hierarchy drawn with box characters (zarr-python 2's ``TreeViewer``).

    ``bytes(tree)`` draws it with ASCII (``+--``, ``|``), as zarr-python 2's ``bytes(tree)``.
    """

    def __repr__(self) -> str:
        return str(self)

    def __bytes__(self) -> bytes:
        ascii_art = self.replace("└──", "+--").replace("├──", "+--").replace("│", "|")
        return ascii_art.encode()

    def _repr_html_(self) -> str:
        """The tree in a ``<pre>`` block (Jupyter)."""
        return f'<pre class="zarr-tree">{html.escape(str(self))}</pre>'


def typestr(obj: object) -> str:
    """The public dotted name of ``obj``'s class: ``"azarr.storage.MemoryStore"``, not its private module."""
    cls = obj if isinstance(obj, type) else type(obj)
    module = ".".join(part for part in cls.__module__.split(".") if not part.startswith("_"))
    return f"{module}.{cls.__qualname__}"


def array_info_items(
    array: AsyncArray,
    *,
    type_name: str,
    store_type: str | None = None,
    chunk_store_type: str | None = None,
    synchronizer_type: str | None = None,
    stored: int | None = None,
    initialized: int | None = None,
) -> list[tuple[str, str]]:
    """The rows of an array's ``info``, in zarr-python 2's order and wording.

    ``stored`` (bytes) adds ``No. bytes stored`` and ``Storage ratio`` when above 0,
    ``initialized`` adds ``Chunks initialized``; the ``*_type`` rows name the classes a
    caller shows (the sync facade's, not the async store's).
    """
    items: list[tuple[str, str]] = []
    if array.path:
        items.append(("Name", f"/{array.path}"))
    items += [
        ("Type", type_name),
        *([("Zarr format", "3")] if array.zarr_format == 3 else []),
        ("Data type", str(array.dtype)),
        ("Shape", str(array.shape)),
        ("Chunk shape", str(array.chunks)),
        *([("Shard shape", str(array.shards))] if array.shards is not None else []),
        ("Order", array.order),
        ("Read-only", str(array.read_only)),
    ]
    if array.zarr_format == 3:  # the codec chain, as zarr-python 3's info lists it
        items += [(f"Codec [{i}]", describe_codec(c)) for i, c in enumerate(codec_entries(array.metadata))]
    else:
        items += [(f"Filter [{i}]", repr(f)) for i, f in enumerate(array.filters or ())]
        items.append(("Compressor", repr(array.compressor)))
    if synchronizer_type is not None:
        items.append(("Synchronizer type", synchronizer_type))
    items.append(("Store type", store_type or typestr(array.store)))
    if chunk_store_type is not None:
        items.append(("Chunk store type", chunk_store_type))
    items.append(("No. bytes", human_bytes(array.nbytes)))
    if stored:
        items += [
            ("No. bytes stored", human_bytes(stored)),
            ("Storage ratio", f"{array.nbytes / stored:.1f}"),
        ]
    if initialized is not None:
        items.append(("Chunks initialized", f"{initialized}/{array.nchunks}"))
    return items


def group_info_items(
    group: AsyncGroup,
    members: Sequence[tuple[str, AsyncArray | AsyncGroup]] | None,
    *,
    type_name: str,
    store_type: str | None = None,
    chunk_store_type: str | None = None,
    synchronizer_type: str | None = None,
) -> list[tuple[str, str]]:
    """The rows of a group's ``info`` in zarr-python 2's order; ``members`` adds the member rows."""
    from azarr.core.array import AsyncArray

    items = [("Name", group.name), ("Type", type_name)]
    if group.zarr_format == 3:
        items.append(("Zarr format", "3"))
    items.append(("Read-only", str(group.read_only)))
    if synchronizer_type is not None:
        items.append(("Synchronizer type", synchronizer_type))
    items.append(("Store type", store_type or typestr(group.store)))
    if chunk_store_type is not None:
        items.append(("Chunk store type", chunk_store_type))
    if members is not None:
        arrays = sorted(name for name, node in members if isinstance(node, AsyncArray))
        groups = sorted(name for name, node in members if not isinstance(node, AsyncArray))
        items += [
            ("No. members", str(len(members))),
            ("No. arrays", str(len(arrays))),
            ("No. groups", str(len(groups))),
        ]
        if arrays:
            items.append(("Arrays", ", ".join(arrays)))
        if groups:
            items.append(("Groups", ", ".join(groups)))
    return items


#: ``(name, node, its members)``: a hierarchy level as `tree_report` draws it. A node with a
#: ``shape`` is an array (drawn with its shape and dtype), any other a group.
TreeEntry = tuple[str, Any, "list[TreeEntry]"]


def tree_report(root: str, members: Sequence[TreeEntry], *, codecs: bool = False) -> TreeReport:
    """The `TreeReport` of a group called ``root`` with ``members`` (zarr-python 2's layout;
    ``codecs``: with each array's Zarr format and codec chain, as ``azarr tree`` prints them)."""
    return TreeReport("\n".join([root, *_tree_lines(members, "", codecs)]))


def array_tree_line(name: str, array: Any, *, codecs: bool = False) -> str:
    """An array's line in ``tree()``: name, shape, dtype (``codecs``: its format and codec chain)."""
    chain = f" v{array.zarr_format} {_chain_label(array.codecs)}" if codecs else ""
    return f"{name} {tuple(array.shape)} {array.dtype}{chain}"


def _chain_label(entries: list[dict[str, Any]]) -> str:
    """``bytes > zstd``; a sharded array's ``sharding_indexed[bytes > zstd]`` (its inner chain)."""
    names = []
    for entry in entries:
        inner = (
            (entry.get("configuration") or {}).get("codecs") if entry["name"] == "sharding_indexed" else None
        )
        names.append(f"{entry['name']}[{_chain_label(inner)}]" if inner else str(entry["name"]))
    return " > ".join(names)


def _tree_lines(members: Sequence[TreeEntry], indent: str, codecs: bool) -> list[str]:
    lines: list[str] = []
    for i, (name, node, below) in enumerate(members):
        last = i == len(members) - 1
        branch = " └── " if last else " ├── "
        if hasattr(node, "shape"):
            lines.append(f"{indent}{branch}{array_tree_line(name, node, codecs=codecs)}")
        else:
            lines.append(f"{indent}{branch}{name}")
            lines.extend(_tree_lines(below, indent + ("    " if last else " │  "), codecs))
    return lines
