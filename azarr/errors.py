"""The azarr exception tree.

Callers catch at the level they care about (the httpx pattern):

    AzarrError
    ├── MetadataError            malformed / invalid .zarray, .zgroup, .zattrs, .zmetadata
    │   └── ConsolidatedMetadataNotFoundError  no .zmetadata where one was expected
    ├── CodecError               unknown codec id, failed encode/decode, corrupt chunk bytes
    │   ├── UnsafeCodecError     a pickle-based codec used without explicit opt-in
    │   └── ShardIndexError      a corrupt or hostile shard index (also a ValueError)
    ├── StoreError               anything a store backend reported
    │   ├── InvalidKeyError      unsafe or malformed key (also a ValueError)
    │   ├── ReadOnlyError        write attempted on a read-only store / array / group
    │   ├── PermissionDeniedError  the backend refused (HTTP 403, EACCES)
    │   ├── StoreUnavailableError  server down, bucket missing, connection refused
    │   ├── BodyTooLargeError      a response body larger than the value it answers can be
    │   └── TransientStoreError    worth retrying: HTTP 5xx/408, connection reset, read timeout
    │       ├── ResponseIntegrityError  a ranged answer holds other bytes than those asked for
    │       ├── ThrottledError     the backend asked us to slow down (S3 503 SlowDown, GCS 429)
    │       ├── StoreTimeoutError  a request exceeded azarr's per-request timeout
    │       └── ConnectionFailedError  connection refused/reset (also a StoreUnavailableError)
    │   └── KeyExistsError         copy_store found keys in the destination (if_exists="raise")
    │   ├── PreconditionFailedError  a conditional write/read found another generation (S3/HTTP 412)
    │   ├── ByteRangeError         a byte range names bytes past the end of its object (also a ValueError)
    │   ├── InvalidReferenceError  a malformed or hostile kerchunk reference (also a ValueError)
    │   │   ├── ReferenceTargetError  a reference names a URL outside the allowed targets (also a PermissionError)
    │   │   └── ReferenceSetNotFoundError  nothing stored at a reference set's URL (also a FileNotFoundError)
    │   ├── RepositoryError        an Icechunk repository could not be opened or read
    │   │   ├── RepositoryNotFoundError  no repository at the URL (also a FileNotFoundError)
    │   │   ├── RefNotFoundError   no such branch, tag or snapshot (also a FileNotFoundError)
    │   │   └── CorruptRepositoryError  a repository file missing or unreadable (also a ValueError)
    │   └── ConsistencyUnsupportedError  conditional operations asked of a store that has none
    ├── RetriesExhaustedError    a transient error persisted through every retry (chains the last one)
    ├── ContainsArrayError       a node that must not exist is an array (zarr-python 2 name)
    ├── ContainsGroupError       a node that must not exist is a group (zarr-python 2 name)
    ├── ArrayNotFoundError       no array at a path (also a KeyError-free FileNotFoundError)
    └── GroupNotFoundError       no group at a path

Every error names the key, path or URL it is about and the cause.

Errors that zarr-python 2 also raises keep its built-in bases beside azarr's, so
``except`` clauses written for zarr 2 catch them: ``ContainsArrayError``,
``ContainsGroupError``, ``ArrayNotFoundError`` and ``GroupNotFoundError`` are
``ValueError`` s (as zarr 2's, which derive from ``ValueError``), ``ReadOnlyError`` a
``PermissionError``, ``CopyError`` a ``RuntimeError``, ``MetadataError`` an
``Exception`` (here also a ``ValueError``) and the indexing errors ``IndexError`` s.
"""

from __future__ import annotations


class AzarrError(Exception):
    """Base class of every error azarr raises on purpose.

    Messages pass through azarr's one redaction (``azarr/storage/_redact.py``,
    `redact_text`) when the error is made: URL user info, ``Authorization`` and
    signed headers, query-string signatures and the credentials of every store
    opened in this process never appear in ``str`` or ``repr`` of an azarr error.
    """

    def __init__(self, *args: object) -> None:
        if any(isinstance(arg, str) for arg in args):
            from azarr.storage._redact import redact_text  # lazy: storage imports this module

            args = tuple(redact_text(arg) if isinstance(arg, str) else arg for arg in args)
        super().__init__(*args)


class MetadataError(AzarrError, ValueError):
    """A metadata document (``.zarray``, ``.zgroup``, ``.zattrs``, ``.zmetadata``) is invalid.

    The message names the store key and the offending field, e.g.
    ``"'a/.zarray': 'shape' must be a list of non-negative integers, got [-1]"``.
    """


class ConsolidatedMetadataNotFoundError(MetadataError, FileNotFoundError):
    """``open_consolidated`` found no ``.zmetadata`` document (run ``consolidate_metadata`` first)."""


class CodecError(AzarrError):
    """A codec could not be resolved, or a chunk failed to encode or decode.

    Decoding errors name the chunk key, so corrupt or truncated chunks are traceable.
    """


class UnsafeCodecError(CodecError):
    """A pickle-based codec would run on data, and the caller did not opt in.

    Opt in with ``allow_pickle=True`` on ``open``/``open_array``/``create`` (or
    ``azarr.config.set(allow_pickle=True)``) for data you trust.
    """


class ShardIndexError(CodecError, ValueError):
    """A shard's index (Zarr v3 ``sharding_indexed``) is corrupt or hostile.

    The wrong size, a checksum that does not match, an entry with only one of its
    offset and length empty (2^64-1), an inner chunk claiming more bytes than its
    codecs can produce, or one pointing into the index, past the shard's end or over
    another inner chunk. Raised before any inner chunk is decoded or any memory is
    sized from the index; the message names the shard key and the inner chunk.
    """


class StoreError(AzarrError):
    """A store backend failed; the message names the store URL and key."""


class InvalidKeyError(StoreError, ValueError):
    """A key is unsafe or malformed (``..``/``.`` segments, absolute path, backslash, empty segment).

    Zarr v2 spec, "Logical storage paths".
    """


class ReadOnlyError(StoreError, PermissionError):
    """A write was attempted on something opened read-only (mode ``'r'``, HTTP stores, consolidated structure)."""


class PermissionDeniedError(StoreError, PermissionError):
    """The backend refused access (HTTP 403, S3 AccessDenied, filesystem EACCES)."""


class StoreUnavailableError(StoreError, ConnectionError):
    """The backend cannot be reached or does not exist (server down, missing bucket)."""


class TransientStoreError(StoreError):
    """A store request failed in a way that may succeed when retried.

    HTTP 5xx and 408 responses, dropped connections, read timeouts. The
    scheduler retries these with exponential backoff and full jitter
    (``azarr.scheduler.RetryPolicy``); other store errors fail at once.
    """


class ResponseIntegrityError(TransientStoreError):
    """A server answered a read with other bytes than those asked for (retried).

    A ``206 Partial Content`` whose ``Content-Range`` does not start, end or total
    where the request's ``Range`` said, or whose body length differs from it; a
    ``206`` to a request without ``Range``. A cache or proxy in between can do
    this; the answer is never returned as data. The message names the key, what
    was asked for and what came.
    """


class ThrottledError(TransientStoreError):
    """The backend asked the client to slow down (S3 ``503 SlowDown``, GCS/HTTP ``429``)."""


class StoreTimeoutError(TransientStoreError, TimeoutError):
    """A request took longer than the per-request timeout (a stalled or slow server)."""


class ConnectionFailedError(TransientStoreError, StoreUnavailableError):
    """The connection to the backend was refused or dropped; retried, then reported as unavailable."""


class BodyTooLargeError(StoreError):
    """A response body is larger than what it answers can be, and was not read.

    Every body is bounded before it is buffered: a chunk by its codec's largest
    encoded size (never above ``max_chunk_bytes``), a metadata document by
    ``max_metadata_bytes``, a byte range by its length, an error body by a few
    KiB (`azarr.config`). A declared ``Content-Length`` above the bound is
    refused before anything is allocated; a body without one (chunked, or
    decompressed from a ``Content-Encoding``) stops at the bound. The message
    names the key, the declared (or received) size and the limit.

    Attributes
    ----------
    declared : int or None
        The size the server declared (``Content-Length``), or None.
    limit : int
        The bound in bytes.
    """

    def __init__(self, message: str, *, declared: int | None = None, limit: int = 0) -> None:
        super().__init__(message)
        self.declared = declared
        self.limit = limit

    def __reduce__(self) -> tuple[object, ...]:
        return (_body_too_large, (self.args[0] if self.args else "", self.declared, self.limit))


def _body_too_large(message: str, declared: int | None, limit: int) -> BodyTooLargeError:
    return BodyTooLargeError(message, declared=declared, limit=limit)


class RetriesExhaustedError(StoreError):
    """A transient store error persisted through every attempt of the retry policy.

    The message names the key, the number of attempts and the last error,
    which is also chained as ``__cause__``.
    """


class KeyExistsError(StoreError, FileExistsError):
    """A key to be written already exists and overwriting was not asked for (``copy_store``)."""


class ChunkNotFoundError(AzarrError, FileNotFoundError):
    """A read needed a chunk that is not stored, and missing chunks were not to read as the fill value.

    Raised only for arrays opened with ``fill_missing_data_reads=False`` (TensorStore's option).
    """


class CopyError(AzarrError, RuntimeError):
    """``copy``/``copy_all`` found a node in the way and ``if_exists="raise"`` (zarr-python 2: ``CopyError``)."""


class PreconditionFailedError(StoreError):
    """A conditional operation found the key at another generation than the one required.

    Raised by ``set(..., if_generation_match=g)`` when the stored object changed
    since generation ``g`` was read, by ``set(..., if_not_exists=True)`` when the
    key exists, and by reads pinned to a generation (S3 ``412 Precondition
    Failed``, GCS ``conditionNotMet``). Read-modify-write loops catch it, re-read
    and try again; see ``docs/consistency.md``.
    """


class ByteRangeError(StoreError, ValueError):
    """A byte range of an object reaches past its end (a reference or shard index pointing
    beyond the data); the message names the object and the range."""


class InvalidReferenceError(StoreError, ValueError):
    """A kerchunk reference set, or one reference in it, is malformed or hostile.

    A negative offset or length, an entry that is neither data nor ``[url]`` /
    ``[url, offset, length]``, a template that does not resolve, more references
    than ``azarr.config`` ``reference_max_refs``, a reference file larger than
    ``reference_max_bytes``. The message names the reference key and the cause.
    """


class ReferenceTargetError(InvalidReferenceError, PermissionError):
    """A reference names a target URL outside the allowed set (another scheme or host,
    ``..`` segments); see ``azarr.config`` ``reference_allowed_targets``."""


class ReferenceSetNotFoundError(InvalidReferenceError, FileNotFoundError):
    """Nothing is stored at a reference set's URL: no JSON reference file, and no Parquet
    reference directory (a ``.zmetadata`` with a ``record_size``) either; fsspec's
    ``ReferenceFileSystem`` raises ``FileNotFoundError`` here."""


class RepositoryError(StoreError):
    """An Icechunk repository could not be opened or read (`azarr.storage.IcechunkStore`);
    the message names the repository, the branch, tag or snapshot, and icechunk's cause."""


class RepositoryNotFoundError(RepositoryError, FileNotFoundError):
    """No Icechunk repository at the URL (icechunk: ``RepositoryNotFoundError``)."""


class RefNotFoundError(RepositoryError, FileNotFoundError):
    """The repository has no such branch, tag or snapshot (icechunk: ``RefNotFoundError``,
    ``SnapshotNotFoundError``, an invalid snapshot id)."""


class CorruptRepositoryError(RepositoryError, ValueError):
    """A repository file is missing or unreadable: a snapshot, manifest or ref that does not
    parse, or that the repository names but storage does not hold (icechunk: ``FormatError``)."""


class ConsistencyUnsupportedError(StoreError, NotImplementedError):
    """The store cannot do conditional writes, and the caller required them.

    Raised for ``set(..., if_generation_match=...)`` on a store whose
    ``supports_conditional_writes`` is False (HTTP, plain mappings, generic
    fsspec, the s3fs transport), and by writes with ``require_consistency=True``
    there.
    """


class ContainsArrayError(AzarrError, FileExistsError, ValueError):
    """An array exists at a path where a new node was to be created (zarr-python 2: ``ContainsArrayError``)."""


class ContainsGroupError(AzarrError, FileExistsError, ValueError):
    """A group exists at a path where a new node was to be created (zarr-python 2: ``ContainsGroupError``)."""


class ArrayNotFoundError(AzarrError, FileNotFoundError, ValueError):
    """No array at the requested path (zarr-python 2: ``ArrayNotFoundError``)."""


class GroupNotFoundError(AzarrError, FileNotFoundError, ValueError):
    """No group at the requested path (zarr-python 2: ``GroupNotFoundError``)."""


class NodeNotFoundError(AzarrError, KeyError):
    """``group.get(name)`` / ``group[name]`` found neither an array nor a group."""

    def __str__(self) -> str:  # KeyError quotes its argument; keep the message readable
        return str(self.args[0]) if self.args else ""


class PathNotFoundError(NodeNotFoundError, ValueError):
    """Nothing at a path where zarr-python 2 raises its ``PathNotFoundError`` (a ``ValueError``): the source of ``Group.move``."""


class CopyKeyExistsError(KeyExistsError, CopyError):
    """``copy_store`` found keys in the destination (``if_exists="raise"``): a `KeyExistsError` and zarr-python 2's ``CopyError``."""


class DeleteUnsupportedError(StoreError, NotImplementedError):
    """The store cannot remove keys (entries of a zip archive); zarr-python 2 raises ``NotImplementedError`` there."""
