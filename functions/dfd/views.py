"""Public JSON shapes of stored records (internal attributes such as ttl and index keys never leak)."""

from __future__ import annotations

from typing import Any

from dfd.ports import LIVE, LOST, content_state

# state/lost_at: shown only when the content is not live — `lost` (every copy gone: the reconcile marked it) or,
# to admins, `tombstoned` (every upload deleted, its bytes await the reaper); a live content shows no state. The
# state is derived (dfd.ports.content_state: tombstoned = a live count of 0), never copied from the record
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

FILE_LOST = LOST  # FileMetadata.state of a content none of whose copies survives
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
    "deleted_at",  # status deleted: when its owner (or an admin) deleted it
)


def _with_state(item: dict[str, Any]) -> dict[str, Any]:
    state = content_state(item)
    shown = {k: v for k, v in item.items() if k != "state"}
    return shown if state == LIVE else shown | {"state": state}


def file_view(item: dict[str, Any]) -> dict[str, Any]:
    item = _with_state(item)
    return {name: item[name] for name in _FILE_FIELDS if name in item}


# A tenant's view of a content: the physical facts from the global record, the rest from the tenant's own
# reference (its first filename and content type, its dates, its upload count), never another tenant's.
_PHYSICAL_FIELDS = ("hash", "size", "state", "lost_at")
_TENANT_FIELDS = ("filename", "content_type", "created_at", "upload_count", "last_upload_at")


def tenant_file_view(file: dict[str, Any], ref: dict[str, Any]) -> dict[str, Any]:
    file = _with_state(file)
    view = {name: file[name] for name in _PHYSICAL_FIELDS if name in file}
    view.update({name: ref[name] for name in _TENANT_FIELDS if name in ref})
    return {name: view[name] for name in _FILE_FIELDS if name in view}


def upload_view(item: dict[str, Any], file: dict[str, Any] | None) -> dict[str, Any]:
    view = {name: item[name] for name in _UPLOAD_FIELDS if name in item}
    if file is not None:
        view["file"] = file  # already a file view (global or the tenant's)
    return view
