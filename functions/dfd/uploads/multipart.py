"""Multipart uploads: the server owns the S3 multipart upload, clients only see their upload id.

* ``POST /upload`` (dfd.uploads.service delegates here) registers the upload with its part size and count.
* ``POST /uploads/{id}/parts`` presigns UploadPart URLs, each signing its part's exact Content-Length and,
  when the client gives it, the part's SHA-256 (S3 then verifies the part in transit).
* ``GET /uploads/{id}/parts`` lists what S3 holds (every ListParts page): a client resumes from it.
* ``POST /uploads/{id}/complete`` checks parts 1..part_count with their expected sizes and completes
  (If-None-Match: *); completing again answers the same.
* :meth:`MultipartService.abort` aborts it (DELETE /uploads/{id}); reconcile aborts expired ones.

The S3 multipart upload is created by the first parts call, not by POST /upload: an upload created with
``ChecksumAlgorithm=SHA256`` makes S3 refuse any UploadPart without its ``x-amz-checksum-sha256`` and any
CompleteMultipartUpload without every part's checksum, so its algorithm follows what the client does. A first
call with checksums creates it with SHA-256 (later calls must give them: 400 ``checksum_required``); a first
call without creates it with none (checksums given later are not signed: the answered headers say what to
send). Two concurrent first calls race on a conditional write; the loser aborts its own S3 upload.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Callable, Mapping
from dataclasses import replace
from datetime import datetime
from typing import TYPE_CHECKING, Any

from dfd.core import clock
from dfd.core.config import MIB, S3_MAX_PUT, S3_MIN_PART, Settings
from dfd.core.conflicts import MultipartAttached
from dfd.core.errors import (
    Conflict,
    MultipartGone,
    ObjectChanged,
    ObjectNotFound,
    StillCompleting,
    Unauthorized,
    ValidationFailed,
)
from dfd.core.ids import new_upload_id, object_key, tenant_metadata
from dfd.core.records import UploadRecord, UploadStatus, UploadVia
from dfd.core.text import refuse_unknown
from dfd.queries.service import check_upload_id
from dfd.uploads.ownership import owned_upload
from dfd.uploads.ports import NewMultipart, NewUpload

if TYPE_CHECKING:
    from dfd.core.objects import ObjectStore, PartInfo
    from dfd.identity.caller import Caller
    from dfd.uploads.ports import MultipartStore

MAX_PARTS = 10_000  # S3's limit per multipart upload
MAX_PARTS_PER_CALL = 100
PART_REQUEST_FIELDS = frozenset({"part_number", "checksum_sha256"})  # an entry of POST /uploads/{id}/parts
COMPLETE_PART_FIELDS = frozenset({"part_number", "etag"})  # an entry of POST /uploads/{id}/complete
# POST /uploads/{id}/complete while S3 still assembles the object: 202 with this status and a Retry-After
COMPLETING = "completing"
RETRY_AFTER_SECONDS = 5


def part_layout(size: int, min_part: int, unit: int = MIB) -> tuple[int, int]:
    """(part_size, part_count) of a `size`-byte upload: max(min_part, ⌈size / 10,000⌉) rounded up to a whole
    `unit` (a MiB); the last part holds the rest."""
    part_size = max(min_part, -(-size // MAX_PARTS))
    part_size = -(-part_size // unit) * unit
    return part_size, -(-size // part_size)


def checked_part_size(part_size: Any, size: int) -> int:
    """A client's `part_size` for a `size`-byte upload: an integer of S3's bounds (5 MiB .. 5 GiB per part) that
    splits `size` into at most 10,000 parts; ValidationFailed (400) otherwise."""
    if isinstance(part_size, bool) or not isinstance(part_size, int):
        raise ValidationFailed("part_size must be an integer number of bytes", details={"field": "part_size"})
    if not S3_MIN_PART <= part_size <= S3_MAX_PUT:
        raise ValidationFailed(
            f"part_size must be between {S3_MIN_PART} and {S3_MAX_PUT} bytes",
            details={"field": "part_size", "min": S3_MIN_PART, "max": S3_MAX_PUT},
        )
    if -(-size // part_size) > MAX_PARTS:
        smallest = -(-size // MAX_PARTS)
        raise ValidationFailed(
            f"part_size {part_size} splits {size} bytes into more than {MAX_PARTS} parts; use at least {smallest}",
            details={"field": "part_size", "min": max(smallest, S3_MIN_PART), "max": S3_MAX_PUT},
        )
    return part_size


def part_length(size: int, part_size: int, part_number: int) -> int:
    """The exact byte count of part `part_number` (1-based)."""
    part_count = -(-size // part_size)
    return part_size if part_number < part_count else size - (part_count - 1) * part_size


class MultipartService:
    def __init__(
        self,
        settings: Settings,
        repo: MultipartStore,
        objects: ObjectStore,
        *,
        now: Callable[[], datetime] = clock.now,
        s3_min_part: int = S3_MIN_PART,
        min_part: int | None = None,
    ) -> None:
        """`s3_min_part`: the object store's smallest part but the last (S3's 5 MiB); `min_part`: the part size it
        lays out at least (settings.multipart_min_part). The simulation's in-memory store, refusing smaller parts
        as S3 does, lowers both."""
        self._s = settings
        self._repo = repo
        self._objects = objects
        self._now = now
        self._s3_min_part = s3_min_part
        self._min_part = settings.multipart_min_part if min_part is None else min_part

    # ------------------------------------------------------------------ POST /upload
    def wanted(self, size: int, asked: bool) -> bool:
        """Whether an upload of `size` bytes is multipart: asked for, at least the threshold, or above 5 GiB."""
        return asked or size >= self._s.multipart_threshold or size > S3_MAX_PUT

    def create(
        self,
        caller: Caller | None,
        *,
        filename: str,
        size: int,
        content_type: str,
        sha256: str | None,
        part_size: int | None = None,
    ) -> dict[str, Any]:
        """Register a pending multipart upload of the caller (in parts of `part_size` when the client chose it,
        checked by checked_part_size); the 201 body."""
        if caller is None:
            raise Unauthorized("a multipart upload needs a verified identity")
        if size < self._s3_min_part:
            raise ValidationFailed(
                f"a multipart upload has at least {self._s3_min_part} bytes", details={"field": "multipart"}
            )
        now = self._now()
        if part_size is None:
            part_size, part_count = part_layout(size, self._min_part, min(MIB, self._s3_min_part))
        else:
            part_count = -(-size // part_size)
        # never the checksum hint: a multipart object only carries a COMPOSITE checksum, the ingest hashes it
        upload_id = new_upload_id(checksummed=False)
        key = object_key(self._s.upload_prefix, upload_id)
        expires_in = self._s.multipart_expires
        expires_at = clock.plus(now, seconds=expires_in)
        upload = NewUpload(
            upload_id,
            filename,
            size,
            content_type,
            sha256,
            key,
            self._s.bucket,
            expires_at,
            caller.owner,
            caller.tenant,
            UploadVia.MULTIPART,
        )
        multipart = NewMultipart(caller.owner, caller.tenant, part_size, part_count)
        self._repo.register_multipart_upload(upload, multipart, now)
        return {
            "upload_id": upload_id,
            "multipart": True,
            "part_size": part_size,
            "part_count": part_count,
            "key": key,
            "bucket": self._s.bucket,
            "expires_in": expires_in,
            "expires_at": clock.iso(expires_at),
        }

    # ------------------------------------------------------------------ POST /uploads/{id}/parts
    def presign_parts(self, caller: Caller, upload_id: str, body: Any) -> dict[str, Any]:
        record = self._pending(caller, upload_id)
        wanted = _parse_part_requests(body, record.part_count)
        given = any(checksum is not None for _, checksum in wanted)
        record = self._ensure_s3_upload(record, checksums=given)
        signed = record.part_checksums
        if signed and not all(checksum is not None for _, checksum in wanted):
            missing = [number for number, checksum in wanted if checksum is None]
            raise ValidationFailed(
                "this upload's parts carry SHA-256 checksums: give checksum_sha256 for every part",
                code="checksum_required",
                details={"parts": missing},
            )
        size, part_size = _size(record), record.part_size
        expires_in = self._s.upload_url_expires
        parts = []
        for number, checksum in wanted:
            url, headers = self._objects.presign_upload_part(
                *_where(record),
                str(record.s3_upload_id),
                number,
                size=part_length(size, part_size, number),
                checksum_b64=checksum if signed else None,
                expires_in=expires_in,
            )
            parts.append({"part_number": number, "url": url, "method": "PUT", "headers": headers})
        return {"parts": parts, "expires_in": expires_in}

    def _ensure_s3_upload(self, record: UploadRecord, *, checksums: bool) -> UploadRecord:
        """The record with its S3 multipart upload, created now when it has none (see the module docstring)."""
        if record.s3_upload_id:
            return record
        s3_upload_id = self._objects.create_multipart(
            *_where(record),
            content_type=str(record.content_type),
            checksum=checksums,
            metadata=tenant_metadata(record.tenant) if record.tenant else None,
        )
        try:
            self._repo.attach_s3_upload(record.upload_id, s3_upload_id, part_checksums=checksums)
        except MultipartAttached:
            self._objects.abort_multipart(*_where(record), s3_upload_id)
            current = self._repo.get_upload(record.upload_id)
            if current is None or current.status != UploadStatus.PENDING or not current.s3_upload_id:
                raise _not_pending(current) from None
            return current
        return replace(record, s3_upload_id=s3_upload_id, part_checksums=checksums)

    # ------------------------------------------------------------------ GET /uploads/{id}/parts
    def list_parts(self, caller: Caller, upload_id: str) -> dict[str, Any]:
        record = self._pending(caller, upload_id)
        parts = self._parts(record)
        return {
            "upload_id": upload_id,
            "parts": [{"part_number": p.part_number, "etag": p.etag, "size": p.size} for p in parts],
            "part_size": record.part_size,
            "part_count": record.part_count,
            "size": _size(record),
            "status": record.status.value,
        }

    def _parts(self, record: UploadRecord) -> list[PartInfo]:
        if not record.s3_upload_id:
            return []
        return self._objects.list_parts(*_where(record), record.s3_upload_id)

    # ------------------------------------------------------------------ POST /uploads/{id}/complete
    def complete(self, caller: Caller, upload_id: str, body: Any) -> dict[str, Any]:
        """202 {"upload_id", "status"}: completed now, or already (the same answer, nothing changes)."""
        record = self._owned(caller, upload_id)
        if record.status != UploadStatus.PENDING:
            if record.completed_at or record.status.processed:
                return {"upload_id": upload_id, "status": record.status.value}
            raise _not_pending(record)
        expected_etags = _parse_complete(body, record.part_count)
        if record.completed_at:
            return {"upload_id": upload_id, "status": UploadStatus.PENDING.value}
        try:
            parts = self._parts(record)
        except MultipartGone:
            return self._after_gone(record)
        self._check_parts(record, parts, expected_etags)
        try:
            self._objects.complete_multipart(*_where(record), str(record.s3_upload_id), parts, size=_size(record))
        except (MultipartGone, ObjectChanged):
            return self._after_gone(record)
        except StillCompleting:  # S3 carries on; the client repeats this request after Retry-After
            return {"upload_id": upload_id, "status": COMPLETING}
        self._repo.mark_multipart_completed(upload_id, self._now())
        return {"upload_id": upload_id, "status": UploadStatus.PENDING.value}

    def _check_parts(self, record: UploadRecord, parts: list[PartInfo], expected_etags: dict[int, str]) -> None:
        size, part_size, part_count = _size(record), record.part_size, record.part_count
        held = {part.part_number: part for part in parts}
        missing = [n for n in range(1, part_count + 1) if n not in held]
        wrong = [
            n for n, part in sorted(held.items()) if n > part_count or part.size != part_length(size, part_size, n)
        ]
        if missing or wrong:
            raise Conflict(
                "the upload's parts are not all there with their expected sizes",
                code="incomplete",
                details={"missing": missing, "wrong_size": wrong},
            )
        differ = [n for n, etag in sorted(expected_etags.items()) if _etag(held[n].etag) != _etag(etag)]
        if differ:
            raise Conflict(
                "the given ETags differ from the parts S3 holds", code="etag_mismatch", details={"parts": differ}
            )

    def _after_gone(self, record: UploadRecord) -> dict[str, Any]:
        """S3 knows the multipart upload no more, or an object took the key: completed before (a lost answer,
        or a concurrent complete) when the object exists, else aborted."""
        try:
            self._objects.head(*_where(record))
        except ObjectNotFound:
            raise MultipartGone(
                "the multipart upload was aborted or expired; start a new upload", details={"status": "aborted"}
            ) from None
        self._repo.mark_multipart_completed(record.upload_id, self._now())
        current = self._repo.get_upload(record.upload_id) or record
        return {"upload_id": record.upload_id, "status": current.status.value}

    # ------------------------------------------------------------------ abort (DELETE /uploads/{id})
    def abort(self, caller: Caller, upload_id: str) -> dict[str, Any]:
        """Abort the caller's pending multipart upload in S3 and mark it `deleted`."""
        record = self._pending(caller, upload_id)
        if record.s3_upload_id:
            self._objects.abort_multipart(*_where(record), record.s3_upload_id)
        # its quota bytes are released from its tenant's pending usage, in the same write
        deleted = UploadStatus.DELETED
        if not self._repo.end_pending_upload(
            upload_id, deleted, self._now(), tenant=record.tenant, quota_bytes=record.quota_bytes
        ):
            raise _not_pending(self._repo.get_upload(upload_id) or record)
        return {"upload_id": upload_id, "status": deleted.value}

    # ------------------------------------------------------------------ records and ownership
    def _owned(self, caller: Caller, upload_id: str) -> UploadRecord:
        """The caller's multipart upload record: another tenant's (or an unknown) id → 404, a same-tenant
        upload of another user → 403 not_owner (admins pass), a single-PUT upload → 409 not_multipart; a malformed
        id → 400 invalid_id."""
        check_upload_id(upload_id)
        record = owned_upload(self._repo, caller, upload_id, missing="no such upload")
        if not record.multipart:
            raise Conflict("the upload is a single PUT, not a multipart upload", code="not_multipart")
        return record

    def _pending(self, caller: Caller, upload_id: str) -> UploadRecord:
        """The caller's multipart upload, still pending and not completed (else 409 not_pending)."""
        record = self._owned(caller, upload_id)
        if record.status != UploadStatus.PENDING or record.completed_at:
            raise _not_pending(record)
        return record


def _where(record: UploadRecord) -> tuple[str, str]:
    """The bucket and key of a registered upload's object (a registered record always names both)."""
    return str(record.bucket), str(record.s3_key)


def _size(record: UploadRecord) -> int:
    return record.size or 0


def _not_pending(record: UploadRecord | None) -> Conflict:
    status: str | None = None if record is None else record.status.value
    if record is not None and record.status == UploadStatus.PENDING and record.completed_at:
        status = "completed"
    return Conflict("the upload is no longer pending", code="not_pending", details={"status": status})


def _etag(value: str) -> str:
    return value.strip().strip('"')


def _part_number(value: Any, part_count: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValidationFailed("part_number must be an integer", details={"field": "part_number"})
    if not 1 <= value <= part_count:
        raise ValidationFailed(
            f"part_number {value} is outside 1..{part_count}", details={"field": "part_number", "value": value}
        )
    return value


def _entries(body: Any, *, required: bool) -> list[Mapping[str, Any]]:
    if body is None and not required:
        return []
    if not isinstance(body, Mapping):
        raise ValidationFailed("request body must be a JSON object")
    refuse_unknown(body, {"parts"})
    parts = body.get("parts")
    if parts is None and not required:
        return []
    if not isinstance(parts, list) or not all(isinstance(entry, Mapping) for entry in parts):
        raise ValidationFailed("parts must be a list of objects", details={"field": "parts"})
    return parts


def _parse_part_requests(body: Any, part_count: int) -> list[tuple[int, str | None]]:
    """[(part_number, checksum_b64 | None)] of a POST /uploads/{id}/parts body."""
    entries = _entries(body, required=True)
    if not 1 <= len(entries) <= MAX_PARTS_PER_CALL:
        raise ValidationFailed(
            f"parts must hold 1 to {MAX_PARTS_PER_CALL} entries", details={"field": "parts", "count": len(entries)}
        )
    wanted: list[tuple[int, str | None]] = []
    seen: set[int] = set()
    for entry in entries:
        refuse_unknown(entry, PART_REQUEST_FIELDS)
        number = _part_number(entry.get("part_number"), part_count)
        if number in seen:
            raise ValidationFailed(f"part_number {number} appears twice", details={"field": "part_number"})
        seen.add(number)
        checksum = entry.get("checksum_sha256")
        if checksum is not None and not _is_sha256_b64(checksum):
            raise ValidationFailed(
                "checksum_sha256 must be the base64 of 32 bytes", details={"field": "checksum_sha256", "part": number}
            )
        wanted.append((number, checksum))
    return wanted


def _parse_complete(body: Any, part_count: int) -> dict[int, str]:
    """{part_number: etag} of an optional POST /uploads/{id}/complete body."""
    expected: dict[int, str] = {}
    for entry in _entries(body, required=False):
        refuse_unknown(entry, COMPLETE_PART_FIELDS)
        number = _part_number(entry.get("part_number"), part_count)
        etag = entry.get("etag")
        if not isinstance(etag, str) or not 1 <= len(etag) <= 128:
            raise ValidationFailed("etag must be a string", details={"field": "etag", "part": number})
        if number in expected:
            raise ValidationFailed(f"part_number {number} appears twice", details={"field": "part_number"})
        expected[number] = etag
    return expected


def _is_sha256_b64(value: Any) -> bool:
    if not isinstance(value, str) or len(value) != 44:
        return False
    try:
        return len(base64.b64decode(value, validate=True)) == 32
    except (binascii.Error, ValueError):
        return False
