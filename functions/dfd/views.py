"""Public JSON shapes of stored records (internal attributes such as ttl and index keys never leak)."""

from __future__ import annotations

from typing import Any

_FILE_FIELDS = ("hash", "size", "content_type", "filename", "created_at", "upload_count", "last_upload_at")
_UPLOAD_FIELDS = (
    "upload_id",
    "status",
    "filename",
    "size",
    "content_type",
    "created_at",
    "expires_at",
    "processed_at",
    "hash",
    "failed_at",  # status failed: when reconcile gave up re-driving it,
    "failure",  # and why
)


def file_view(item: dict[str, Any]) -> dict[str, Any]:
    return {name: item[name] for name in _FILE_FIELDS if name in item}


def upload_view(item: dict[str, Any], file: dict[str, Any] | None) -> dict[str, Any]:
    view = {name: item[name] for name in _UPLOAD_FIELDS if name in item}
    if file is not None:
        view["file"] = file_view(file)
    return view
