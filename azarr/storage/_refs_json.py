"""kerchunk JSON references, versions 0 and 1: parsing, templates and ``gen``.

A reference set maps Zarr keys to their bytes, held one of three ways
(kerchunk's "reference specification", fsspec ``ReferenceFileSystem``):

* data: a string (``"base64:..."`` decoded, anything else its UTF-8 bytes), or a
  JSON object (a metadata document, stored as its JSON);
* ``[url]``: the whole object at ``url``;
* ``[url, offset, length]``: ``length`` bytes of ``url`` from ``offset``.

Version 1 (``{"version": 1, "refs": {...}}``) adds ``templates`` (``{{name}}`` in a
URL stands for ``templates[name]``) and ``gen``: references generated from
key/url/offset/length patterns over integer dimensions. Version 0 is a plain
``{key: entry}`` mapping. Entries are checked when looked up, not when loaded, so a
set of millions of references costs one parse; what a reference names is
`Reference` (or bytes) by then.
"""

from __future__ import annotations

import ast
import base64
import binascii
import itertools
import json
import operator
import re
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from numbers import Integral
from typing import Any

from azarr.errors import InvalidReferenceError

__all__ = ["MAX_OFFSET", "JsonReferences", "Reference", "checked_offset", "parse_entry", "ranged_reference"]

_TEMPLATE = re.compile(r"\{\{\s*(.*?)\s*\}\}")
# Longest string a gen expression may produce (a hostile "'x' * 10**9" would eat memory).
_MAX_RENDERED = 4096
#: Largest offset, length or offset + length a reference may give (a file offset, ``off_t``).
MAX_OFFSET = 2**63 - 1


@dataclass(frozen=True, slots=True)
class Reference:
    """Bytes of another object: ``length`` bytes of ``url`` from ``offset``
    (``length`` None: the whole object from ``offset``)."""

    url: str
    offset: int = 0
    length: int | None = None


def checked_offset(number: int, what: str, key: str) -> int:
    """``number``, an offset or length of reference ``key`` (JSON or Parquet), if within
    0 .. `MAX_OFFSET`.

    Raises
    ------
    InvalidReferenceError
        Out of that range.
    """
    if number < 0 or number > MAX_OFFSET:
        raise InvalidReferenceError(f"reference {key!r}: {what} {number} is out of range (0 .. 2**63-1)")
    return number


def ranged_reference(url: str, offset: int, length: int, key: str) -> Reference:
    """The `Reference` of ``length`` bytes of ``url`` from ``offset`` (each already checked).

    Raises
    ------
    InvalidReferenceError
        ``offset + length`` is past `MAX_OFFSET`.
    """
    if offset + length > MAX_OFFSET:
        raise InvalidReferenceError(f"reference {key!r}: offset + length is out of range")
    return Reference(url, offset, length)


def _int(value: Any, what: str, key: str) -> int:
    if isinstance(value, bool) or not isinstance(value, Integral):
        raise InvalidReferenceError(f"reference {key!r}: {what} must be an integer, got {value!r}")
    return checked_offset(int(value), what, key)


def parse_entry(key: str, entry: Any, templates: Mapping[str, str]) -> bytes | Reference:
    """The bytes or `Reference` one reference entry stands for.

    Raises
    ------
    InvalidReferenceError
        An entry of another shape, a negative or non-integer offset or length, a
        template name not in ``templates``, undecodable base64.
    """
    if isinstance(entry, str):
        if entry.startswith("base64:"):
            try:
                return base64.b64decode(entry[7:], validate=True)
            except (binascii.Error, ValueError) as exc:
                raise InvalidReferenceError(f"reference {key!r}: invalid base64 data ({exc})") from None
        return entry.encode("utf-8")
    if isinstance(entry, bytes):
        return entry
    if isinstance(entry, dict):
        return json.dumps(entry).encode("utf-8")
    if isinstance(entry, list | tuple) and len(entry) in (1, 3) and isinstance(entry[0], str):
        url = render_templates(entry[0], templates, key)
        if not url:
            raise InvalidReferenceError(f"reference {key!r}: empty target URL")
        if len(entry) == 1:
            return Reference(url)
        return ranged_reference(url, _int(entry[1], "offset", key), _int(entry[2], "length", key), key)
    raise InvalidReferenceError(
        f"reference {key!r}: expected data (a string), [url] or [url, offset, length], got "
        f"{type(entry).__name__} {str(entry)[:80]!r}"
    )


def render_templates(text: str, templates: Mapping[str, str], key: str) -> str:
    """``text`` with each ``{{name}}`` replaced by ``templates[name]``.

    Raises
    ------
    InvalidReferenceError
        A name with no template.
    """
    if "{{" not in text:
        return text

    def substitute(match: re.Match[str]) -> str:
        name = match.group(1)
        try:
            return str(templates[name])
        except KeyError:
            raise InvalidReferenceError(
                f"reference {key!r}: template {{{{{name}}}}} is not defined in 'templates'"
            ) from None

    return _TEMPLATE.sub(substitute, text)


# ------------------------------------------------------------------ gen expressions
_BINARY: dict[type[ast.operator], Callable[[Any, Any], Any]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
}


def _evaluate(node: ast.AST, names: Mapping[str, Any], source: str) -> Any:
    """A gen expression: integers, strings, names, ``+ - * // %`` and unary minus only
    (the subset of Jinja expressions kerchunk's examples use; nothing is called)."""
    if isinstance(node, ast.Expression):
        return _evaluate(node.body, names, source)
    if (
        isinstance(node, ast.Constant)
        and isinstance(node.value, int | str)
        and not isinstance(node.value, bool)
    ):
        return node.value
    if isinstance(node, ast.Name):
        if node.id not in names:
            raise InvalidReferenceError(f"gen expression {source!r}: unknown name {node.id!r}")
        return names[node.id]
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub | ast.UAdd):
        value = _evaluate(node.operand, names, source)
        if not isinstance(value, int):
            raise InvalidReferenceError(f"gen expression {source!r}: sign of a non-integer")
        return -value if isinstance(node.op, ast.USub) else value
    if isinstance(node, ast.BinOp) and type(node.op) in _BINARY:
        left, right = _evaluate(node.left, names, source), _evaluate(node.right, names, source)
        if isinstance(node.op, ast.Mult) and (isinstance(left, str) or isinstance(right, str)):
            raise InvalidReferenceError(f"gen expression {source!r}: strings cannot be repeated")
        try:
            result = _BINARY[type(node.op)](left, right)
        except (TypeError, ValueError, ZeroDivisionError) as exc:
            raise InvalidReferenceError(f"gen expression {source!r}: {exc}") from None
        if isinstance(result, str) and len(result) > _MAX_RENDERED:
            raise InvalidReferenceError(f"gen expression {source!r}: result too long")
        if isinstance(result, int) and abs(result) > MAX_OFFSET:
            raise InvalidReferenceError(f"gen expression {source!r}: result out of range")
        return result
    raise InvalidReferenceError(f"gen expression {source!r}: unsupported syntax {type(node).__name__}")


def _render(pattern: Any, names: Mapping[str, Any]) -> str:
    text = str(pattern)

    def substitute(match: re.Match[str]) -> str:
        source = match.group(1)
        try:
            tree = ast.parse(source, mode="eval")
        except SyntaxError:
            raise InvalidReferenceError(f"gen expression {source!r}: not an expression") from None
        return str(_evaluate(tree, names, source))

    return _TEMPLATE.sub(substitute, text)


def _dimension(name: str, spec: Any) -> range | list[Any]:
    if isinstance(spec, list):
        return spec
    if isinstance(spec, dict):
        start = _int(spec.get("start", 0), f"gen dimension {name!r} start", "gen")
        stop = _int(spec.get("stop", 0), f"gen dimension {name!r} stop", "gen")
        step = _int(spec.get("step", 1), f"gen dimension {name!r} step", "gen")
        if step == 0:
            raise InvalidReferenceError(f"gen dimension {name!r}: step 0")
        return range(start, stop, step)
    raise InvalidReferenceError(f"gen dimension {name!r}: expected {{start, stop, step}} or a list")


def expand_gen(gen: Any, templates: Mapping[str, str], max_refs: int) -> Iterator[tuple[str, Reference]]:
    """The references a version 1 ``gen`` list stands for.

    Raises
    ------
    InvalidReferenceError
        A malformed gen entry or expression, or more than ``max_refs`` references.
    """
    if not isinstance(gen, list):
        raise InvalidReferenceError("'gen' must be a list")
    total = 0
    for item in gen:
        if not isinstance(item, dict) or not {"key", "url", "dimensions"} <= item.keys():
            raise InvalidReferenceError(f"gen entry needs key, url and dimensions: {str(item)[:80]!r}")
        dims = item["dimensions"]
        if not isinstance(dims, dict):
            raise InvalidReferenceError("gen 'dimensions' must be an object")
        axes = {name: _dimension(name, spec) for name, spec in dims.items()}
        count = 1
        for values in axes.values():
            count *= len(values)
        total += count
        if total > max_refs:
            raise InvalidReferenceError(
                f"'gen' makes more than {max_refs} references (azarr.config reference_max_refs)"
            )
        names = list(axes)
        for combo in itertools.product(*axes.values()):
            scope: dict[str, Any] = {**templates, **dict(zip(names, combo, strict=True))}
            key = _render(item["key"], scope)
            url = _render(item["url"], scope)
            if "offset" in item or "length" in item:
                offset = _int(_parse_int(_render(item.get("offset", 0), scope), key), "offset", key)
                length = _int(_parse_int(_render(item.get("length", 0), scope), key), "length", key)
                yield key, Reference(url, offset, length)
            else:
                yield key, Reference(url)


def _parse_int(text: str, key: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise InvalidReferenceError(f"reference {key!r}: {text!r} is not an integer") from None


class JsonReferences:
    """A version 0 or 1 reference set held in memory (entries checked on lookup).

    Parameters
    ----------
    doc : mapping
        The decoded reference document.
    max_refs : int
        Most references accepted (``azarr.config`` ``reference_max_refs``).

    Raises
    ------
    InvalidReferenceError
        An unknown version, malformed ``refs``/``templates``/``gen``, or too many references.
    """

    def __init__(self, doc: Mapping[str, Any], *, max_refs: int) -> None:
        if not isinstance(doc, Mapping):
            raise InvalidReferenceError(f"a reference set is a JSON object, got {type(doc).__name__}")
        version = doc.get("version")
        if version is None:
            refs: Any = doc
            templates: Any = {}
            gen: Any = []
        elif version == 1 and not isinstance(version, bool):
            refs, templates, gen = doc.get("refs", {}), doc.get("templates") or {}, doc.get("gen") or []
        else:
            raise InvalidReferenceError(f"unknown reference specification version {version!r} (0 or 1)")
        if not isinstance(refs, Mapping) or not isinstance(templates, Mapping):
            raise InvalidReferenceError("'refs' and 'templates' must be JSON objects")
        if len(refs) > max_refs:
            raise InvalidReferenceError(
                f"{len(refs)} references, more than {max_refs} (azarr.config reference_max_refs)"
            )
        self.templates: dict[str, str] = {str(k): str(v) for k, v in templates.items()}
        self._refs: dict[str, Any] = dict(refs)
        for key, ref in expand_gen(gen, self.templates, max_refs - len(self._refs)):
            self._refs.setdefault(key, ref)

    def __len__(self) -> int:
        return len(self._refs)

    def lookup(self, key: str) -> bytes | Reference | None:
        """What ``key`` stands for; None if the set has no such key.

        Raises
        ------
        InvalidReferenceError
            The entry is malformed.
        """
        entry = self._refs.get(key)
        if entry is None or isinstance(entry, Reference):
            return entry
        return parse_entry(key, entry, self.templates)

    def keys(self) -> Iterator[str]:
        """Every key of the set (references and data alike)."""
        return iter(list(self._refs))
