"""The object store (dfd.core.objects.ObjectStore) in memory: objects by (bucket, key), S3's multipart uploads."""

from __future__ import annotations

import hashlib
import io
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from dfd.core.config import S3_MIN_PART
from dfd.core.errors import MultipartGone, ObjectArchived, ObjectChanged, ObjectNotFound, PartsRejected
from dfd.core.ids import tenant_from_metadata
from dfd.core.objects import ListedObject, ObjectInfo, OpenedObject, PartInfo, Sink


@dataclass
class FakeObject:
    data: bytes
    etag: str
    version_id: str | None
    content_type: str | None
    checksum_sha256: str | None
    metadata: dict[str, str] = field(default_factory=dict)
    storage_class: str | None = None  # None: STANDARD
    last_modified: str | None = None  # S3's Last-Modified: here, one per put
    crc64nvme: int | None = None  # S3's FULL_OBJECT CRC64NVME, as the put gave it


@dataclass
class FakeObjectStore:
    """Objects by (bucket, key). A GET answers IfMatch like S3 (ObjectChanged when the ETag moved on)."""

    objects: dict[tuple[str, str], FakeObject] = field(default_factory=dict)
    deleted: list[tuple[str, str]] = field(default_factory=list)
    presigned: list[dict[str, Any]] = field(default_factory=list)
    before_stream: Callable[[ObjectInfo], None] | None = None  # runs once, between the open and the read
    streams: int = 0  # bodies read through stream()
    heads: list[tuple[str, str]] = field(default_factory=list)  # exists() calls (HeadObject IfMatch)
    checksum_heads: list[str] = field(default_factory=list)  # stored_crc64nvme() calls, by key
    ranges: list[tuple[str, int, int]] = field(default_factory=list)  # stream_range() calls: key, start, end
    before_range: Callable[[ObjectInfo, int, int], None] | None = None  # runs before each stream_range() read
    _puts: int = 0

    def put(
        self,
        bucket: str,
        key: str,
        data: bytes,
        *,
        checksum: bool = False,
        content_type: str | None = "application/octet-stream",
        metadata: dict[str, str] | None = None,
        etag: str | None = None,
        storage_class: str | None = None,
        crc64nvme: int | None = None,
    ) -> FakeObject:
        """Put an object; its ETag is unique to this put unless given (S3's ETag of the same bytes: `etag`);
        `crc64nvme`: the full-object CRC64NVME S3 stores with it (any number: a test may store a wrong one)."""
        self._puts += 1
        etag = etag or '"' + hashlib.md5(data + str(self._puts).encode(), usedforsecurity=False).hexdigest() + '"'
        digest = hashlib.sha256(data).hexdigest() if checksum else None
        written = f"2026-01-01T00:00:00.{self._puts:06d}Z"
        self.objects[(bucket, key)] = FakeObject(
            data, etag, None, content_type, digest, dict(metadata or {}), storage_class, written, crc64nvme
        )
        return self.objects[(bucket, key)]

    def open(self, bucket: str, key: str, *, expect_checksum: bool = False) -> OpenedObject:
        found = self.objects.get((bucket, key))
        if found is None:
            raise ObjectNotFound(f"s3 object {key} does not exist")
        info = ObjectInfo(
            bucket,
            key,
            found.etag,
            found.version_id,
            len(found.data),
            found.content_type,
            found.checksum_sha256,
            tenant_from_metadata(found.metadata),
            storage_class=found.storage_class,
            last_modified=found.last_modified,
        )
        body = None if expect_checksum else io.BytesIO(found.data)
        return OpenedObject(info, body)

    def stream(self, opened: OpenedObject, sink: Sink) -> int:
        self.streams += 1
        hook, self.before_stream = self.before_stream, None
        if hook is not None:
            hook(opened.info)
        body = opened.take_body()
        if body is None:  # GetObject IfMatch the ETag the HEAD identified
            info = opened.info
            found = self.objects.get((info.bucket, info.key))
            if found is None:
                raise ObjectNotFound(f"s3 object {info.key} does not exist")
            if found.etag != info.etag:
                raise ObjectChanged(f"s3 object {info.key} changed while it was read")
            body = io.BytesIO(found.data)
        count = 0
        with body:
            while chunk := body.read(7):
                sink(memoryview(chunk))
                count += len(chunk)
        return count

    def stream_range(self, info: ObjectInfo, start: int, end: int, sink: Sink) -> int:
        """Bytes [start, end) of the version `info` identified (its ETag): ObjectChanged once it is overwritten."""
        self.ranges.append((info.key, start, end))
        hook = self.before_range
        if hook is not None:
            hook(info, start, end)
        found = self.objects.get((info.bucket, info.key))
        if found is None:
            raise ObjectNotFound(f"s3 object {info.key} does not exist")
        if found.etag != info.etag:
            raise ObjectChanged(f"s3 object {info.key} changed while it was read")
        data = found.data[start:end]
        for at in range(0, len(data), 1 << 16):
            sink(memoryview(data[at : at + (1 << 16)]))
        return len(data)

    def stored_crc64nvme(self, info: ObjectInfo) -> int | None:
        """HeadObject IfMatch the version's ETag, ChecksumMode ENABLED: its stored CRC64NVME."""
        self.checksum_heads.append(info.key)
        found = self.objects.get((info.bucket, info.key))
        if found is None:
            raise ObjectNotFound(f"s3 object {info.key} does not exist")
        if found.etag != info.etag:
            raise ObjectChanged(f"s3 object {info.key} changed while it was read")
        return found.crc64nvme

    def delete(self, bucket: str, key: str, etag: str | None) -> bool:
        found = self.objects.get((bucket, key))
        if found is None:
            return True
        if etag and found.etag != etag:
            return False
        del self.objects[(bucket, key)]
        self.deleted.append((bucket, key))
        return True

    def list_objects(
        self, bucket: str, prefix: str, limit: int, token: str | None
    ) -> tuple[list[ListedObject], str | None]:
        """ListObjectsV2: keys in order; the token is the last key of the page."""
        keys = sorted(k for b, k in self.objects if b == bucket and k.startswith(prefix) and k > (token or ""))
        page = [ListedObject(key, self.objects[(bucket, key)].etag) for key in keys[:limit]]
        return page, (page[-1].key if len(keys) > limit else None)

    copies: int = 0  # copy() calls that wrote an object

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
        found = self.objects.get((bucket, source_key))
        if found is None:
            raise ObjectNotFound(f"s3 object {source_key} does not exist")
        if found.etag != etag or (bucket, target_key) in self.objects:  # CopySourceIfMatch, IfNoneMatch "*"
            raise ObjectChanged(f"s3 object {source_key} changed, or {target_key} exists")
        if found.storage_class in ("GLACIER", "DEEP_ARCHIVE"):  # S3's InvalidObjectState
            raise ObjectArchived(f"s3 object {source_key} is archived")
        self.copies += 1
        self.put(bucket, target_key, found.data, content_type=content_type, metadata=metadata)

    def get_bytes(self, bucket: str, key: str) -> bytes:
        found = self.objects.get((bucket, key))
        if found is None:
            raise ObjectNotFound(f"s3 object {key} does not exist")
        return found.data

    def exists(self, bucket: str, key: str, etag: str | None) -> bool:
        self.heads.append((bucket, key))
        found = self.objects.get((bucket, key))
        return found is not None and (not etag or found.etag == etag)

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
        self.presigned.append(
            {
                "bucket": bucket,
                "key": key,
                "size": size,
                "content_type": content_type,
                "checksum_b64": checksum_b64,
                "metadata": dict(metadata or {}),
            }
        )
        headers = {"content-type": content_type, "content-length": str(size), "if-none-match": "*"}
        if checksum_b64:
            headers["x-amz-checksum-sha256"] = checksum_b64
        for name, value in (metadata or {}).items():
            headers[f"x-amz-meta-{name}"] = value
        return f"https://fake-s3/{bucket}/{key}?expires={expires_in}", headers

    def presign_get(
        self, bucket: str, key: str, *, disposition: str, content_type: str | None = None, expires_in: int
    ) -> str:
        typed = f"&response-content-type={content_type}" if content_type else ""
        return f"https://fake-s3/{bucket}/{key}?expires={expires_in}{typed}"

    # ---------------------------------------------------------------- multipart
    # multiparts: S3 upload id → {"bucket", "key", "checksum", "parts": {n: PartInfo}, "data": {n: bytes}}
    multiparts: dict[str, dict[str, Any]] = field(default_factory=dict)
    aborted: list[str] = field(default_factory=list)
    min_part: int = S3_MIN_PART  # S3's smallest part but the last (a completion with a smaller one: EntityTooSmall)

    def create_multipart(
        self, bucket: str, key: str, *, content_type: str, checksum: bool, metadata: dict[str, str] | None = None
    ) -> str:
        s3_upload_id = f"mpu-{len(self.multiparts) + len(self.aborted) + 1}"
        self.multiparts[s3_upload_id] = {"bucket": bucket, "key": key, "checksum": checksum, "parts": {}, "data": {}}
        self.multiparts[s3_upload_id]["metadata"] = dict(metadata or {})
        return s3_upload_id

    def upload_part(self, s3_upload_id: str, part_number: int, data: bytes, checksum_b64: str | None = None) -> str:
        """A client's PUT of one part (what S3 keeps); its ETag."""
        upload = self.multiparts[s3_upload_id]
        etag = '"' + hashlib.md5(data, usedforsecurity=False).hexdigest() + '"'
        upload["parts"][part_number] = PartInfo(part_number, etag, len(data), checksum_b64)
        upload["data"][part_number] = data
        return etag

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
        headers = {"content-length": str(size)}
        if checksum_b64:
            headers["x-amz-checksum-sha256"] = checksum_b64
        return f"https://fake-s3/{bucket}/{key}?uploadId={s3_upload_id}&partNumber={part_number}", headers

    def list_parts(self, bucket: str, key: str, s3_upload_id: str) -> list[PartInfo]:
        upload = self.multiparts.get(s3_upload_id)
        if upload is None:
            raise MultipartGone(f"no multipart upload {s3_upload_id}")
        return [upload["parts"][n] for n in sorted(upload["parts"])]

    def complete_multipart(self, bucket: str, key: str, s3_upload_id: str, parts: list[PartInfo], *, size: int) -> None:
        upload = self.multiparts.get(s3_upload_id)
        if upload is None:
            raise MultipartGone(f"no multipart upload {s3_upload_id}")
        if (bucket, key) in self.objects:
            raise ObjectChanged(f"s3 object {key} exists")
        small = [part.part_number for part in parts[:-1] if part.size < self.min_part]
        if small:  # S3's EntityTooSmall, as the adapter translates it
            raise PartsRejected(f"parts {small} are below {self.min_part} bytes", details={"s3_code": "EntityTooSmall"})
        missing = [part.part_number for part in parts if part.part_number not in upload["data"]]
        if missing:  # S3's InvalidPart (a part not uploaded to this upload), as the adapter translates it
            raise PartsRejected(f"parts {missing} were not uploaded", details={"s3_code": "InvalidPart"})
        data = b"".join(upload["data"][part.part_number] for part in parts)
        assert len(data) == size
        self.put(bucket, key, data, metadata=upload["metadata"])
        del self.multiparts[s3_upload_id]

    def abort_multipart(self, bucket: str, key: str, s3_upload_id: str) -> None:
        if self.multiparts.pop(s3_upload_id, None) is not None:
            self.aborted.append(s3_upload_id)

    # ---------------------------------------------------------------- a copy across invocations (dfd.ingest.dropcopy)
    part_copies: list[tuple[str, int]] = field(default_factory=list)  # copy_part() calls: S3 upload id, part number
    before_part_copy: Callable[[int], None] | None = None  # runs before each copy_part() (its part number)

    def create_copy(self, bucket: str, target_key: str, *, content_type: str, metadata: dict[str, str]) -> str:
        s3_upload_id = self.create_multipart(bucket, target_key, content_type=content_type, checksum=False)
        self.multiparts[s3_upload_id].update(metadata=dict(metadata), content_type=content_type)
        return s3_upload_id

    def copied_parts(self, bucket: str, target_key: str, upload_id: str) -> dict[int, tuple[str, int]]:
        return {part.part_number: (part.etag, part.size) for part in self.list_parts(bucket, target_key, upload_id)}

    def copy_part(
        self,
        bucket: str,
        source_key: str,
        etag: str,
        target_key: str,
        upload_id: str,
        number: int,
        first: int,
        last: int,
    ) -> str:
        """UploadPartCopy: CopySourceIfMatch `etag` (ObjectChanged), the source gone (ObjectNotFound), the upload
        gone (MultipartGone)."""
        hook = self.before_part_copy
        if hook is not None:
            hook(number)
        self.part_copies.append((upload_id, number))
        if upload_id not in self.multiparts:
            raise MultipartGone(f"no multipart upload {upload_id}")
        found = self.objects.get((bucket, source_key))
        if found is None:
            raise ObjectNotFound(f"s3 object {source_key} does not exist")
        if found.etag != etag:
            raise ObjectChanged(f"s3 object {source_key} changed")
        return self.upload_part(upload_id, number, found.data[first : last + 1])

    def complete_copy(self, bucket: str, target_key: str, upload_id: str, parts: dict[int, str]) -> None:
        upload = self.multiparts.get(upload_id)
        if upload is None:
            raise MultipartGone(f"no multipart upload {upload_id}")
        if (bucket, target_key) in self.objects:  # IfNoneMatch "*"
            raise ObjectChanged(f"s3 object {target_key} exists")
        held = upload["parts"]
        if sorted(parts) != sorted(held) or any(held[n].etag != etag for n, etag in parts.items()):
            raise PartsRejected("the parts named are not the upload's", details={"s3_code": "InvalidPart"})
        listed = [held[n] for n in sorted(parts)]
        size = sum(part.size for part in listed)
        self.complete_multipart(bucket, target_key, upload_id, listed, size=size)
        self.objects[(bucket, target_key)].content_type = upload.get("content_type")

    def abort_copy(self, bucket: str, target_key: str, upload_id: str) -> None:
        self.abort_multipart(bucket, target_key, upload_id)

    def head(self, bucket: str, key: str) -> ObjectInfo:
        with self.open(bucket, key, expect_checksum=True) as opened:
            return opened.info
