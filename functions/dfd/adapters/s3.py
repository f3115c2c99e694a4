"""S3 adapter: identify, stream and delete objects, presign URLs; turns ClientError into domain errors.

Reading an object for the ingest (the numbers behind these choices: docs/performance.md):
- ``open(bucket, key)``: ONE GetObject. Its headers identify the version (ETag / VersionId); its body is
  what the ingest hashes (a stored checksum the upload did not sign is never trusted: dfd.ingest).
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
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import wait as wait_all
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from botocore.exceptions import BotoCoreError, ClientError, ReadTimeoutError

from dfd.config import PARALLEL_PART_SIZE, PARALLEL_THRESHOLD, PARALLEL_WORKERS
from dfd.errors import (
    DfdError,
    MultipartGone,
    ObjectChanged,
    ObjectNotFound,
    PartsRejected,
    ServiceUnavailable,
    StillCompleting,
)
from dfd.hashing import b64_to_hex
from dfd.ids import tenant_from_metadata
from dfd.ports import ObjectInfo, OpenedObject, PartInfo, Sink

if TYPE_CHECKING:
    from dfd.config import Settings

CHUNK = 1024 * 1024  # one stream's reads
RANGE_CHUNK = 256 * 1024  # a range worker's reads: small transient buffers in each worker thread's heap
_MISSING = {"NoSuchKey", "404", "NotFound"}
_CHANGED = {"PreconditionFailed", "412"}
_NO_UPLOAD = {"NoSuchUpload"}
_PARTS_REJECTED = {"InvalidPart", "InvalidPartOrder", "EntityTooSmall"}
_RETRYABLE = {"SlowDown", "503", "500", "InternalError", "ServiceUnavailable", "RequestTimeout"}


def translate(error: ClientError | BotoCoreError, action: str, key: str) -> DfdError:
    if isinstance(error, BotoCoreError):
        return ServiceUnavailable(f"S3 {action} {key} failed: {error}")
    code = str(error.response.get("Error", {}).get("Code", ""))
    if code in _NO_UPLOAD:
        return MultipartGone(f"S3 {action} {key}: no such multipart upload")
    if code in _PARTS_REJECTED:
        return PartsRejected(f"S3 {action} {key} refused the parts ({code})", details={"s3_code": code})
    if code in _MISSING:
        return ObjectNotFound(f"s3 object {key} does not exist")
    if code in _CHANGED:
        return ObjectChanged(f"s3 object {key} changed while it was read")
    if code in _RETRYABLE:
        return ServiceUnavailable(f"S3 {action} {key} is throttled or unavailable ({code})")
    return DfdError(f"S3 {action} {key} failed ({code})", code="storage_error")


@dataclass(frozen=True)
class ReadTuning:
    """How :meth:`ObjectStore.stream` reads an object (docs/performance.md, targets 1, 2 and 4)."""

    threshold: int = PARALLEL_THRESHOLD  # up to this size: one stream, never ranges
    part_size: int = PARALLEL_PART_SIZE  # bytes of one ranged GET, and of one part buffer
    workers: int = PARALLEL_WORKERS  # ranged GETs in flight at once (1: always one stream)
    probe_bytes: int = 2 * 1024 * 1024  # read from the one stream (after its first CHUNK) to time it
    fast_stream: float = 400e6  # bytes/s: a stream this fast already keeps the hash busy (ranges only add overhead)
    # where part buffers come from (each `part_size` bytes, at most `workers` per read); tests count them
    allocate: Callable[[int], bytearray] = bytearray

    @classmethod
    def from_settings(cls, settings: Settings) -> ReadTuning:
        return cls(
            threshold=settings.parallel_threshold,
            part_size=settings.parallel_part_size,
            workers=settings.parallel_workers,
        )


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


class ObjectStore:
    def __init__(
        self,
        client: Any,
        presign_client: Any | None = None,
        *,
        tuning: ReadTuning | None = None,
        complete_client: Any | None = None,
    ) -> None:
        self._s3 = client
        self._presign = presign_client or client
        self._complete = complete_client or client
        self.tuning = tuning or ReadTuning()
        self._pool: ThreadPoolExecutor | None = None
        self._pool_lock = threading.Lock()

    # ------------------------------------------------------------------ identify
    def head(self, bucket: str, key: str) -> ObjectInfo:
        """HeadObject with the verified checksum requested: identity, size, checksum; no body."""
        try:
            response = self._s3.head_object(Bucket=bucket, Key=key, ChecksumMode="ENABLED")
        except (ClientError, BotoCoreError) as error:
            raise translate(error, "HeadObject", key) from error
        return _info(bucket, key, response)

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
            _release(body)
        return count

    def _executor(self, workers: int) -> ThreadPoolExecutor:
        with self._pool_lock:
            if self._pool is None or self._pool._max_workers < workers:
                self._pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="dfd-range")
            return self._pool

    def _parallel(self, info: ObjectInfo, body: Any | None, sink: Sink, offset: int) -> int:
        """The bytes from `offset` on, as ranges fetched `workers` at a time and fed to `sink` in order.

        Memory: one part buffer per worker, allocated once; a fetched range holds its buffer until the sink has
        had it, then the buffer takes the next range. `body`, a stream positioned at `offset`, serves the first
        range."""
        part_size, workers = self.tuning.part_size, self.tuning.workers
        ranges = deque((start, min(start + part_size, info.size)) for start in range(offset, info.size, part_size))
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
                    _release(body)  # at EOF: the connection goes back to the pool
            finally:
                body.close()
        except (ClientError, BotoCoreError) as error:
            part.fail(translate(error, "GetObject", info.key))
        except BaseException as error:  # delivered to the consumer, which raises it
            part.fail(error)

    # ------------------------------------------------------------------ write
    def delete(self, bucket: str, key: str, etag: str | None) -> bool:
        """Delete one object version (IfMatch its ETag): True when deleted or already gone."""
        kwargs: dict[str, Any] = {"Bucket": bucket, "Key": key}
        if etag:
            kwargs["IfMatch"] = etag
        try:
            self._s3.delete_object(**kwargs)
        except (ClientError, BotoCoreError) as error:
            mapped = translate(error, "DeleteObject", key)
            if isinstance(mapped, ObjectNotFound):
                return True
            if isinstance(mapped, ObjectChanged):
                return False  # a newer version took the key: it has its own event
            raise mapped from error
        return True

    def exists(self, bucket: str, key: str, etag: str | None) -> bool:
        """HeadObject IfMatch `etag`: True when that version is there; False when missing or overwritten."""
        kwargs: dict[str, Any] = {"Bucket": bucket, "Key": key}
        if etag:
            kwargs["IfMatch"] = etag
        try:
            self._s3.head_object(**kwargs)
        except (ClientError, BotoCoreError) as error:
            mapped = translate(error, "HeadObject", key)
            if isinstance(mapped, ObjectNotFound | ObjectChanged):
                return False
            raise mapped from error
        return True

    # ------------------------------------------------------------------ presign
    def presign_put(
        self,
        bucket: str,
        key: str,
        *,
        size: int,
        content_type: str,
        checksum_b64: str | None,
        expires_in: int,
        metadata: dict[str, str] | None = None,
    ) -> tuple[str, dict[str, str]]:
        """A SigV4 PUT URL signing Content-Length, Content-Type, If-None-Match: * (and the SHA-256, and each
        `metadata` entry as its x-amz-meta-* header)."""
        params: dict[str, Any] = {
            "Bucket": bucket,
            "Key": key,
            "ContentType": content_type,
            "ContentLength": size,
            "IfNoneMatch": "*",
        }
        headers = {"content-type": content_type, "content-length": str(size), "if-none-match": "*"}
        if checksum_b64:
            params["ChecksumSHA256"] = checksum_b64
            headers["x-amz-checksum-sha256"] = checksum_b64
        if metadata:
            params["Metadata"] = dict(metadata)
            headers.update({f"x-amz-meta-{name}": value for name, value in metadata.items()})
        try:
            url: str = self._presign.generate_presigned_url("put_object", Params=params, ExpiresIn=expires_in)
        except (ClientError, BotoCoreError) as error:
            raise translate(error, "presign PUT", key) from error
        return url, headers

    def presign_get(
        self, bucket: str, key: str, *, disposition: str, content_type: str | None = None, expires_in: int
    ) -> str:
        """A GET URL answering with this Content-Disposition and, when given, this Content-Type (the reader's
        own view of a shared object, never the first uploader's type)."""
        params: dict[str, Any] = {"Bucket": bucket, "Key": key, "ResponseContentDisposition": disposition}
        if content_type:
            params["ResponseContentType"] = content_type
        try:
            url: str = self._presign.generate_presigned_url(
                "get_object",
                Params=params,
                ExpiresIn=expires_in,
            )
        except (ClientError, BotoCoreError) as error:
            raise translate(error, "presign GET", key) from error
        return url

    # ------------------------------------------------------------------ multipart (dfd.multipart)
    def create_multipart(
        self, bucket: str, key: str, *, content_type: str, checksum: bool, metadata: dict[str, str] | None = None
    ) -> str:
        kwargs: dict[str, Any] = {"Bucket": bucket, "Key": key, "ContentType": content_type}
        if metadata:
            kwargs["Metadata"] = metadata  # the completed object carries it (the ingest's tenant hint)
        if checksum:
            kwargs["ChecksumAlgorithm"] = "SHA256"
        try:
            upload_id: str = self._s3.create_multipart_upload(**kwargs)["UploadId"]
        except (ClientError, BotoCoreError) as error:
            raise translate(error, "CreateMultipartUpload", key) from error
        return upload_id

    def presign_upload_part(
        self,
        bucket: str,
        key: str,
        s3_upload_id: str,
        part_number: int,
        *,
        size: int,
        checksum_b64: str | None,
        expires_in: int,
    ) -> tuple[str, dict[str, str]]:
        """A SigV4 UploadPart URL signing the part's exact Content-Length (and its SHA-256)."""
        params: dict[str, Any] = {
            "Bucket": bucket,
            "Key": key,
            "UploadId": s3_upload_id,
            "PartNumber": part_number,
            "ContentLength": size,
        }
        headers = {"content-length": str(size)}
        if checksum_b64:
            params["ChecksumSHA256"] = checksum_b64
            headers["x-amz-checksum-sha256"] = checksum_b64
        try:
            url: str = self._presign.generate_presigned_url("upload_part", Params=params, ExpiresIn=expires_in)
        except (ClientError, BotoCoreError) as error:
            raise translate(error, "presign UploadPart", key) from error
        return url, headers

    def list_parts(self, bucket: str, key: str, s3_upload_id: str) -> list[PartInfo]:
        """Every part, over all ListParts pages (1,000 per page), sorted by part number."""
        parts: dict[int, PartInfo] = {}
        kwargs: dict[str, Any] = {"Bucket": bucket, "Key": key, "UploadId": s3_upload_id}
        while True:
            try:
                page = self._s3.list_parts(**kwargs)
            except (ClientError, BotoCoreError) as error:
                raise translate(error, "ListParts", key) from error
            for part in page.get("Parts", []):
                number = int(part["PartNumber"])
                parts[number] = PartInfo(number, part["ETag"], int(part["Size"]), part.get("ChecksumSHA256"))
            marker = page.get("NextPartNumberMarker")
            if not page.get("IsTruncated") or marker is None:
                return [parts[number] for number in sorted(parts)]
            kwargs["PartNumberMarker"] = int(marker)

    def complete_multipart(self, bucket: str, key: str, s3_upload_id: str, parts: list[PartInfo], *, size: int) -> None:
        """CompleteMultipartUpload IfNoneMatch "*" (an object at the key → ObjectChanged), with each part's
        checksum when S3 keeps one (an upload created with SHA-256 requires them). Sent on the complete client,
        whose read timeout is the request's budget: S3 may take minutes to assemble 10,000 parts, and a wait
        past the budget is StillCompleting (the client repeats the complete)."""
        listed: list[dict[str, Any]] = []
        for part in parts:
            entry: dict[str, Any] = {"PartNumber": part.part_number, "ETag": part.etag}
            if part.checksum_sha256:
                entry["ChecksumSHA256"] = part.checksum_sha256
            listed.append(entry)
        try:
            self._complete.complete_multipart_upload(
                Bucket=bucket,
                Key=key,
                UploadId=s3_upload_id,
                MultipartUpload={"Parts": listed},
                IfNoneMatch="*",
                MpuObjectSize=size,  # S3 refuses an assembly of any other size
            )
        except ReadTimeoutError as error:
            raise StillCompleting(f"S3 is still assembling {key}") from error
        except (ClientError, BotoCoreError) as error:
            raise translate(error, "CompleteMultipartUpload", key) from error

    def abort_multipart(self, bucket: str, key: str, s3_upload_id: str) -> None:
        try:
            self._s3.abort_multipart_upload(Bucket=bucket, Key=key, UploadId=s3_upload_id)
        except (ClientError, BotoCoreError) as error:
            mapped = translate(error, "AbortMultipartUpload", key)
            if not isinstance(mapped, MultipartGone):
                raise mapped from error


def _release(body: Any) -> None:
    """Read a body to its end, so urllib3 returns the connection to the pool, then close it (best effort:
    the bytes that matter have been read or are not needed)."""
    try:
        body.read()
    except (ClientError, BotoCoreError, OSError):
        pass
    finally:
        body.close()
