"""The click group, the options every command shares, and how a command runs and fails.

Each command is an ``async def`` taking a `Session` first; `command`
adds the common options, runs the coroutine with `asyncio.run`, closes
the stores it opened, and turns any failure into one line on stderr and exit
status 1 (usage errors are click's: status 2). ``-v`` shows the traceback.
"""

from __future__ import annotations

import asyncio
import functools
import json
import logging
import sys
import traceback
from collections.abc import Callable, Coroutine
from dataclasses import dataclass, field
from typing import Any, NoReturn

import click

import azarr
from azarr.storage import Store

#: Credentials stay strings even when they look like JSON numbers.
_STRING_OPTIONS = frozenset({"key", "secret", "token", "password", "username", "profile", "session_token"})
_S3_SCHEMES = ("s3", "s3a")
_GCS_SCHEMES = ("gs", "gcs")
_LOCAL_SCHEMES = ("", "file", "local", "memory", "zip")

CommandFn = Callable[..., Coroutine[Any, Any, None]]


@click.group(context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.version_option(azarr.__version__, prog_name="azarr")
def cli() -> None:
    """Look at, copy, check and time Zarr v2 hierarchies on S3, GCS, HTTP and local disk.

    URLs are anything azarr.from_url opens: s3://bucket/data.zarr, gs://..., https://...,
    a local path, zip::data.zip, or a chained fsspec URL.
    """


def main() -> None:
    """Console-script entry point (``azarr``)."""
    cli(prog_name="azarr")


def parse_option(text: str) -> tuple[str, Any]:
    """One ``-S key=value``: the value as JSON when it parses (``true``, ``5``, ``{...}``), else the string.

    Raises
    ------
    click.BadParameter
        No ``=`` or an empty key.
    """
    key, sep, raw = text.partition("=")
    key = key.strip()
    if not sep or not key:
        raise click.BadParameter(f"expected key=value, got {text!r}", param_hint="'-S'")
    if key in _STRING_OPTIONS:
        return key, raw
    try:
        return key, json.loads(raw)
    except ValueError:
        return key, raw


def _scheme(url: str) -> str:
    head, sep, _ = url.partition("://")
    return head.lower() if sep and "::" not in head else ""


@dataclass
class Session:
    """What every command knows: its store options, verbosity and output format."""

    options: dict[str, Any] = field(default_factory=dict)
    anon: bool = False
    endpoint_url: str | None = None
    verbose: int = 0
    quiet: bool = False
    json: bool = False
    stores: list[Store] = field(default_factory=list)

    def storage_options(self, url: str, options: dict[str, Any] | None = None) -> dict[str, Any] | None:
        """``storage_options`` for ``url``: ``-S`` values plus ``--anon``/``--endpoint-url`` in the
        spelling of that URL's filesystem; ``None`` for local, memory and zip URLs (which take none)."""
        scheme = _scheme(url)
        if "::" not in url and scheme in _LOCAL_SCHEMES:
            return None
        result = dict(self.options if options is None else options)
        if self.anon:
            if scheme in _GCS_SCHEMES:
                result["token"] = "anon"
            elif scheme in _S3_SCHEMES:
                result["anon"] = True
        if self.endpoint_url and (scheme in _S3_SCHEMES or scheme in _GCS_SCHEMES):
            result["endpoint_url"] = self.endpoint_url
        return result or None

    def store(self, url: str, *, read_only: bool = True, options: dict[str, Any] | None = None) -> Store:
        """Open the store ``url`` names (closed when the command ends)."""
        store = azarr.from_url(url, storage_options=self.storage_options(url, options), read_only=read_only)
        self.stores.append(store)
        return store

    def output(self, data: Any, text: str | None = None) -> None:
        """Print the command's result: ``data`` as JSON with ``--json``, else ``text``."""
        if self.json:
            click.echo(json.dumps(data, indent=2, default=_json_default))
        elif text is not None:
            click.echo(text)

    def note(self, message: str) -> None:
        """A side message on stderr (silenced by ``-q`` and ``--json``)."""
        if not self.quiet and not self.json:
            click.echo(message, err=True)

    async def aclose(self) -> None:
        for store in self.stores:
            try:
                await store.close()
            except Exception as exc:  # closing must not hide the command's own result
                logging.getLogger("azarr.cli").debug("closing %s: %s", store.url, exc)


def _json_default(value: Any) -> Any:
    if hasattr(value, "tolist"):  # numpy scalars and arrays
        return value.tolist()
    if isinstance(value, bytes):
        return value.hex()
    return str(value)


def common_options(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Add ``-S``, ``--anon``, ``--endpoint-url``, ``-v``, ``-q`` and ``--json`` to a command."""
    decorators = [
        click.option(
            "-S",
            "--storage-option",
            "storage_option",
            multiple=True,
            metavar="KEY=VALUE",
            help="fsspec storage_options entry (repeatable); VALUE is parsed as JSON when it can be.",
        ),
        click.option("--anon", is_flag=True, help="Anonymous access (S3 anon=True, GCS token='anon')."),
        click.option(
            "--endpoint-url", metavar="URL", help="S3/GCS endpoint (MinIO, SeaweedFS, R2, emulators)."
        ),
        click.option(
            "-v",
            "--verbose",
            count=True,
            help="More logging: -v azarr's at INFO and tracebacks, -vv azarr's at DEBUG, -vvv every library's; credentials are redacted.",
        ),
        click.option("-q", "--quiet", is_flag=True, help="No progress bars or notes."),
        click.option("--json", "as_json", is_flag=True, help="Machine-readable output on stdout."),
    ]
    for decorate in reversed(decorators):
        fn = decorate(fn)
    return fn


def command(name: str) -> Callable[[CommandFn], click.Command]:
    """Register ``async def fn(session, **params)`` as the subcommand ``name``."""

    def register(fn: CommandFn) -> click.Command:
        @functools.wraps(fn)
        def callback(**params: Any) -> None:
            session = Session(
                options=dict(parse_option(o) for o in params.pop("storage_option")),
                anon=params.pop("anon"),
                endpoint_url=params.pop("endpoint_url"),
                verbose=params.pop("verbose"),
                quiet=params.pop("quiet"),
                json=params.pop("as_json"),
            )
            run(session, fn, params)

        return cli.command(name)(common_options(callback))

    return register


def run(session: Session, fn: CommandFn, params: dict[str, Any]) -> None:
    """Run one command's coroutine; failures become one line on stderr and exit status 1."""
    restore_logging = _log_to_stderr(session.verbose) if session.verbose else None

    async def body() -> None:
        try:
            await fn(session, **params)
        finally:
            await session.aclose()

    try:
        asyncio.run(body())
    except (click.ClickException, click.exceptions.Exit, click.Abort):
        raise
    except CommandFailed:
        sys.exit(1)
    except KeyboardInterrupt:
        click.echo("azarr: interrupted", err=True)
        sys.exit(130)
    except Exception as exc:
        fail(session, exc)
    finally:
        if restore_logging is not None:
            restore_logging()


def _log_to_stderr(verbose: int) -> Callable[[], None]:
    """Logging for ``-v`` (azarr's loggers at INFO), ``-vv`` (at DEBUG) and ``-vvv`` (every
    library's too: botocore, aiohttp, s3fs), each record passed through the redaction that
    removes credentials (botocore logs signed headers and session tokens at DEBUG)."""
    from azarr.storage._redact import RedactingFilter

    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter(logging.BASIC_FORMAT))
    handler.addFilter(RedactingFilter())
    root, own = logging.getLogger(), logging.getLogger("azarr")
    levels = (root.level, own.level)
    root.addHandler(handler)
    if verbose >= 3:
        root.setLevel(logging.DEBUG)
    own.setLevel(logging.DEBUG if verbose >= 2 else logging.INFO)

    def restore() -> None:  # the command ran in this process's logging (tests, embedding)
        root.removeHandler(handler)
        root.setLevel(levels[0])
        own.setLevel(levels[1])

    return restore


def fail(session: Session, exc: BaseException) -> NoReturn:
    """Report ``exc`` as ``azarr: error: <Type>: <message>`` (one line) and exit 1.

    With ``-v`` the traceback comes first; both are redacted (`redact_text`): a
    chained backend error may quote a URL with a password or a signed header.
    """
    from azarr.storage._redact import redact_text, scrub_exception

    scrub_exception(exc)
    if session.verbose:
        sys.stderr.write(redact_text("".join(traceback.format_exception(exc))))
    message = redact_text(" ".join(str(exc).split()) or repr(exc))
    click.echo(f"azarr: error: {type(exc).__name__}: {message}", err=True)
    sys.exit(1)


class CommandFailed(Exception):
    """A command found problems (``verify``) and has already reported them: exit 1."""
