"""moto's S3 storage made cheaper for the local stack's multipart uploads, with the same results.

moto 5 keeps every object and every part in a ``SpooledTemporaryFile`` of ``MOTO_S3_DEFAULT_KEY_BUFFER_SIZE``
bytes (default 5 MiB - 1 KiB: each 5-8 MiB part of an upload goes to a temporary file, is read back for its
MD5, and twice more by CompleteMultipartUpload). What this module changes (measured in docs/performance.md,
target 10):

- :data:`KEY_BUFFER_BYTES` (64 MiB) is the default buffer (``prepare_environment`` sets it unless the shell
  does): parts and objects up to 64 MiB stay in memory, larger objects go to a temporary file as before;
- a value larger than its key's buffer (a PutObject, a completed multipart upload) is stored in memory and a
  background thread then moves it to its temporary file (moto writes it to memory, then to the file, inside
  the request: writing 256 MiB to a file takes ~0.9 s on a 2-core box); a reader waits while it moves;
- a value in memory shares the request's bytes (moto copied them into its buffer);
- an object's or a part's MD5 (its ETag) and, for an upload created with ``ChecksumAlgorithm=SHA256`` (the
  service's), a part's SHA-256 are the ones the S3 guard (dfdlocal.s3auth) computed as the body streamed in,
  else computed from the bytes at hand (moto read the value back for its MD5), so that
  CompleteMultipartUpload does not hash every part again for the composite checksum;
- CompleteMultipartUpload validates the parts exactly as moto does (same errors in the same order), then
  joins the parts' bytes in one copy, which the object then shares (moto read each part twice, appended them
  to a growing buffer, copied the result, and copied it again into the object's buffer), with the same ETag
  (MD5 of the parts' MD5s, ``-N``) and the same checksum (moto frees an upload's parts when it completes);
- a ranged GetObject (``Range: bytes=a-b``) reads only its range of the key's buffer (:func:`_patch_ranges`):
  moto reads the whole value and slices it, so each ranged GET of a 1 GiB object read 1 GiB (the ingest's and
  a segment's parallel ranged reads, dfd.adapters.s3); what it answers is moto's, byte for byte;
- a key's bytes live as long as anyone holds the key (:func:`_patch_lifetime`): a GetObject or a CopyObject that
  resolved a key before it was overwritten or deleted reads the bytes it resolved (moto's own ``dispose`` closes
  the key's file under it: a 500, ``seek of closed file``). tests/integration/test_local_s3_store.py races
  readers of large keys against overwrites, copies, moves to files and deletes.

Memory cost: the parts of an upload in progress (the file's size so far), every object up to 64 MiB, and a
larger object for the second or so its move to a file takes
(``MOTO_S3_DEFAULT_KEY_BUFFER_SIZE=5241856 make run`` restores moto's default buffer). :func:`install`
patches moto's classes once, after ``prepare_environment`` (moto 5.2's ``FakeKey``/``FakeMultipart``; a moto
whose ``FakeMultipart.complete`` is not the one this was written for is left alone, with a warning).
"""

from __future__ import annotations

import hashlib
import io
import logging
import threading
from collections.abc import Callable, Iterator
from typing import Any

from dfdlocal import motoversion
from dfdlocal.s3auth import RECEIVED

# the moto internals patched here are those of the locked release: another fails at import, saying which
motoversion.require_supported()

KEY_BUFFER_BYTES = 64 * 1024 * 1024
ENVIRONMENT = "MOTO_S3_DEFAULT_KEY_BUFFER_SIZE"
_SHA256 = "_dfd_sha256"  # the FakeKey attribute holding a part's SHA-256 digest

log = logging.getLogger("dfdlocal.aws")
_installed = threading.Lock()
_done: list[bool] = []
ORIGINALS: dict[str, Callable[..., Any]] = {}  # moto's own functions, for the tests that compare


def install() -> bool:
    """Patch moto's S3 models (idempotent); False when this moto is not the one the patch fits."""
    with _installed:
        if _done:
            return _done[0]
        from moto.s3 import models

        fits = all(hasattr(models, name) for name in ("FakeKey", "FakeMultipart", "MultipartChecksumBuilder"))
        fits = fits and models.FakeMultipart.complete.__code__.co_varnames[:3] == ("self", "body", "checksum_algo")
        if fits:
            _patch(models)
        else:
            log.warning("moto's S3 models are not the expected ones: multipart uploads keep moto's own path")
        _done.append(fits)
        return fits


def _patch(models: Any) -> None:
    fake_key, fake_multipart = models.FakeKey, models.FakeMultipart
    ORIGINALS.update(complete=fake_multipart.complete, set_part=fake_multipart.set_part)
    getter = fake_key.value.fget

    def set_value(self: Any, new_value: bytes) -> None:
        self._value_buffer.seek(0)
        self._value_buffer.truncate()
        if isinstance(new_value, str):
            new_value = new_value.encode(models.DEFAULT_TEXT_ENCODING)
        large = len(new_value) > self._max_buffer_size
        if large:  # in memory now (the buffer's limit raised for this value), to its file in the background
            self._value_buffer._max_size = len(new_value)
        if isinstance(new_value, bytes) and not self._value_buffer._rolled:
            shared = io.BytesIO(new_value)  # shares the bytes until written to: no copy
            shared.seek(0, io.SEEK_END)
            self._value_buffer._file = shared
        else:
            self._value_buffer.write(new_value)
        self.contentsize = len(new_value)
        if large and hasattr(self, "lock"):  # else __init__ is running: it starts the move once the lock exists
            if getattr(self, "_etag", None) is None:
                self._etag = _md5(new_value)  # before the move (see init)
            _start_spill(self)

    def get_value(self: Any) -> Any:
        if getattr(_RANGED, "active", False):  # a ranged GetObject: it slices what it gets, read then
            return _RangeView(self)
        return getter(self)

    fake_key.value = property(get_value, set_value)
    original_init: Callable[..., None] = fake_key.__init__

    def init(self: Any, *args: Any, **kwargs: Any) -> None:
        original_init(self, *args, **kwargs)
        value = args[1] if len(args) > 1 else kwargs.get("value")
        received = RECEIVED.digests(value)
        if self._etag is None and received:  # moto's ETag (the MD5 of the value) as the guard computed it
            self._etag = received[1]
        if self.contentsize > self._max_buffer_size:
            if self._etag is None and isinstance(value, bytes | str):
                # moto reads the ETag right after creating a key (PutObject's answer, CopyObject) and its getter reads
                # the buffer without the key's lock: during the move it could read the new file half written and
                # cache a wrong MD5. Taken now from the bytes in memory, before the move starts.
                self._etag = _md5(value.encode(models.DEFAULT_TEXT_ENCODING) if isinstance(value, str) else value)
            _start_spill(self)

    fake_key.__init__ = init

    original_set_part: Callable[..., Any] = fake_multipart.set_part

    def set_part(self: Any, part_id: int, value: bytes) -> Any:
        key = original_set_part(self, part_id, value)
        received = RECEIVED.digests(value)  # the guard's, when it read these very bytes in this thread
        if key._etag is None:  # moto's ETag, from the bytes at hand rather than read back from the buffer
            key._etag = received[1] if received else hashlib.md5(value, usedforsecurity=False).hexdigest()
        if _composite_sha256(self.metadata):
            setattr(key, _SHA256, received[0] if received else hashlib.sha256(value).digest())
        return key

    fake_multipart.set_part = set_part
    fake_multipart.complete = lambda self, body: complete(models, self, body)
    _patch_lifetime(fake_key, fake_multipart)
    _patch_ranges()


# set while a ranged GetObject runs in this thread: FakeKey.value answers a _RangeView
_RANGED = threading.local()


class _RangeView:
    """A key's value as moto's range handling uses it (its length, one slice), read from the key's buffer only
    where sliced."""

    def __init__(self, key: Any) -> None:
        self._key = key
        self._size = int(key.contentsize)

    def __len__(self) -> int:
        return self._size

    def __getitem__(self, item: slice) -> bytes:
        start, stop, step = item.indices(self._size)
        if step != 1:
            raise ValueError("a range is contiguous")
        with self._key.lock:
            buffer = self._key._value_buffer
            buffer.seek(start)
            return bytes(buffer.read(max(0, stop - start)))

    def __bytes__(self) -> bytes:
        return self[:]


def _patch_ranges() -> None:
    """A GetObject with a Range header reads its range of the value, not the whole value (see the module)."""
    from moto.s3.responses import S3Response

    original: Callable[..., Any] = S3Response.key_response
    ORIGINALS.update(key_response=original)

    def key_response(self: Any, request: Any, full_url: str, headers: Any) -> Any:
        if request.method != "GET" or not request.headers.get("range"):
            return original(self, request, full_url, headers)
        _RANGED.active = True
        try:
            status, answer_headers, body = original(self, request, full_url, headers)
        finally:
            _RANGED.active = False
        if isinstance(body, _RangeView):  # a range moto answers whole (several ranges, an unparsable one)
            body = bytes(body)
        return status, answer_headers, body

    setattr(S3Response, "key_response", key_response)  # noqa: B010 - a method of moto's, patched


def _patch_lifetime(fake_key: Any, fake_multipart: Any) -> None:
    """A key's bytes live as long as anyone holds the key: its bucket, or a reader that resolved it before it was
    replaced or deleted (a GetObject, a CopyObject's source, a pickle of it) and reads it after.

    moto's own ``dispose`` closes a key's buffer as the key leaves its bucket, so such a reader meets a closed file
    (a 500, ``seek of closed file``), and moto keeps every key it creates in ``FakeKey.instances_tracked`` (closing
    is then the only way to free a key's bytes). Here a key is not tracked, a key leaving its bucket is marked
    disposed, and its buffer is closed when the key is collected (moto's ``__del__``). Parts stay moto's: their
    buffers close when their upload completes or is aborted (a completed object keeps its upload, hence its parts),
    under each part's lock (the completion reads a part under it)."""
    original_dispose: Callable[..., None] = fake_key.dispose
    ORIGINALS.update(dispose=original_dispose)

    def new(cls: type, *args: Any, **kwargs: Any) -> Any:
        return object.__new__(cls)  # not appended to instances_tracked, which would hold it for ever

    def dispose(self: Any, garbage: bool = False) -> None:
        if garbage:  # collected: nobody holds the key any more
            original_dispose(self)
        else:  # out of its bucket: a reader still holding it reads its bytes
            self.disposed = True

    def dispose_parts(self: Any) -> None:
        for part in list(self.parts.values()):
            with part.lock:
                original_dispose(part)

    fake_key.__new__ = new
    fake_key.dispose = dispose
    fake_multipart.dispose = dispose_parts


def _composite_sha256(metadata: Any) -> bool:
    algorithm = metadata.get("x-amz-checksum-algorithm")
    kind = metadata.get("x-amz-checksum-type")
    return str(algorithm).upper() == "SHA256" and (not kind or str(kind).upper() == "COMPOSITE")


def complete(models: Any, multipart: Any, body: Iterator[tuple[int, str]]) -> tuple[bytes, str, Any]:
    """moto 5.2's ``FakeMultipart.complete`` (same checks, errors, ETag and checksum) without its copies."""
    builder = models.MultipartChecksumBuilder(
        multipart.metadata.get("x-amz-checksum-algorithm"), multipart.metadata.get("x-amz-checksum-type")
    )
    chosen: list[Any] = []
    md5s = bytearray()
    last = None
    for number, etag in body:
        part = multipart.parts.get(number)
        part_etag = None
        if part is not None:
            part_etag = part.etag.replace('"', "")
            etag = etag.replace('"', "")
        if part is None or part_etag != etag:
            raise models.InvalidPart()
        if last is not None and last.contentsize < models.S3_UPLOAD_PART_MIN_SIZE:
            raise models.EntityTooSmall()
        md5s.extend(bytes.fromhex(part_etag))
        chosen.append(part)
        last = part
    if not chosen:
        raise models.MalformedXML
    values: list[bytes] = []
    composite_sha256 = builder.checksum_type == "COMPOSITE" and builder.checksum_algorithm == "SHA256"
    for part in chosen:
        with part.lock:
            part._value_buffer.seek(0)
            value = part._value_buffer.read()  # a part in memory: its bytes themselves, not a copy
        if composite_sha256:
            builder.checksum.extend(getattr(part, _SHA256, None) or hashlib.sha256(value).digest())
            builder.part_count += 1
        else:
            builder.addPart(value)
        values.append(value)
    total = values[0] if len(values) == 1 else b"".join(values)  # the one copy
    del values
    etag = hashlib.md5(bytes(md5s), usedforsecurity=False).hexdigest()
    return total, f"{etag}-{len(chosen)}", builder.build()


def _md5(value: bytes) -> str:
    return hashlib.md5(value, usedforsecurity=False).hexdigest()


def settle(key: Any) -> None:
    """A key read back from its file (its value in memory) larger than its buffer moves to its temporary file, as
    a new one does (unpickling sets the value before the key has the lock the move takes)."""
    buffer = getattr(key, "_value_buffer", None)
    if buffer is not None and not buffer._rolled and key.contentsize > key._max_buffer_size:
        _start_spill(key)


def _start_spill(key: Any) -> None:
    threading.Thread(target=spill, args=(key,), name="dfd-spill", daemon=True).start()


def spill(key: Any) -> None:
    """Move a value held in memory to its temporary file (where moto would have put it at once); a reader of
    the key waits while it moves."""
    try:
        with key.lock:
            if not key.disposed:
                key._value_buffer.rollover()
    except (OSError, ValueError):  # disposed meanwhile (the object deleted or replaced)
        pass
