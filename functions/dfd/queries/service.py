"""Read side: metadata, download links, stats, file listing."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

from dfd.core.errors import BadRequest, Forbidden, Gone, NotFound, NotReady
from dfd.core.ids import is_hash, is_upload_id
from dfd.core.records import COUNTER_FIELDS, FileRecord, UploadRecord, UploadStatus, holds
from dfd.queries.tokens import decode_token, decode_upload_token, encode_token
from dfd.queries.views import file_view, listed_upload_view, tenant_file_view, upload_view

if TYPE_CHECKING:
    from dfd.core.config import Settings
    from dfd.core.objects import ObjectStore
    from dfd.identity.caller import Caller
    from dfd.ingest.ports import ProgressReads
    from dfd.queries.ports import QueryStore

DEFAULT_LIMIT = 50
MAX_LIMIT = 1000
_LIMIT_RE = re.compile(r"[0-9]{1,4}")


def check_id(raw: str | None) -> str:
    """A path id: 64-hex content hash or 32-hex upload id; anything else is malformed (400)."""
    if not raw or not (is_hash(raw) or is_upload_id(raw)):
        raise BadRequest("id must be a 64-character hex SHA-256 or a 32-character hex upload id", code="invalid_id")
    return raw


def check_upload_id(raw: str) -> str:
    """A path id that must name an upload (32 hex); anything else is malformed (400)."""
    if not is_upload_id(raw):
        raise BadRequest("id must be a 32-character hex upload id", code="invalid_id")
    return raw


def parse_limit(raw: str | None) -> int:
    """The page size: absent is the default; present, even empty (`?limit=`), it must be an integer in range."""
    if raw is None:
        return DEFAULT_LIMIT
    if not _LIMIT_RE.fullmatch(raw) or not 1 <= int(raw) <= MAX_LIMIT:
        raise BadRequest(f"limit must be an integer from 1 to {MAX_LIMIT}", code="invalid_limit")
    return int(raw)


def content_disposition(filename: str) -> str:
    """attachment with an ASCII fallback and the exact UTF-8 name (RFC 6266 / 5987)."""
    fallback = "".join(ch if 32 <= ord(ch) < 127 and ch not in '"\\' else "_" for ch in filename)
    return f"attachment; filename=\"{fallback}\"; filename*=UTF-8''{quote(filename, safe='')}"


class Queries:
    """Reads on behalf of a caller (dfd.identity.caller.Caller), under the tenancy rules: a non-admin sees content only
    through its tenant's reference and uploads only of its tenant (or its own); "not yours" answers exactly like
    "does not exist" (404, same body), never 403; admins see the global records; /admin/* is admins only."""

    def __init__(
        self,
        settings: Settings,
        repo: QueryStore,
        objects: ObjectStore | None = None,
        *,
        progress: tuple[int, ProgressReads] | None = None,
    ) -> None:
        """`progress`: the segment threshold and the hashing progress a pending upload above it shows (None: no
        object is hashed across invocations)."""
        self._s = settings
        self._repo = repo
        self._objects = objects
        self._progress = progress

    @staticmethod
    def _no_file(digest: str) -> NotFound:
        return NotFound(f"no stored file has sha256 {digest}")

    def _file(self, digest: str, caller: Caller) -> tuple[FileRecord, dict[str, Any]]:
        """(the file record, the caller's view of it): an admin's is the global record, anyone else's their
        tenant's (404 when the tenant does not hold the content)."""
        if caller.is_admin:
            item = self._repo.get_file(digest)
            if item is None:
                raise self._no_file(digest)
            return item, file_view(item)
        item, ref = self._repo.tenant_file(caller.tenant, digest)
        if item is None or ref is None or not holds(ref):  # a reference at 0 awaits the reaper: not held
            raise self._no_file(digest)
        return item, tenant_file_view(item, ref)

    def _upload(self, upload_id: str, caller: Caller) -> UploadRecord:
        item = self._repo.get_upload(upload_id)
        if item is None or not self._may_see(item, caller):
            raise NotFound(f"no upload has id {upload_id}")
        return item

    @staticmethod
    def _may_see(upload: UploadRecord, caller: Caller) -> bool:
        if caller.is_admin:
            return True
        if upload.tenant is None:  # direct puts (no uploader): admins only
            return False
        return upload.owner == caller.owner or upload.tenant == caller.tenant

    def metadata(self, raw_id: str | None, caller: Caller) -> dict[str, Any]:
        ident = check_id(raw_id)
        if is_hash(ident):
            return self._file(ident, caller)[1]
        upload = self._upload(ident, caller)
        view = None
        if upload.hash and upload.status.processed:
            try:
                view = self._file(upload.hash, caller)[1]
            except NotFound:
                view = None
        shown = upload_view(upload, view)
        if self._progress is not None and upload.status == UploadStatus.PENDING:
            threshold, reads = self._progress
            if upload.size is not None and upload.size > threshold and upload.s3_key:
                hashing = reads.hashing_of_key(upload.bucket or self._s.bucket, upload.s3_key)
                if hashing is not None and hashing.hashed < hashing.size:
                    shown["hashing"] = {"hashed_bytes": hashing.hashed, "total_bytes": hashing.size}
        return shown

    def download(self, raw_id: str | None, caller: Caller) -> dict[str, Any]:
        assert self._objects is not None
        ident = check_id(raw_id)
        if is_hash(ident):
            file, view = self._file(ident, caller)
            filename = str(view.get("filename") or ident)
            content_type = view.get("content_type")
        else:
            upload = self._upload(ident, caller)
            if upload.status == UploadStatus.DELETED:
                raise Gone(f"upload {ident} was deleted", details={"deleted_at": upload.deleted_at})
            if not upload.status.processed or not upload.hash:
                raise NotReady(
                    f"upload {ident} is {upload.status.value}; the file is not available yet",
                    details={"status": upload.status.value},
                )
            file, view = self._file(upload.hash, caller)
            filename = str(upload.filename or view.get("filename") or ident)
            content_type = upload.content_type or view.get("content_type")
        if not file.live:  # every reference was deleted: its bytes await the reaper (admins only see it)
            raise Gone(f"content {file.hash} was deleted")
        expires_in = self._s.download_url_expires
        url = self._objects.presign_get(
            file.bucket or self._s.bucket,
            str(file.s3_key),
            disposition=content_disposition(filename),
            content_type=str(content_type or "application/octet-stream"),
            expires_in=expires_in,
        )
        return {
            "download_url": url,
            "expires_in": expires_in,
            "filename": filename,
            "size": file.size,
            "hash": file.hash,
            "content_type": content_type,
        }

    @staticmethod
    def _admin_only(caller: Caller) -> None:
        if not caller.is_admin:
            raise Forbidden("admins only")

    def stats(self, caller: Caller) -> dict[str, Any]:
        self._admin_only(caller)
        totals = self._repo.counter_totals()
        stats: dict[str, Any] = {name: totals[name] for name in COUNTER_FIELDS}
        uploads = totals["total_uploads"]
        stats["dedup_ratio"] = round(totals["duplicates_avoided"] / uploads, 6) if uploads else 0.0
        return stats

    def my_uploads(self, raw_limit: str | None, raw_token: str | None, caller: Caller) -> dict[str, Any]:
        """The caller's own uploads, newest first (every status, deleted ones included), one page."""
        limit = parse_limit(raw_limit)
        start = decode_upload_token(raw_token, caller.owner) if raw_token else None
        items, last = self._repo.owner_uploads(caller.owner, limit, start)
        return {
            "items": [listed_upload_view(item) for item in items],
            "count": len(items),
            "last_evaluated_key": encode_token(last) if last else None,
        }

    def hashes(self, raw_limit: str | None, raw_token: str | None, caller: Caller) -> dict[str, Any]:
        self._admin_only(caller)
        limit = parse_limit(raw_limit)
        start = decode_token(raw_token) if raw_token else None
        items, last = self._repo.scan_files(limit, start)
        return {
            "items": [file_view(item) for item in items],
            "count": len(items),
            "last_evaluated_key": encode_token(last) if last else None,
        }
