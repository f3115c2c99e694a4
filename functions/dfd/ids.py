"""Identifiers and keys: content hashes, upload ids, object keys, event keys, filenames.

Patterns are matched with fullmatch: `$` would let a trailing newline through."""

from __future__ import annotations

import re
import secrets
import unicodedata

HASH_RE = re.compile(r"[0-9a-f]{64}")
UPLOAD_ID_RE = re.compile(r"[0-9a-f]{32}")
_CONTENT_TYPE_RE = re.compile(
    r"[a-z0-9][a-z0-9!#$&^_.+-]{0,126}/[a-z0-9][a-z0-9!#$&^_.+-]{0,126}"
    r"( ?; ?[a-z0-9!#$&^_.+-]+=(\"[^\"\\\x00-\x1f\x7f]*\"|[a-z0-9!#$&^_.+-]+))*",
    re.IGNORECASE,
)
MAX_FILENAME = 255


def is_hash(value: str) -> bool:
    return HASH_RE.fullmatch(value) is not None


def is_upload_id(value: str) -> bool:
    return UPLOAD_ID_RE.fullmatch(value) is not None


def new_upload_id() -> str:
    return secrets.token_hex(16)


def object_key(prefix: str, upload_id: str) -> str:
    return f"{prefix}{upload_id}"


def upload_id_from_key(prefix: str, key: str) -> str | None:
    """The upload id of `uploads/<upload_id>`; None for any other key under the prefix (a direct put)."""
    if not key.startswith(prefix):
        return None
    rest = key[len(prefix) :]
    return rest if is_upload_id(rest) else None


def version_token(version_id: str | None, etag: str) -> str:
    """What identifies one version of an object: its VersionId when versioned, else its ETag (unquoted)."""
    if version_id and version_id != "null":
        return f"v:{version_id}"
    return etag.strip('"')


def event_key(bucket: str, key: str, version: str) -> str:
    """Identity of one ingested object version; every redelivery of its events maps to the same key."""
    return f"{bucket}/{key}#{version}"


def clean_filename(raw: str) -> str:
    """Keep the last path component, drop control characters; raise ValueError when nothing is left."""
    name = unicodedata.normalize("NFC", raw)
    name = re.split(r"[\\/]", name)[-1]
    name = "".join(ch for ch in name if unicodedata.category(ch)[0] != "C").strip()
    if name in {"", ".", ".."}:
        raise ValueError("filename is empty once path separators and control characters are removed")
    if len(name) > MAX_FILENAME:
        raise ValueError(f"filename is longer than {MAX_FILENAME} characters")
    return name


def valid_content_type(value: str) -> bool:
    return len(value) <= 255 and _CONTENT_TYPE_RE.fullmatch(value) is not None


def filename_from_key(key: str) -> str:
    """A display name for an object put straight into the bucket (no upload record)."""
    name = key.rsplit("/", 1)[-1]
    try:
        return clean_filename(name)
    except ValueError:
        return "file"
