"""The object store's port (S3, :class:`dfd.adapters.s3.ObjectStore`): the calls the domain makes and what they
return."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

Sink = Callable[[memoryview], object]


@dataclass(frozen=True)
class ObjectInfo:
    bucket: str
    key: str
    etag: str
    version_id: str | None
    size: int
    content_type: str | None
    checksum_sha256: str | None  # hex; only a verified FULL_OBJECT SHA-256
    tenant_hint: str | None = None  # the uploader's tenant from the object's metadata (dfd.core.ids.tenant_metadata)
    # from a HeadObject: its storage class (None: STANDARD), whether it is archived (ArchiveStatus, an
    # INTELLIGENT_TIERING archive tier: unreadable until restored), and when it was written (ISO 8601, S3's
    # Last-Modified: one write of a key, to the second)
    storage_class: str | None = None
    archived: bool = False
    last_modified: str | None = None


class OpenedObject:
    """An identified object version, and the body of its GetObject when one was sent. Close it when done."""

    def __init__(self, info: ObjectInfo, body: Any | None) -> None:
        self.info = info
        self._body = body

    def take_body(self) -> Any | None:
        """The open GetObject body (the caller closes it), or None when no GetObject was sent."""
        body, self._body = self._body, None
        return body

    def close(self) -> None:
        body, self._body = self._body, None
        if body is not None:
            body.close()

    def __enter__(self) -> OpenedObject:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


@dataclass(frozen=True)
class PartInfo:
    """One part S3 holds for a multipart upload (ListParts)."""

    part_number: int
    etag: str
    size: int
    checksum_sha256: str | None = None  # base64, when the upload was created with SHA-256 checksums


@dataclass(frozen=True)
class ListedObject:
    """One object of a bucket listing (ListObjectsV2)."""

    key: str
    etag: str


class ObjectStore(Protocol):
    def open(self, bucket: str, key: str, *, expect_checksum: bool = False) -> OpenedObject: ...

    def stream(self, opened: OpenedObject, sink: Sink) -> int:
        """Feed every byte of the identified version to `sink`, in order; return the count fed (the adapter
        chooses one stream or parallel ranges)."""
        ...

    def stream_range(self, info: ObjectInfo, start: int, end: int, sink: Sink) -> int:
        """Feed bytes [start, end) of the identified version (IfMatch its ETag, its VersionId) to `sink`, in order;
        return the count fed. Raises ObjectChanged (overwritten: 412) or ObjectNotFound."""
        ...

    def stored_crc64nvme(self, info: ObjectInfo) -> int | None:
        """S3's full-object CRC64NVME of the identified version (HeadObject IfMatch its ETag, its VersionId,
        ChecksumMode ENABLED); None when it has none or only a COMPOSITE one (a multipart's checksum of part
        checksums). Raises ObjectChanged (412: overwritten) or ObjectNotFound."""
        ...

    def delete(self, bucket: str, key: str, etag: str | None) -> bool: ...

    def exists(self, bucket: str, key: str, etag: str | None) -> bool:
        """Whether the object version is there (HeadObject IfMatch `etag`): False when missing or changed."""
        ...

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
        """A presigned PUT and the headers the client must send with it (`metadata`: x-amz-meta-* signed)."""
        ...

    def presign_get(
        self, bucket: str, key: str, *, disposition: str, content_type: str | None = None, expires_in: int
    ) -> str: ...

    # ------------------------------------------------------------------ multipart (dfd.uploads.multipart)
    def create_multipart(
        self, bucket: str, key: str, *, content_type: str, checksum: bool, metadata: dict[str, str] | None = None
    ) -> str:
        """CreateMultipartUpload (ChecksumAlgorithm SHA256 when `checksum`, the object's `metadata`); the S3
        upload id."""
        ...

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
        """A SigV4 UploadPart URL signing Content-Length (and the part's SHA-256), and the headers to send."""
        ...

    def list_parts(self, bucket: str, key: str, s3_upload_id: str) -> list[PartInfo]:
        """Every part S3 holds (all ListParts pages), by part number; raises MultipartGone."""
        ...

    def complete_multipart(self, bucket: str, key: str, s3_upload_id: str, parts: list[PartInfo], *, size: int) -> None:
        """CompleteMultipartUpload IfNoneMatch "*" with the parts' ETags (and checksums); raises MultipartGone,
        ObjectChanged (an object exists at the key), PartsRejected."""
        ...

    def abort_multipart(self, bucket: str, key: str, s3_upload_id: str) -> None:
        """AbortMultipartUpload; an upload already gone is not an error."""
        ...

    def head(self, bucket: str, key: str) -> ObjectInfo:
        """HeadObject; raises ObjectNotFound."""
        ...

    def list_objects(
        self, bucket: str, prefix: str, limit: int, token: str | None
    ) -> tuple[list[ListedObject], str | None]:
        """One page of at most `limit` objects under `prefix` and the token of the next (None: the last)."""
        ...

    def copy(
        self,
        bucket: str,
        source_key: str,
        etag: str,
        target_key: str,
        *,
        content_type: str,
        metadata: dict[str, str],
        size: int | None = None,
    ) -> None:
        """Server-side copy of the version `etag` of `source_key` (`size` bytes) to `target_key` (same bucket), where
        no object is, with this `content_type` and `metadata`; raises ObjectChanged (the source moved on, or an
        object is at the target) or ObjectNotFound."""
        ...

    def get_bytes(self, bucket: str, key: str) -> bytes:
        """A small object's whole body (an inventory report's manifest or data file); raises ObjectNotFound."""
        ...
