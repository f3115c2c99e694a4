"""Read side: metadata, download links, stats, file listing."""

from __future__ import annotations

import re
from typing import Any
from urllib.parse import quote

from dfd.config import Settings
from dfd.errors import BadRequest, NotFound, NotReady
from dfd.ids import is_hash, is_upload_id
from dfd.ports import COUNTER_FIELDS, ObjectStore, Repository
from dfd.tokens import decode_token, encode_token
from dfd.views import file_view, upload_view

DEFAULT_LIMIT = 50
MAX_LIMIT = 1000
PROCESSED = {"stored", "duplicate"}
_LIMIT_RE = re.compile(r"[0-9]{1,4}")


def check_id(raw: str | None) -> str:
    """A path id: 64-hex content hash or 32-hex upload id; anything else is malformed (400)."""
    if not raw or not (is_hash(raw) or is_upload_id(raw)):
        raise BadRequest("id must be a 64-character hex SHA-256 or a 32-character hex upload id", code="invalid_id")
    return raw


def parse_limit(raw: str | None) -> int:
    if raw is None or raw == "":
        return DEFAULT_LIMIT
    if not _LIMIT_RE.fullmatch(raw) or not 1 <= int(raw) <= MAX_LIMIT:
        raise BadRequest(f"limit must be an integer from 1 to {MAX_LIMIT}", code="invalid_limit")
    return int(raw)


def content_disposition(filename: str) -> str:
    """attachment with an ASCII fallback and the exact UTF-8 name (RFC 6266 / 5987)."""
    fallback = "".join(ch if 32 <= ord(ch) < 127 and ch not in '"\\' else "_" for ch in filename)
    return f"attachment; filename=\"{fallback}\"; filename*=UTF-8''{quote(filename, safe='')}"


class Queries:
    def __init__(self, settings: Settings, repo: Repository, objects: ObjectStore | None = None) -> None:
        self._s = settings
        self._repo = repo
        self._objects = objects

    def _file(self, digest: str) -> dict[str, Any]:
        item = self._repo.get_file(digest)
        if item is None:
            raise NotFound(f"no stored file has sha256 {digest}")
        return item

    def _upload(self, upload_id: str) -> dict[str, Any]:
        item = self._repo.get_upload(upload_id)
        if item is None:
            raise NotFound(f"no upload has id {upload_id}")
        return item

    def metadata(self, raw_id: str | None) -> dict[str, Any]:
        ident = check_id(raw_id)
        if is_hash(ident):
            return file_view(self._file(ident))
        upload = self._upload(ident)
        file = self._repo.get_file(upload["hash"]) if upload.get("hash") else None
        return upload_view(upload, file)

    def download(self, raw_id: str | None) -> dict[str, Any]:
        assert self._objects is not None
        ident = check_id(raw_id)
        if is_hash(ident):
            file = self._file(ident)
            filename = str(file.get("filename") or ident)
        else:
            upload = self._upload(ident)
            if upload.get("status") not in PROCESSED or not upload.get("hash"):
                raise NotReady(
                    f"upload {ident} is {upload.get('status', 'unknown')}; the file is not available yet",
                    details={"status": upload.get("status")},
                )
            file = self._file(upload["hash"])
            filename = str(upload.get("filename") or file.get("filename") or ident)
        expires_in = self._s.download_url_expires
        url = self._objects.presign_get(
            str(file.get("bucket") or self._s.bucket),
            str(file["s3_key"]),
            disposition=content_disposition(filename),
            expires_in=expires_in,
        )
        return {
            "download_url": url,
            "expires_in": expires_in,
            "filename": filename,
            "size": file.get("size"),
            "hash": file["hash"],
            "content_type": file.get("content_type"),
        }

    def stats(self) -> dict[str, Any]:
        totals = self._repo.counter_totals()
        stats: dict[str, Any] = {name: totals[name] for name in COUNTER_FIELDS}
        uploads = totals["total_uploads"]
        stats["dedup_ratio"] = round(totals["duplicates_avoided"] / uploads, 6) if uploads else 0.0
        return stats

    def hashes(self, raw_limit: str | None, raw_token: str | None) -> dict[str, Any]:
        limit = parse_limit(raw_limit)
        start = decode_token(raw_token) if raw_token else None
        items, last = self._repo.scan_files(limit, start)
        return {
            "items": [file_view(item) for item in items],
            "count": len(items),
            "last_evaluated_key": encode_token(last) if last else None,
        }
