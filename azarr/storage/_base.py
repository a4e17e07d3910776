"""The one async store protocol every azarr store implements.

A store maps string keys (``"a/b/.zarray"``, ``"a/b/0.0"``) to bytes. Everything
above it (scheduler, codecs, arrays) speaks only this interface, so the same
code runs on memory, a local directory, S3, GCS or HTTP. Modelled on
zarr-python 3's ``zarr.abc.store.Store`` with zarr-python 2's key rules.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from dataclasses import dataclass
from types import TracebackType
from typing import Any, ClassVar, Self, TypeAlias

from azarr.errors import ConsistencyUnsupportedError, InvalidKeyError, ReadOnlyError
from azarr.storage._spec import StoreSpec, reopen

#: An opaque token naming one stored version of a key: the S3 ETag, the GCS
#: ``generation``, a local file's identity, a memory store's value object. Only
#: ever compared by the store that issued it (see ``docs/consistency.md``).
Generation: TypeAlias = object


@dataclass(frozen=True, slots=True)
class ByteRange:
    """A byte range of a stored value: ``[start, end)``.

    Parameters
    ----------
    start : int
        First byte, >= 0. A negative ``start`` with ``end=None`` means a suffix
        (the last ``-start`` bytes), like HTTP ``Range: bytes=-N``.
    end : int or None
        One past the last byte; ``None`` reads to the end of the value.
    """

    start: int = 0
    end: int | None = None

    def __post_init__(self) -> None:
        if self.end is not None and (self.start < 0 or self.end < self.start):
            raise ValueError(f"invalid byte range [{self.start}, {self.end})")

    @property
    def is_suffix(self) -> bool:
        """True for a suffix request (the last ``-start`` bytes)."""
        return self.start < 0

    @property
    def is_empty(self) -> bool:
        """True when the range can only ever select zero bytes (``start == end``)."""
        return self.end is not None and self.end == self.start

    def slice(self) -> slice:
        """The equivalent Python slice over the whole value."""
        return slice(self.start, self.end)

    def apply(self, value: bytes) -> bytes:
        """Select this range from a whole ``value`` with every store's semantics.

        Like Python slicing: a range reaching past the end is truncated, a range
        starting at or past the end selects ``b""``, and a suffix longer than the
        value selects all of it.
        """
        return value[self.slice()]


def validate_key(key: str, *, allow_empty: bool = False) -> str:
    """Check a store key against the Zarr v2 spec's "Logical storage paths" rules.

    Parameters
    ----------
    key : str
        ``/``-separated key such as ``"group/array/0.0"``.
    allow_empty : bool
        Accept ``""`` (the root prefix) — used by listing, never by get/set.

    Returns
    -------
    str
        The key unchanged.

    Raises
    ------
    InvalidKeyError
        Empty key, leading ``/`` (absolute), backslash, empty segment (``a//b``),
        ``.`` or ``..`` segment, or a NUL character. The message names the key.
    """
    if (
        type(key) is str
        and key
        and key[0] not in "/."
        and key[-1] != "/"
        and "//" not in key
        and "/." not in key
        and "\\" not in key
        and "\x00" not in key
    ):
        # The common key (every chunk key of a read): no segment can be empty, "." or "..",
        # as each would need a leading "/" or ".", a "//", a "/." or a trailing "/". Keys
        # with a segment starting with "." (".zarray", "a/.zattrs") take the full check.
        return key
    if not isinstance(key, str):
        raise InvalidKeyError(f"store key must be a str, got {type(key).__name__}: {key!r}")
    if key == "":
        if allow_empty:
            return key
        raise InvalidKeyError("store key must not be empty")
    if key.startswith("/"):
        raise InvalidKeyError(f"unsafe store key {key!r}: absolute paths are not allowed")
    if "\\" in key:
        raise InvalidKeyError(f"unsafe store key {key!r}: backslashes are not allowed")
    if "\x00" in key:
        raise InvalidKeyError(f"unsafe store key {key!r}: NUL characters are not allowed")
    body = key[:-1] if (allow_empty and key.endswith("/")) else key
    for segment in body.split("/"):
        if segment == "":
            raise InvalidKeyError(f"unsafe store key {key!r}: empty path segment")
        if segment in (".", ".."):
            raise InvalidKeyError(f"unsafe store key {key!r}: '{segment}' segments are not allowed")
    return key


def normalize_prefix(prefix: str) -> str:
    """Normalize a listing prefix to ``""`` or ``"a/b/"`` (validated, trailing slash)."""
    prefix = prefix.strip("/") if prefix not in ("", "/") else ""
    if prefix:
        validate_key(prefix)
        prefix += "/"
    return prefix


class Store(ABC):
    """Abstract async key-value store holding a Zarr hierarchy.

    Subclasses implement the ``_get``/``_set``/... primitives; the public
    methods here validate keys and enforce read-only mode, so every store
    shares the same safety rules.

    Attributes
    ----------
    read_only : bool
        True when writes raise `ReadOnlyError`.
    supports_writes, supports_deletes, supports_listing : bool
        Capability flags (``False`` for e.g. HTTP stores without listings).
    url : str
        Human-readable location used in error messages (``"s3://bucket/x.zarr"``).
    """

    supports_writes: bool = True
    supports_deletes: bool = True
    supports_listing: bool = True
    #: True for stores on this machine (memory, local files): they get a smaller
    #: default request budget (``azarr.config`` ``max_concurrency_local``).
    is_local: bool = False
    #: Requests in flight the backend tolerates at most (a store over a
    #: single-threaded mapping, a zip file); None: ``azarr.config``'s default for
    #: local or remote stores. Read by `azarr.scheduler.budget_for`.
    max_requests: int | None = None
    #: True for stores that hold metadata documents already decoded (the
    #: consolidated-metadata overlay): `get_document` answers without I/O.
    serves_documents: ClassVar[bool] = False
    #: True for stores whose keys are byte ranges of other stores' objects (kerchunk
    #: references, `ReferenceStore`): `StoreIO` reads them from their targets'
    #: managed paths, and the chunk pipeline coalesces neighbouring ranges.
    resolves_references: bool = False
    #: True for stores that store a translated ``.zarray`` (the N5 adapter): creation
    #: reads the document back rather than trusting the one it wrote.
    rewrites_metadata: ClassVar[bool] = False
    #: True for stores that return generations (`get_with_generation`) and
    #: honour ``if_generation_match``/``if_not_exists`` on `set` and
    #: `delete` atomically: the basis of azarr's lost-update-free partial
    #: chunk writes, attribute updates, ``resize``/``append`` and ``mode="w-"``.
    supports_conditional_writes: bool = False
    #: True for stores whose ranged reads can be pinned to a generation
    #: (``get(..., if_generation_match=g)``), so a large object read as parallel
    #: ranges never mixes two versions.
    supports_conditional_reads: bool = False
    #: True for stores that send each written value's CRC-32C (`S3Store`'s PUTs): the
    #: write pipelines compute it in the codec thread that encoded the value and hand it
    #: over (`azarr.storage._body_checksum`), so the event loop does not.
    wants_body_crc32c: bool = False

    #: True for stores whose get/set/delete are cheap, synchronous and thread-safe
    #: (memory, local files): `get_blocking`, `set_blocking` and
    #: `delete_blocking` work, and the chunk pipeline reads, decodes and
    #: scatters (or merges, encodes and stores) batches of chunks in one codec-pool
    #: job instead of one coroutine, store call and thread hop per chunk (what
    #: zarr-python 2's synchronous loop and TensorStore's file driver avoid too).
    #: A subclass overriding ``_get``/``_set``/``_delete`` loses it unless it
    #: declares it again (its blocking twins would bypass the override).
    supports_blocking_io: bool = False
    #: True when ``_set_blocking`` is done with ``value`` when it returns (it writes the
    #: bytes somewhere, as a file store does, and keeps no reference): `set_blocking`
    #: then passes a caller's ``memoryview`` through with no copy. Otherwise (a memory
    #: store keeps the object) the value is copied to ``bytes`` first, so a later change
    #: to the caller's buffer never changes what was stored. A subclass overriding
    #: ``_set_blocking`` loses it unless it declares it again.
    _set_blocking_takes_buffers: ClassVar[bool] = False
    #: True when `readinto_blocking` reads a value straight into the caller's buffers (a
    #: file store's ``preadv``); otherwise it reads ``bytes`` and copies them, which gains
    #: a caller nothing over `get_blocking`. A subclass overriding ``_get`` or
    #: ``_get_blocking`` loses it unless it declares it again.
    reads_into_buffers: ClassVar[bool] = False
    #: True when `read_ahead_blocking` starts fetching values before they are read (a file
    #: store opens the files and asks the kernel to read them, ``posix_fadvise``
    #: ``WILLNEED``); otherwise it does nothing and callers need not call it. A subclass
    #: overriding ``_get`` or ``_get_blocking`` loses it unless it declares it again.
    reads_ahead: ClassVar[bool] = False
    #: The chunk-key separator (``"."`` or ``"/"``) of arrays created in this store
    #: without ``dimension_separator=``: zarr-python 2's store option of that name
    #: (``key_separator`` of its ``FSStore``). None means ``"."``.
    dimension_separator: str | None = None

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if "_get" in cls.__dict__ and "_get_into" not in cls.__dict__:
            # An inherited _get_into would bypass this class's own reads.
            cls._get_into = Store._get_into  # type: ignore[method-assign]
        if "supports_blocking_io" not in cls.__dict__ and any(
            name in cls.__dict__ for name in ("_get", "_set", "_delete")
        ):
            cls.supports_blocking_io = False
        if "_set_blocking_takes_buffers" not in cls.__dict__ and "_set_blocking" in cls.__dict__:
            cls._set_blocking_takes_buffers = False
        if any(name in cls.__dict__ for name in ("_get", "_get_blocking")):
            # Both describe how the inherited reads work: a class with its own reads
            # declares them again, or has neither.
            for flag in ("reads_into_buffers", "reads_ahead"):
                if flag not in cls.__dict__:
                    setattr(cls, flag, False)

    def __init__(self, *, read_only: bool = False) -> None:
        self.read_only = read_only
        self._spec: StoreSpec | None = None

    # ------------------------------------------------------------------ identity
    @property
    @abstractmethod
    def url(self) -> str:
        """Location of the store root, for messages (no credentials)."""

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.url!r}{', read_only=True' if self.read_only else ''})"

    @property
    def spec(self) -> StoreSpec:
        """The configuration identifying this store (`StoreSpec`).

        Frozen, hashable and picklable; the store pickles as its spec, and budgets
        and traffic counters are kept per spec.
        """
        if self._spec is None:
            self._spec = self._make_spec()
        return self._spec

    @abstractmethod
    def _make_spec(self) -> StoreSpec:
        """This store's spec, built once from its configuration."""

    @property
    def budget_key(self) -> StoreSpec:
        """What this store's request budget and counters are kept under.

        Its own spec; a wrapper (`WrapperStore`) answers with
        the wrapped store's key, so wrapping never multiplies the connection limit.
        """
        return self.spec

    @classmethod
    def spec_from_url(cls, url: str, storage_options: Mapping[str, Any] | None) -> StoreSpec:
        """The spec of ``url`` for this driver (no I/O); drivers reachable by URL override it.

        Raises
        ------
        ValueError
            This driver is not opened from URLs.
        """
        raise ValueError(f"{cls.__qualname__} is not opened from URLs (got {url!r})")

    @classmethod
    def from_spec(cls, spec: StoreSpec) -> Self:
        """A new live store for ``spec`` (no I/O): ``cls(spec.root, storage_options=..., **params)``.

        Drivers whose constructor differs override it.
        """
        return cls(spec.root, storage_options=spec.storage_options(), **spec.constructor_params())  # type: ignore[call-arg, arg-type]

    def __reduce__(self) -> tuple[Any, ...]:
        """Pickle as the spec: the copy is the live store of that spec in its process."""
        return (reopen, (type(self), self.spec, self.read_only))

    # ------------------------------------------------------------------ public API
    async def get(
        self, key: str, byte_range: ByteRange | None = None, *, if_generation_match: Generation | None = None
    ) -> bytes | None:
        """Read the value stored at ``key``.

        Parameters
        ----------
        key : str
            Store key (validated, see `validate_key`).
        byte_range : ByteRange, optional
            Read only part of the value (bytes ``[start, end)``, or the last
            ``-start`` bytes). Out-of-range requests follow Python slicing
            (`ByteRange.apply`): truncated, or ``b""`` -- never an error.
        if_generation_match : Generation, optional
            Read only if the stored object is still this generation (S3
            ``If-Match``); only on stores with `supports_conditional_reads`.

        Returns
        -------
        bytes or None
            The value (or the requested part of it); ``None`` if the key is missing.

        Raises
        ------
        InvalidKeyError
            The key is unsafe.
        PreconditionFailedError
            ``if_generation_match`` was given and the object changed or vanished.
        ConsistencyUnsupportedError
            ``if_generation_match`` on a store without conditional reads.
        StoreError
            The backend failed; the message names the key and store URL.
        """
        validate_key(key)
        if if_generation_match is None:
            return await self._get(key, byte_range)
        if not self.supports_conditional_reads:
            raise ConsistencyUnsupportedError(
                f"cannot read {key!r} pinned to a generation: {self.url} has no conditional reads"
            )
        return await self._get_if_match(key, byte_range, if_generation_match)

    async def get_into(self, key: str, allocate: Callable[[int], memoryview]) -> bytes | memoryview | None:
        """Read the whole value at ``key``, received into ``allocate(size)`` where the driver can.

        For callers that reuse receive buffers (the chunk pipeline's
        `BODY_BUFFERS`): a driver that knows the size
        before the body arrives (S3's ``Content-Length``) writes the body into the
        buffer ``allocate`` returns, instead of a new ``bytes`` object. Other drivers,
        and subclasses that override ``_get``, return ``bytes`` as `get` does.

        Parameters
        ----------
        key : str
            Store key (validated, see `validate_key`).
        allocate : callable
            ``allocate(nbytes)`` -> a writable ``memoryview`` of exactly ``nbytes`` bytes.

        Returns
        -------
        bytes, memoryview or None
            The value (a view returned by ``allocate``, or ``bytes``); None if missing.

        Raises
        ------
        InvalidKeyError, StoreError
            As `get`.
        """
        validate_key(key)
        return await self._get_into(key, allocate)

    async def get_with_generation(
        self, key: str, byte_range: ByteRange | None = None
    ) -> tuple[bytes | None, Generation | None]:
        """Read ``key`` (or a byte range of it) and the generation of the value read (one request).

        Parameters
        ----------
        key : str
            Store key (validated, see `validate_key`).
        byte_range : ByteRange, optional
            Read only part of the value, as `get` does (a suffix range too: how a
            shard index stored at the end is read). The generation is the whole
            object's, so later ranged reads can be pinned to it
            (``get(..., if_generation_match=g)``): a shard's index and its inner
            chunks are then one version.

        Returns
        -------
        (bytes or None, Generation or None)
            The value or part (None if missing) and its generation; the generation is None
            for a missing key and on stores without `supports_conditional_writes`.
        """
        validate_key(key)
        if not self.supports_conditional_writes:
            return await self._get(key, byte_range), None
        if byte_range is None:
            return await self._get_with_generation(key)
        return await self._get_range_with_generation(key, byte_range)

    async def stat(self, key: str) -> tuple[int, Generation | None] | None:
        """Size in bytes and generation of ``key``; None if it is missing (one ``HEAD``).

        The generation is None on stores without `supports_conditional_reads`.
        """
        validate_key(key)
        return await self._stat(key)

    async def set(
        self,
        key: str,
        value: bytes | bytearray | memoryview,
        *,
        if_generation_match: Generation | None = None,
        if_not_exists: bool = False,
    ) -> None:
        """Store ``value`` (any bytes-like object) at ``key``, replacing any previous value atomically.

        Parameters
        ----------
        key : str
            Store key (validated).
        value : bytes-like
            The new value.
        if_generation_match : Generation, optional
            Write only if the stored value is still this generation (from
            `get_with_generation`): S3 ``If-Match``, GCS
            ``ifGenerationMatch``.
        if_not_exists : bool
            Write only if the key does not exist (S3 ``If-None-Match: *``, GCS
            ``ifGenerationMatch=0``, ``O_EXCL`` locally).

        Raises
        ------
        ReadOnlyError
            The store was opened read-only.
        InvalidKeyError
            The key is unsafe.
        PreconditionFailedError
            A condition did not hold; nothing was written.
        ConsistencyUnsupportedError
            A condition was given and the store has no conditional writes
            (`supports_conditional_writes`).
        """
        self._check_writable(key)
        validate_key(key)
        data = bytes(value) if not isinstance(value, bytes) else value
        if if_generation_match is None and not if_not_exists:
            await self._set(key, data)
            return
        if if_generation_match is not None and if_not_exists:
            raise ValueError("pass if_generation_match or if_not_exists, not both")
        self._check_conditional(key)
        await self._set_if(key, data, if_generation_match)

    async def delete(self, key: str, *, if_generation_match: Generation | None = None) -> None:
        """Delete ``key``; deleting a missing key is not an error.

        With ``if_generation_match``, delete only if the stored value is still that
        generation (else `PreconditionFailedError`).
        """
        self._check_writable(key)
        validate_key(key)
        if if_generation_match is None:
            await self._delete(key)
            return
        self._check_conditional(key)
        await self._delete_if(key, if_generation_match)

    async def delete_prefix(self, prefix: str) -> None:
        """Delete every key under ``prefix`` (``""`` clears the store).

        Like `list_prefix`, ``"a"`` means the keys ``a/...``: a value stored at
        ``"a"`` itself, and keys under ``"ab/"``, are kept.

        Raises
        ------
        ReadOnlyError
            The store was opened read-only.
        InvalidKeyError
            The prefix is unsafe.
        """
        self._check_writable(prefix)
        prefix = normalize_prefix(prefix)
        await self._delete_prefix(prefix)

    async def exists(self, key: str) -> bool:
        """True if ``key`` holds a value."""
        validate_key(key)
        return await self._exists(key)

    async def getsize(self, key: str) -> int:
        """Size of the value at ``key`` in bytes.

        Raises
        ------
        FileNotFoundError
            The key is missing.
        """
        validate_key(key)
        return await self._getsize(key)

    async def list_prefix(self, prefix: str) -> AsyncIterator[str]:
        """Yield every key (full key, not relative) that starts with ``prefix``.

        ``prefix`` is a path: ``"a"`` lists ``a/...`` but not ``ab/...``; ``""`` lists everything.
        """
        norm = normalize_prefix(prefix)
        async for key in self._list_prefix(norm):
            yield key

    async def list_dir(self, prefix: str) -> AsyncIterator[str]:
        """Yield the immediate children of ``prefix`` (names relative to it, no slash).

        A child is a key directly under the prefix, or a "directory" name that has
        keys beneath it — like ``os.listdir`` / zarr-python 2 ``listdir``.
        """
        norm = normalize_prefix(prefix)
        async for name in self._list_dir(norm):
            yield name

    async def close(self) -> None:  # noqa: B027 - optional hook: stores without sessions need nothing
        """Release connections and sessions. The store can be reopened by using it again."""

    def with_read_only(self, read_only: bool = True) -> Self:
        """A copy of this store sharing its data and connections, with another ``read_only``.

        Equivalent of zarr-python 3's ``Store.with_read_only``. The copy is cheap (no I/O).
        """
        # Not copy.copy(): stores pickle as their spec (dropping live
        # sessions, copying memory data), and this copy must share both.
        clone = object.__new__(type(self))
        clone.__dict__.update(self.__dict__)
        clone.read_only = read_only
        return clone

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()

    def get_document(self, key: str) -> Any | None:
        """The decoded metadata document at ``key`` (None if absent), without I/O.

        Only for stores that declare `serves_documents`; others raise.

        Raises
        ------
        NotImplementedError
            The store holds bytes only.
        """
        raise NotImplementedError(f"{type(self).__name__} does not serve decoded documents")

    async def revalidate(self) -> None:  # noqa: B027 - optional hook; only caches have state to recheck
        """Mark what the store cached as stale before an open (caches recheck; others do nothing)."""

    def _check_conditional(self, key: str) -> None:
        if not self.supports_conditional_writes:
            raise ConsistencyUnsupportedError(
                f"cannot write {key!r} conditionally: {type(self).__name__} {self.url} has no "
                "conditional writes (see docs/consistency.md)"
            )

    # ------------------------------------------------------------------ blocking access
    def get_blocking(self, key: str) -> bytes | None:
        """`get` without the event loop, for a worker thread (``supports_blocking_io`` stores).

        Raises
        ------
        NotImplementedError
            The store does not declare `supports_blocking_io`.
        InvalidKeyError, StoreError
            As `get`.
        """
        self._check_blocking(key)
        validate_key(key)
        return self._get_blocking(key)

    def readinto_blocking(self, key: str, buffers: Sequence[Any], nbytes: int) -> bool | None:
        """The whole value at ``key`` read into ``buffers``, in order, without the event loop.

        For readers that know a value's size and want its bytes in place (the chunk
        pipeline reads an uncompressed chunk straight into the rows of the caller's output
        array, as TensorStore's file driver reads into its chunk buffers): a file store
        reads with ``preadv`` and no intermediate copy (`reads_into_buffers`).

        Parameters
        ----------
        key : str
            Store key (validated).
        buffers : sequence of writable buffers
            Contiguous buffers (``bytearray``, NumPy arrays, ...), filled one after
            another in C order.
        nbytes : int
            Their sizes together: the size the caller expects the value to have.

        Returns
        -------
        bool or None
            True: the value is exactly ``nbytes`` long, and ``buffers`` hold it.
            False: it has another length (what ``buffers`` hold is then unspecified; a
            caller reads it with `get_blocking` to say what is wrong). None: no value.

        Raises
        ------
        NotImplementedError
            The store does not declare `supports_blocking_io`.
        InvalidKeyError, StoreError
            As `get`.
        """
        self._check_blocking(key)
        validate_key(key)
        return self._readinto_blocking(key, buffers, nbytes)

    def read_ahead_blocking(self, keys: Sequence[str]) -> None:
        """Start fetching the values at ``keys``, which this thread reads next.

        A hint for a thread that reads many values one after another (the chunk pipeline's
        batched jobs): a file store opens the files and asks the kernel to read them in the
        background (``posix_fadvise`` ``WILLNEED``), so a thread that reads them one at a
        time keeps many reads in flight on the device. The next `get_blocking` or
        `readinto_blocking` of such a key in the same thread reads the file opened here,
        and `end_read_ahead_blocking` closes those that were not read. Stores that do not
        declare `reads_ahead` do nothing. TensorStore's file driver gets the same depth
        from its many I/O threads (``file_io_concurrency``).

        Parameters
        ----------
        keys : sequence of str
            Store keys (validated); missing ones are skipped (their read says so).

        Raises
        ------
        NotImplementedError
            The store does not declare `supports_blocking_io`.
        InvalidKeyError
            A key is not a valid store key.
        """
        if not self.reads_ahead or not keys:
            return
        self._check_blocking(keys[0])
        for key in keys:
            validate_key(key)
        self._read_ahead_blocking(keys)

    def end_read_ahead_blocking(self) -> None:
        """Forget what `read_ahead_blocking` started in this thread and was not read (a file
        store closes the files it opened). Safe to call when nothing was started."""
        if self.reads_ahead:
            self._end_read_ahead_blocking()

    def set_blocking(self, key: str, value: bytes | memoryview) -> None:
        """`set` (unconditional) without the event loop, for a worker thread.

        Parameters
        ----------
        key : str
            Store key (validated).
        value : bytes or memoryview
            The new value. A ``memoryview`` (of a chunk's own memory, say; any
            shape and strides: its bytes in C order are the value) is written
            without a copy where the store allows it (local files) and copied to
            ``bytes`` where the store would keep it (memory): either way,
            changing the buffer after this returns changes nothing stored.

        Raises
        ------
        NotImplementedError
            The store does not declare `supports_blocking_io`.
        ReadOnlyError, InvalidKeyError, StoreError
            As `set`.
        """
        self._check_blocking_write(key)
        if type(value) is not bytes and not self._set_blocking_takes_buffers:
            value = bytes(value)
        self._set_blocking(key, value)

    def delete_blocking(self, key: str) -> None:
        """`delete` (unconditional) without the event loop, for a worker thread.

        Raises
        ------
        NotImplementedError
            The store does not declare `supports_blocking_io`.
        ReadOnlyError, InvalidKeyError, StoreError
            As `delete`.
        """
        self._check_blocking_write(key)
        self._delete_blocking(key)

    def _check_blocking_write(self, key: str) -> None:
        self._check_blocking(key)
        self._check_writable(key)
        validate_key(key)

    def _check_blocking(self, key: str) -> None:
        if not self.supports_blocking_io:
            raise NotImplementedError(f"{self.url} has no blocking access (for {key!r}); use the coroutines")

    def _get_blocking(self, key: str, byte_range: ByteRange | None = None) -> bytes | None:
        raise NotImplementedError

    def _set_blocking(self, key: str, value: bytes | memoryview) -> None:
        raise NotImplementedError

    def _read_ahead_blocking(self, keys: Sequence[str]) -> None:  # noqa: B027 - optional hook (reads_ahead)
        """Start fetching ``keys`` (stores that declare `reads_ahead` implement it)."""

    def _end_read_ahead_blocking(self) -> None:  # noqa: B027 - optional hook (reads_ahead)
        """Drop what `_read_ahead_blocking` started in this thread and was not read."""

    def _readinto_blocking(self, key: str, buffers: Sequence[Any], nbytes: int) -> bool | None:
        """`_get_blocking`, then the bytes copied into ``buffers`` (stores that read in place override it)."""
        data = self._get_blocking(key)
        if data is None:
            return None
        if len(data) != nbytes:
            return False
        source, done = memoryview(data), 0
        for view in (memoryview(b).cast("B") for b in buffers):
            view[:] = source[done : done + view.nbytes]
            done += view.nbytes
        return True

    def _delete_blocking(self, key: str) -> None:
        raise NotImplementedError

    def _check_writable(self, key: str) -> None:
        if self.read_only or not self.supports_writes:
            raise ReadOnlyError(f"cannot write {key!r}: store {self.url} is read-only")

    # ------------------------------------------------------------------ primitives
    @abstractmethod
    async def _get(self, key: str, byte_range: ByteRange | None) -> bytes | None: ...

    async def _get_into(self, key: str, allocate: Callable[[int], memoryview]) -> bytes | memoryview | None:
        """Drivers that can receive a body into a given buffer override this."""
        return await self._get(key, None)

    @abstractmethod
    async def _set(self, key: str, value: bytes) -> None: ...

    @abstractmethod
    async def _delete(self, key: str) -> None: ...

    # Conditional primitives: stores declaring ``supports_conditional_writes`` /
    # ``supports_conditional_reads`` override them. ``_set_if`` with generation
    # None means "only if the key does not exist".
    async def _get_with_generation(self, key: str) -> tuple[bytes | None, Generation | None]:
        return await self._get(key, None), None

    async def _get_range_with_generation(
        self, key: str, byte_range: ByteRange
    ) -> tuple[bytes | None, Generation | None]:
        """Default: the whole value and its generation, cut locally (correct, not cheap);
        drivers whose ranged reads report the object's generation override it."""
        value, generation = await self._get_with_generation(key)
        return (None, None) if value is None else (byte_range.apply(value), generation)

    async def _set_if(self, key: str, value: bytes, generation: Generation | None) -> None:
        raise ConsistencyUnsupportedError(f"{type(self).__name__} has no conditional writes ({key!r})")

    async def _delete_if(self, key: str, generation: Generation) -> None:
        raise ConsistencyUnsupportedError(f"{type(self).__name__} has no conditional deletes ({key!r})")

    async def _get_if_match(
        self, key: str, byte_range: ByteRange | None, generation: Generation
    ) -> bytes | None:
        raise ConsistencyUnsupportedError(f"{type(self).__name__} has no conditional reads ({key!r})")

    async def _stat(self, key: str) -> tuple[int, Generation | None] | None:
        try:
            return await self._getsize(key), None
        except FileNotFoundError:
            return None

    async def _exists(self, key: str) -> bool:
        return (await self._get(key, None)) is not None

    async def _getsize(self, key: str) -> int:
        value = await self._get(key, None)
        if value is None:
            raise FileNotFoundError(f"{key!r} not found in {self.url}")
        return len(value)

    async def _delete_prefix(self, prefix: str) -> None:
        """Default: list, then delete key by key. Backends override with bulk deletes."""
        keys = [k async for k in self._list_prefix(prefix)]
        for k in keys:
            await self._delete(k)

    @abstractmethod
    def _list_prefix(self, prefix: str) -> AsyncIterator[str]:
        """Yield full keys starting with ``prefix`` (already normalized: ``""`` or ``"a/"``)."""

    async def _list_dir(self, prefix: str) -> AsyncIterator[str]:
        """Default: derive children from a recursive listing. Backends override with a delimiter listing."""
        seen: set[str] = set()
        async for key in self._list_prefix(prefix):
            child = key[len(prefix) :].split("/", 1)[0]
            if child and child not in seen:
                seen.add(child)
                yield child
