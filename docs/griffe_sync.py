"""griffe extension: document `azarr.sync`'s generated twins from the imported module.

`azarr.sync` builds most of its API at import time: the functions are
``mirror_function(api.X)`` assignments, many methods ``mirror_method(AsyncArray.X)`` or
``@mirrors(...)`` defs without a docstring of their own, the plain properties ``Forward``
descriptors. Read from the source (griffe's static analysis, which every other API page
uses), they have no docstring and would be left out of the reference. This extension
imports `azarr.sync` and gives each such object what Python itself sees: the docstring of
its async twin (with the note on ``timeout``) and, for generated functions, their
signature (the twin's parameters plus keyword-only ``timeout``).
"""

from __future__ import annotations

import importlib
import inspect
from typing import Any

import griffe

#: The classes of azarr.sync whose members are partly generated.
CLASSES = ("Array", "Group", "Attributes")


def _doc(runtime: Any) -> str:
    """The docstring Python shows for ``runtime``, rebuilt from its async twin's when it has one
    (so that numpy sections keep the indentation the parser needs)."""
    twin = getattr(runtime, "__azarr_async__", None)
    if twin is None or not twin.__doc__:
        return inspect.getdoc(runtime) or ""
    from azarr.sync._mirror import TIMEOUT_DOC

    return f"{inspect.cleandoc(twin.__doc__)}\n\nNotes\n-----\n{TIMEOUT_DOC}"


def _docstring(runtime: Any, parent: griffe.Object) -> griffe.Docstring:
    return griffe.Docstring(_doc(runtime), parent=parent, parser="numpy")


def _annotation(value: Any) -> str | None:
    if value is inspect.Parameter.empty:
        return None
    return value if isinstance(value, str) else inspect.formatannotation(value)


def _function(name: str, runtime: Any, parent: griffe.Object) -> griffe.Function:
    """A griffe function for ``runtime`` (a plain function) with its runtime signature and doc."""
    signature = inspect.signature(runtime)
    parameters = griffe.Parameters(
        *(
            griffe.Parameter(
                p.name,
                annotation=_annotation(p.annotation),
                kind=griffe.ParameterKind(p.kind.description),
                default=None if p.default is inspect.Parameter.empty else repr(p.default),
            )
            for p in signature.parameters.values()
        )
    )
    function = griffe.Function(name, parameters=parameters, returns=_annotation(signature.return_annotation))
    function.docstring = _docstring(runtime, function)
    function.parent = parent
    return function


def _document(static: griffe.Object, name: str, runtime: Any) -> None:
    """Fill in ``static``'s member ``name`` from its runtime object where the source says nothing."""
    member = static.members.get(name)
    target = member.final_target if isinstance(member, griffe.Alias) else member
    if not _doc(runtime) or (target is not None and target.docstring is not None):
        return
    if inspect.isfunction(runtime) and (target is None or not isinstance(target, griffe.Function)):
        owner = target.parent if target is not None and target.parent is not None else static
        function = _function(name, runtime, owner)
        owner.set_member(name, function)
        if isinstance(member, griffe.Alias):  # azarr.sync.X re-exports azarr.sync._api.X
            member.target = function
    elif target is not None:
        target.docstring = _docstring(runtime, target)
        if isinstance(target, griffe.Attribute) and type(runtime).__name__ == "Forward":
            # `shape: Forward[tuple[int, ...]] = Forward(AsyncArray, "shape")` is, to a
            # user, the read-only property `shape: tuple[int, ...]`.
            annotation = str(target.annotation or "")
            if annotation.startswith("Forward[") and annotation.endswith("]"):
                target.annotation = annotation[len("Forward[") : -1]
            target.value = None
            target.labels = {"property"}


class SyncTwins(griffe.Extension):
    """Runs once the `azarr` package is loaded (see the module docstring)."""

    def on_package(self, *, pkg: griffe.Module, **kwargs: Any) -> None:
        if pkg.path != "azarr":
            return
        runtime = importlib.import_module("azarr.sync")
        module = pkg["sync"]
        for name in runtime.__all__:
            obj = getattr(runtime, name)
            if inspect.isclass(obj):
                if name in CLASSES:
                    cls = (
                        module[name].final_target if isinstance(module[name], griffe.Alias) else module[name]
                    )
                    for attr, value in vars(obj).items():
                        if not attr.startswith("_"):
                            _document(cls, attr, value)
            else:
                _document(module, name, obj)
