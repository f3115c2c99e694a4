"""Who may act on an upload (delete it, drive its multipart upload): its owner or an admin."""

from __future__ import annotations

from typing import TYPE_CHECKING

from dfd.core.errors import Forbidden, NotFound

if TYPE_CHECKING:
    from dfd.core.reads import UploadReads
    from dfd.core.records import UploadRecord
    from dfd.identity.caller import Caller


def owned_upload(repo: UploadReads, caller: Caller, upload_id: str, *, missing: str) -> UploadRecord:
    """The upload, when the caller may act on it: another tenant's (or an unknown, or one with no tenant — a
    direct put) is 404 `missing`, exactly as one that does not exist; another user's of the same tenant is 403
    `not_owner`; admins pass."""
    record = repo.get_upload(upload_id)
    if record is None or (not caller.is_admin and record.tenant != caller.tenant):
        raise NotFound(missing)
    if not caller.is_admin and record.owner != caller.owner:
        raise Forbidden("the upload belongs to another user", code="not_owner")
    return record
