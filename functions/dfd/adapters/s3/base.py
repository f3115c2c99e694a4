"""What every part of the S3 adapter shares: ClientError -> domain errors, the clients, the read tuning, and
releasing a body's connection."""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from botocore.exceptions import BotoCoreError, ClientError

from dfd.core.config import PARALLEL_PART_SIZE, PARALLEL_THRESHOLD, PARALLEL_WORKERS
from dfd.core.errors import (
    DfdError,
    MultipartGone,
    ObjectArchived,
    ObjectChanged,
    ObjectNotFound,
    PartsRejected,
    ServiceUnavailable,
)

if TYPE_CHECKING:
    from dfd.core.config import Settings

_MISSING = {"NoSuchKey", "404", "NotFound"}
_CHANGED = {"PreconditionFailed", "412"}
_NO_UPLOAD = {"NoSuchUpload"}
# an archived object: GetObject answers InvalidObjectState, CopyObject ObjectNotInActiveTierError (S3's error codes)
_ARCHIVED = {"InvalidObjectState", "ObjectNotInActiveTierError"}
_PARTS_REJECTED = {"InvalidPart", "InvalidPartOrder", "EntityTooSmall"}
# ConditionalRequestConflict (409): a conditional write (IfNoneMatch, IfMatch) raced another on its key; S3 asks
# for a retry (API reference, PutObject / CopyObject / CompleteMultipartUpload, IfNoneMatch)
_RETRYABLE = {
    "SlowDown",
    "503",
    "500",
    "InternalError",
    "ServiceUnavailable",
    "RequestTimeout",
    "ConditionalRequestConflict",
}


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
    if code in _ARCHIVED:
        return ObjectArchived(f"s3 object {key} is archived ({code}): its bytes cannot be read or copied")
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


class Store:
    """The clients every part uses: `client` for object calls, `presign_client` for signed URLs,
    `complete_client` (its read timeout is a request's budget) for CompleteMultipartUpload."""

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


def release(body: Any) -> None:
    """Read a body to its end, so urllib3 returns the connection to the pool, then close it (best effort:
    the bytes that matter have been read or are not needed)."""
    try:
        body.read()
    except (ClientError, BotoCoreError, OSError):
        pass
    finally:
        body.close()
