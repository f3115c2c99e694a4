"""The S3 adapter's reads: identify an object, stream its bytes into a sink (the ingest's hash).

Reading an object for the ingest (the numbers behind these choices: docs/performance.md):
- ``open(bucket, key)``: ONE GetObject. Its headers identify the version (ETag / VersionId); its body is
  what the ingest hashes (a stored checksum the upload did not sign is never trusted: dfd.ingest.service).
- ``open(bucket, key, expect_checksum=True)``: HeadObject (ChecksumMode ENABLED) first. When S3 holds the
  SHA-256 the upload signed no GetObject is ever sent; otherwise :meth:`ObjectStore.stream` fetches the body
  IfMatch the ETag the HEAD identified (a 412 means superseded).
- ``stream()``: every byte, in order, into a sink (the hash). One stream up to the threshold. Above it, the
  first bytes of that stream time the connection: one that already keeps the hash busy (a local endpoint)
  carries on alone; a slower one (S3 gives ~100 MB/s per connection) is joined by byte ranges fetched
  concurrently into a fixed set of part buffers (in-flight memory = workers x part size, whatever the
  object's size), fed to the sink strictly in order, each part as its bytes arrive. The numbers are the
  store's :class:`ReadTuning`, given at construction (from Settings in ``dfd.deps``).
"""

from __future__ import annotations

import threading
import time
from collections import deque
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import wait as wait_all
from datetime import datetime
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from dfd.adapters.s3.base import Store, release, translate
from dfd.core import clock
from dfd.core.errors import ObjectChanged
from dfd.core.hashing import b64_to_crc64, b64_to_hex
from dfd.core.ids import tenant_from_metadata
from dfd.core.objects import ObjectInfo, OpenedObject, Sink

CHUNK = 1024 * 1024  # one stream's reads
RANGE_CHUNK = 256 * 1024  # a range worker's reads: small transient buffers in each worker thread's heap


def _info(bucket: str, key: str, response: dict[str, Any]) -> ObjectInfo:
    checksum = response.get("ChecksumSHA256")
    checksum_type = response.get("ChecksumType")
    # a multipart upload's SHA-256 is a checksum of part checksums (COMPOSITE), never the content's hash; when
    # the type is not given (some emulators), a multipart ETag ("…-N") says the same
    multipart = "-" in str(response.get("ETag", "")).strip('"')
    whole = checksum_type == "FULL_OBJECT" or (checksum_type is None and not multipart)
    verified = b64_to_hex(checksum) if checksum and whole else None
    return ObjectInfo(
        bucket=bucket,
        key=key,
        etag=response["ETag"],
        version_id=response.get("VersionId"),
        size=int(response["ContentLength"]),
        content_type=response.get("ContentType"),
        checksum_sha256=verified,
        tenant_hint=tenant_from_metadata(response.get("Metadata")),
        storage_class=response.get("StorageClass"),
        archived=bool(response.get("ArchiveStatus")),
        last_modified=clock.iso(modified) if isinstance(modified := response.get("LastModified"), datetime) else None,
    )


class _Part:
    """One byte range in flight: a worker fills `buffer`, the consumer feeds what has arrived to the sink."""

    def __init__(self, start: int, end: int, buffer: bytearray) -> None:
        self.start, self.end = start, end
        self.buffer = buffer
        self.filled = 0
        self.error: BaseException | None = None
        self._arrived = threading.Condition()

    def advance(self, filled: int) -> None:
        with self._arrived:
            self.filled = filled
            self._arrived.notify()

    def fail(self, error: BaseException) -> None:
        with self._arrived:
            self.error = error
            self._arrived.notify()

    def feed(self, sink: Sink) -> int:
        """Hand every byte of the range to `sink` in order, as it arrives; raise the worker's error."""
        view = memoryview(self.buffer)
        length = self.end - self.start
        fed = 0
        while fed < length:
            with self._arrived:
                while self.filled <= fed and self.error is None:
                    self._arrived.wait()
                if self.error is not None:
                    raise self.error
                upto = self.filled
            sink(view[fed:upto])
            fed = upto
        return fed


class Reads(Store):
    # ------------------------------------------------------------------ identify
    def head(self, bucket: str, key: str) -> ObjectInfo:
        """HeadObject with the verified checksum requested: identity, size, checksum; no body."""
        try:
            response = self._s3.head_object(Bucket=bucket, Key=key, ChecksumMode="ENABLED")
        except (ClientError, BotoCoreError) as error:
            raise translate(error, "HeadObject", key) from error
        return _info(bucket, key, response)

    def stored_crc64nvme(self, info: ObjectInfo) -> int | None:
        """S3's FULL_OBJECT CRC64NVME of exactly the identified version (HeadObject IfMatch its ETag); None when
        it has none or a COMPOSITE one."""
        kwargs: dict[str, Any] = {"Bucket": info.bucket, "Key": info.key, "IfMatch": info.etag}
        if info.version_id and info.version_id != "null":
            kwargs["VersionId"] = info.version_id
        try:
            response = self._s3.head_object(**kwargs, ChecksumMode="ENABLED")
        except (ClientError, BotoCoreError) as error:
            raise translate(error, "HeadObject", info.key) from error
        checksum = response.get("ChecksumCRC64NVME")
        checksum_type = response.get("ChecksumType")
        # as for the SHA-256 (_info): a type not given (some emulators) is whole unless the ETag is a multipart's
        multipart = "-" in str(response.get("ETag", "")).strip('"')
        whole = checksum_type == "FULL_OBJECT" or (checksum_type is None and not multipart)
        return b64_to_crc64(checksum) if isinstance(checksum, str) and whole else None

    def open(self, bucket: str, key: str, *, expect_checksum: bool = False) -> OpenedObject:
        """Identify the current version of an object (see the module docstring for the two strategies)."""
        if expect_checksum:
            return OpenedObject(self.head(bucket, key), None)
        try:
            response = self._s3.get_object(Bucket=bucket, Key=key)
        except (ClientError, BotoCoreError) as error:
            raise translate(error, "GetObject", key) from error
        return OpenedObject(_info(bucket, key, response), response["Body"])

    # ------------------------------------------------------------------ read
    def stream(self, opened: OpenedObject, sink: Sink) -> int:
        """Feed every byte of the identified version to `sink`, in order; return the count fed.

        Up to the tuning's `threshold`: one stream. Above it, the next `probe_bytes` after the first CHUNK come
        from that one stream and time it: a connection that already keeps the sink busy (`fast_stream`: a local
        endpoint) carries on alone, a slower one (S3: ~100 MB/s per connection) is joined by ranged GETs,
        `workers` in flight."""
        tuning = self.tuning
        info = opened.info
        body = opened.take_body()
        if body is None:
            body = self._get(info)
        try:
            if info.size <= max(tuning.threshold, tuning.part_size, tuning.probe_bytes) or tuning.workers < 2:
                return self._feed(info, body, sink, info.size, last=True)
            fed = self._feed(info, body, sink, CHUNK)  # the first bytes time the server, not the link
            started = time.perf_counter()
            fed += self._feed(info, body, sink, tuning.probe_bytes)
            if tuning.probe_bytes / max(time.perf_counter() - started, 1e-9) >= tuning.fast_stream:
                return fed + self._feed(info, body, sink, info.size - fed, last=True)
            body, handed = None, body
            return fed + self._parallel(info, handed, sink, fed)
        finally:
            if body is not None:
                body.close()

    def stream_range(self, info: ObjectInfo, start: int, end: int, sink: Sink) -> int:
        """Feed bytes [start, end) of the identified version to `sink`, in order (ranged GETs IfMatch its ETag,
        `workers` in flight above one part); return the count fed. Raises ObjectChanged (412: overwritten) or
        ObjectNotFound."""
        if end - start <= self.tuning.part_size or self.tuning.workers < 2:
            return self._feed(info, self._get(info, start, end), sink, end - start, last=True)
        return self._parallel(info, None, sink, start, end)

    def _get(self, info: ObjectInfo, start: int | None = None, end: int | None = None) -> Any:
        """GetObject of exactly the identified version (IfMatch its ETag), optionally one byte range."""
        kwargs: dict[str, Any] = {"Bucket": info.bucket, "Key": info.key, "IfMatch": info.etag}
        if info.version_id and info.version_id != "null":
            kwargs["VersionId"] = info.version_id
        if start is not None and end is not None:
            kwargs["Range"] = f"bytes={start}-{end - 1}"
        try:
            return self._s3.get_object(**kwargs)["Body"]
        except (ClientError, BotoCoreError) as error:
            raise translate(error, "GetObject", info.key) from error

    def _feed(self, info: ObjectInfo, body: Any, sink: Sink, limit: int, *, last: bool = False) -> int:
        """Feed up to `limit` bytes of `body` to `sink` (fewer at its end); `last`: then release the body."""
        count = 0
        try:
            while count < limit:
                chunk = body.read(min(CHUNK, limit - count))
                if not chunk:
                    break
                sink(memoryview(chunk))
                count += len(chunk)
        except (ClientError, BotoCoreError) as error:
            raise translate(error, "GetObject", info.key) from error
        if last:
            release(body)
        return count

    def _executor(self, workers: int) -> ThreadPoolExecutor:
        with self._pool_lock:
            if self._pool is None or self._pool._max_workers < workers:
                self._pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="dfd-range")
            return self._pool

    def _parallel(self, info: ObjectInfo, body: Any | None, sink: Sink, offset: int, end: int | None = None) -> int:
        """The bytes from `offset` to `end` (None: the object's end), as ranges fetched `workers` at a time and fed to
        `sink` in order.

        Memory: one part buffer per worker, allocated once; a fetched range holds its buffer until the sink has
        had it, then the buffer takes the next range. `body`, a stream positioned at `offset`, serves the first
        range."""
        part_size, workers = self.tuning.part_size, self.tuning.workers
        stop_at = info.size if end is None else end
        ranges = deque((start, min(start + part_size, stop_at)) for start in range(offset, stop_at, part_size))
        free = [self.tuning.allocate(part_size) for _ in range(min(workers, len(ranges)))]
        pool = self._executor(workers)
        stop = threading.Event()
        window: deque[_Part] = deque()  # launched ranges, in order; the sink takes the first
        launched: list[Future[None]] = []  # every range's worker, fed or not (each closes its body last)
        lock = threading.Condition()  # guards the state above; notified when a worker hands back its connection
        running = 0
        source = body

        def launch() -> None:
            """Start ranges while a connection and a buffer are free (the lock is held)."""
            nonlocal running, source
            while ranges and free and running < workers and not stop.is_set():
                start, end = ranges.popleft()
                part = _Part(start, end, free.pop())
                window.append(part)
                running += 1
                launched.append(pool.submit(fetch, part, source))
                source = None

        def fetch(part: _Part, stream: Any | None) -> None:
            nonlocal running
            try:
                self._fill(info, part, stream, stop)
            finally:
                with lock:
                    running -= 1
                    launch()
                    lock.notify()

        count = 0
        try:
            with lock:
                launch()
            while True:
                with lock:
                    # every launched range fed, but ranges remain: their buffers are free and the workers that
                    # filled them are still closing their bodies; the first to finish launches the next range
                    while not window and ranges:
                        lock.wait()
                    if not window:
                        break
                    part = window[0]
                count += part.feed(sink)
                with lock:
                    window.popleft()
                    free.append(part.buffer)  # fed: the buffer takes the next range
                    launch()
        finally:
            stop.set()
            with lock:
                futures = list(launched)
            for future in futures:
                future.cancel()
            # no worker outlives the read: none writes into a buffer, reads or holds a connection after it
            # (a fed range's worker may still be draining and closing its body)
            wait_all(futures)
            if source is not None:
                source.close()
        return count

    def _fill(self, info: ObjectInfo, part: _Part, body: Any | None, stop: threading.Event) -> None:
        """Worker: GET one range (or read it from the open body) into the part's buffer, chunk by chunk."""
        try:
            ranged = body is None
            if body is None:
                body = self._get(info, part.start, part.end)
            try:
                view = memoryview(part.buffer)
                length = part.end - part.start
                filled = 0
                while filled < length and not stop.is_set():
                    chunk = body.read(min(RANGE_CHUNK, length - filled))
                    if not chunk:
                        raise ObjectChanged(f"s3 object {info.key}: range {part.start}-{part.end} ended early")
                    view[filled : filled + len(chunk)] = chunk
                    filled += len(chunk)
                    part.advance(filled)
                if ranged and filled == length:
                    release(body)  # at EOF: the connection goes back to the pool
            finally:
                body.close()
        except (ClientError, BotoCoreError) as error:
            part.fail(translate(error, "GetObject", info.key))
        except BaseException as error:  # delivered to the consumer, which raises it
            part.fail(error)
