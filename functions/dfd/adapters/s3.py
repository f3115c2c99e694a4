"""S3 adapter: open/stream/delete objects and presign URLs; turns ClientError into domain errors."""

from __future__ import annotations

from collections import deque
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from dfd.errors import DfdError, ObjectChanged, ObjectNotFound, ServiceUnavailable
from dfd.hashing import b64_to_hex

CHUNK = 1024 * 1024
_MISSING = {"NoSuchKey", "404", "NotFound"}
_CHANGED = {"PreconditionFailed", "412"}
_RETRYABLE = {"SlowDown", "503", "500", "InternalError", "ServiceUnavailable", "RequestTimeout"}


def translate(error: ClientError | BotoCoreError, action: str, key: str) -> DfdError:
    if isinstance(error, BotoCoreError):
        return ServiceUnavailable(f"S3 {action} {key} failed: {error}")
    code = str(error.response.get("Error", {}).get("Code", ""))
    if code in _MISSING:
        return ObjectNotFound(f"s3 object {key} does not exist")
    if code in _CHANGED:
        return ObjectChanged(f"s3 object {key} changed while it was read")
    if code in _RETRYABLE:
        return ServiceUnavailable(f"S3 {action} {key} is throttled or unavailable ({code})")
    return DfdError(f"S3 {action} {key} failed ({code})", code="storage_error")


@dataclass(frozen=True)
class ObjectInfo:
    bucket: str
    key: str
    etag: str
    version_id: str | None
    size: int
    content_type: str | None
    checksum_sha256: str | None  # hex; only a verified FULL_OBJECT SHA-256


class OpenedObject:
    """A GetObject whose headers are read and whose body is not (yet). Close it when done."""

    def __init__(self, info: ObjectInfo, body: Any) -> None:
        self.info = info
        self._body = body

    def chunks(self, size: int = CHUNK) -> Iterator[bytes]:
        try:
            yield from self._body.iter_chunks(size)
        except (ClientError, BotoCoreError) as error:
            raise translate(error, "GetObject", self.info.key) from error

    def read_exactly(self, size: int) -> Iterator[bytes]:
        left = size
        while left > 0:
            chunk = self._body.read(min(CHUNK, left))
            if not chunk:
                raise ServiceUnavailable(f"s3 object {self.info.key} ended early")
            left -= len(chunk)
            yield chunk

    def close(self) -> None:
        self._body.close()

    def __enter__(self) -> OpenedObject:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class ObjectStore:
    def __init__(self, client: Any, presign_client: Any | None = None) -> None:
        self._s3 = client
        self._presign = presign_client or client
        self._pool: ThreadPoolExecutor | None = None

    def open(self, bucket: str, key: str) -> OpenedObject:
        """GET with the verified checksum requested: identity, size and checksum come from its headers."""
        try:
            response = self._s3.get_object(Bucket=bucket, Key=key, ChecksumMode="ENABLED")
        except (ClientError, BotoCoreError) as error:
            raise translate(error, "GetObject", key) from error
        checksum = response.get("ChecksumSHA256")
        checksum_type = response.get("ChecksumType")
        verified = b64_to_hex(checksum) if checksum and checksum_type in (None, "FULL_OBJECT") else None
        info = ObjectInfo(
            bucket=bucket,
            key=key,
            etag=response["ETag"],
            version_id=response.get("VersionId"),
            size=int(response["ContentLength"]),
            content_type=response.get("ContentType"),
            checksum_sha256=verified,
        )
        return OpenedObject(info, response["Body"])

    def _executor(self, workers: int) -> ThreadPoolExecutor:
        if self._pool is None or self._pool._max_workers < workers:
            self._pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="dfd-range")
        return self._pool

    def _range(self, info: ObjectInfo, start: int, end: int) -> bytes:
        kwargs: dict[str, Any] = {"Bucket": info.bucket, "Key": info.key, "Range": f"bytes={start}-{end - 1}"}
        kwargs["IfMatch"] = info.etag
        if info.version_id and info.version_id != "null":
            kwargs["VersionId"] = info.version_id
        try:
            body = self._s3.get_object(**kwargs)["Body"]
            data: bytes = body.read()
        except (ClientError, BotoCoreError) as error:
            raise translate(error, "GetObject", info.key) from error
        if len(data) != end - start:
            raise ObjectChanged(f"s3 object {info.key}: range {start}-{end} returned {len(data)} bytes")
        return data

    def parallel_chunks(self, opened: OpenedObject, part_size: int, workers: int) -> Iterator[bytes]:
        """The object's bytes in order: the first part from the open GET, the rest as ranged GETs (IfMatch
        its ETag) fetched `workers` at a time — in-flight memory ≤ workers x part_size."""
        info = opened.info
        first = min(part_size, info.size)
        yield from opened.read_exactly(first)
        opened.close()
        ranges = [(start, min(start + part_size, info.size)) for start in range(first, info.size, part_size)]
        pool = self._executor(workers)
        window: deque[Future[bytes]] = deque()
        pending = iter(ranges)
        try:
            for start, end in pending:
                window.append(pool.submit(self._range, info, start, end))
                if len(window) >= workers:
                    break
            while window:
                data = window.popleft().result()
                nxt = next(pending, None)
                if nxt is not None:
                    window.append(pool.submit(self._range, info, *nxt))
                yield data
                del data
        finally:
            for future in window:
                future.cancel()

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

    def presign_put(
        self,
        bucket: str,
        key: str,
        *,
        size: int,
        content_type: str,
        checksum_b64: str | None,
        expires_in: int,
    ) -> tuple[str, dict[str, str]]:
        """A SigV4 PUT URL signing Content-Length, Content-Type, If-None-Match: * (and the SHA-256)."""
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
        try:
            url: str = self._presign.generate_presigned_url("put_object", Params=params, ExpiresIn=expires_in)
        except (ClientError, BotoCoreError) as error:
            raise translate(error, "presign PUT", key) from error
        return url, headers

    def presign_get(self, bucket: str, key: str, *, disposition: str, expires_in: int) -> str:
        try:
            url: str = self._presign.generate_presigned_url(
                "get_object",
                Params={"Bucket": bucket, "Key": key, "ResponseContentDisposition": disposition},
                ExpiresIn=expires_in,
            )
        except (ClientError, BotoCoreError) as error:
            raise translate(error, "presign GET", key) from error
        return url
