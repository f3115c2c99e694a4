"""Public JSON shapes, built from records (dfd.core.records): internal attributes such as TTLs, index keys, quota bytes
and S3 upload ids never leak. A field the record does not hold is left out."""

from __future__ import annotations

from typing import Any

from dfd.core.records import ContentState, FileRecord, TenantRef, UploadRecord, UploadStatus

# The fields each view shows, in this order (the API document's schemas list the same: tests/unit/test_openapi.py)
_FILE_FIELDS = (
    "hash",
    "size",
    "content_type",
    "filename",
    "created_at",
    "upload_count",
    "last_upload_at",
    "state",
    "lost_at",
)
_UPLOAD_FIELDS = (
    "upload_id",
    "status",
    "filename",
    "size",
    "content_type",
    "via",
    "created_at",
    "expires_at",
    "processed_at",
    "hash",
    "failed_at",
    "failure",
    "reason",
    "deleted_at",
)
_LISTED = (
    "upload_id",
    "status",
    "filename",
    "size",
    "via",
    "hash",
    "created_at",
    "processed_at",
    "deleted_at",
    "reason",
)


def _present(shown: tuple[str, ...], **fields: Any) -> dict[str, Any]:
    """The fields `shown` that hold a value, in that order."""
    return {name: fields[name] for name in shown if fields.get(name) is not None}


def _content_view(file: FileRecord, described: FileRecord | TenantRef) -> dict[str, Any]:
    """A content: its physical facts from the global record, the rest from `described` — the record itself (an
    admin's view) or the caller's tenant's reference (its first filename and content type, its dates, its upload
    count: never another tenant's). state/lost_at: shown only when the content is not live — `lost` (every copy
    gone: the reconcile marked it) or, to admins, `tombstoned` (every upload deleted, its bytes await the reaper);
    the state is derived (FileRecord.state), a live content shows none."""
    state = file.state
    return _present(
        _FILE_FIELDS,
        hash=file.hash,
        size=file.size,
        content_type=described.content_type,
        filename=described.filename,
        created_at=described.created_at,
        upload_count=described.upload_count,
        last_upload_at=described.last_upload_at,
        state=None if state == ContentState.LIVE else state.value,
        lost_at=file.lost_at,
    )


def file_view(file: FileRecord) -> dict[str, Any]:
    """An admin's view of a content: the global record."""
    return _content_view(file, file)


def tenant_file_view(file: FileRecord, ref: TenantRef) -> dict[str, Any]:
    """A tenant's view of a content."""
    return _content_view(file, ref)


def upload_view(upload: UploadRecord, file: dict[str, Any] | None) -> dict[str, Any]:
    """An upload; `file`: the view of its content (global or the tenant's), when it has one to show."""
    view = _present(
        _UPLOAD_FIELDS,
        upload_id=upload.upload_id,
        status=upload.status.value,
        filename=upload.filename,
        size=upload.size,
        content_type=upload.content_type,
        via=upload.via.value if upload.via is not None else None,  # how its object came in (None: not recorded)
        created_at=upload.created_at,
        expires_at=upload.expires_at,
        processed_at=upload.processed_at,
        hash=upload.hash,
        failed_at=upload.failed_at,  # status failed: when reconcile gave up re-driving it,
        failure=upload.failure if upload.status != UploadStatus.REJECTED else None,  # and why
        reason=upload.failure if upload.status == UploadStatus.REJECTED else None,  # rejected: too_large...
        deleted_at=upload.deleted_at,  # status deleted: when its owner (or an admin) deleted it
    )
    if file is not None:
        view["file"] = file
    return view


def listed_upload_view(upload: UploadRecord) -> dict[str, Any]:
    """An upload as GET /uploads lists it."""
    return {name: value for name, value in upload_view(upload, None).items() if name in _LISTED}
