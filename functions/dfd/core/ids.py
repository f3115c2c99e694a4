"""Identifiers and keys: content hashes, upload ids, object keys, event keys, filenames.

Patterns are matched with fullmatch: `$` would let a trailing newline through."""

from __future__ import annotations

import re
import secrets
import unicodedata
from collections.abc import Mapping
from urllib.parse import quote, unquote

HASH_RE = re.compile(r"[0-9a-f]{64}")
UPLOAD_ID_RE = re.compile(r"[0-9a-f]{32}")
_CONTENT_TYPE_RE = re.compile(
    r"[a-z0-9][a-z0-9!#$&^_.+-]{0,126}/[a-z0-9][a-z0-9!#$&^_.+-]{0,126}"
    # a quoted parameter value: printable ASCII only (no quote, no backslash), as an HTTP header can carry it
    r"( ?; ?[a-z0-9!#$&^_.+-]+=(\"[\x20\x21\x23-\x5b\x5d-\x7e]*\"|[a-z0-9!#$&^_.+-]+))*",
    re.IGNORECASE,
)
MAX_FILENAME = 255


def is_hash(value: str) -> bool:
    return HASH_RE.fullmatch(value) is not None


def is_upload_id(value: str) -> bool:
    return UPLOAD_ID_RE.fullmatch(value) is not None


# The checksum hint. An upload whose presigned PUT signs x-amz-checksum-sha256 gets an upload id whose last
# hex digit is odd; any other upload an even one (127 random bits either way). The ingest reads the hint from
# the object key alone — no call — and asks S3 for the stored SHA-256 with a HEAD before any GetObject, so a
# checksummed object is ingested without reading a byte. The hint only chooses which S3 call comes first:
# a wrong or missing hint costs one extra call, never a wrong result (the checksum always comes from S3).
_ODD_HEX = frozenset("13579bdf")


def new_upload_id(checksummed: bool = False) -> str:
    """32 hex characters, 127 random bits, the last digit's low bit = "the PUT carries a SHA-256"."""
    raw = secrets.token_hex(16)
    return raw[:-1] + format((int(raw[-1], 16) & 0xE) | int(checksummed), "x")


def hints_checksum(upload_id: str | None) -> bool:
    """Whether an upload id (as made by new_upload_id) says its object was PUT with a SHA-256 checksum."""
    return upload_id is not None and upload_id[-1:] in _ODD_HEX


# The tenant hint. POST /upload's presigned PUT (and a multipart upload's creation) signs the uploader's tenant
# as object metadata (x-amz-meta-dfd-tenant), so the ingest learns it from its first S3 call (GetObject and
# HeadObject return the metadata) and reads the tenant's reference to the content in the same BatchGetItem as
# the rest of its state: the commit then knows whether the tenant holds the content, where it would otherwise
# assume and be corrected by a cancelled transaction (one call more). Only a hint: the upload record's tenant
# stays authoritative, and a missing or wrong hint costs that one call, never a wrong result. Metadata travels
# as an HTTP header, which S3 wants in US-ASCII: the tenant is percent-encoded (tenants are `acme`,
# `user:<sub>`, or any Cognito group name's tail, which may be any Unicode letter).
TENANT_METADATA = "dfd-tenant"  # the SDK's Metadata key; the header is x-amz-meta-dfd-tenant
TENANT_HEADER = f"x-amz-meta-{TENANT_METADATA}"


def tenant_metadata(tenant: str) -> dict[str, str]:
    """The object metadata (the SDK's `Metadata=`) that carries the uploader's tenant as the ingest's hint."""
    return {TENANT_METADATA: quote(tenant, safe=":@")}


def tenant_from_metadata(metadata: Mapping[str, str] | None) -> str | None:
    """The tenant hint of an object's metadata (as GetObject/HeadObject return it), or None."""
    raw = (metadata or {}).get(TENANT_METADATA)
    if not raw:
        return None
    try:
        tenant = unquote(raw, errors="strict")
    except UnicodeDecodeError:
        return None
    return tenant or None


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


def upload_id_of_event(prefix: str, key: str) -> str | None:
    """The upload id of the object an event key (:func:`event_key`) names, or None (a key outside `uploads/<id>`)."""
    where, _, _ = key.rpartition("#")
    _, _, object_key = where.partition("/")
    return upload_id_from_key(prefix, object_key)


def key_claim(bucket: str, key: str) -> str:
    """The item that says "this key holds a stored object" (kept beside the event records; '#' cannot start a
    bucket name, so it never collides with an event key)."""
    return f"claim#{bucket}/{key}"


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


DEFAULT_CONTENT_TYPE = "application/octet-stream"


def valid_content_type(value: str) -> bool:
    """The one rule for a content type dfd keeps and serves back (POST /upload's `content_type`, a drop-zone
    object's Content-Type): a MIME type like ``text/plain``, optional parameters, at most 255 characters."""
    return len(value) <= 255 and _CONTENT_TYPE_RE.fullmatch(value) is not None


def stored_content_type(value: str | None) -> str:
    """The content type kept for an object whose writer set `value` without dfd checking it first (the drop
    zone): `value` when :func:`valid_content_type` accepts it, else DEFAULT_CONTENT_TYPE."""
    return value if value is not None and valid_content_type(value) else DEFAULT_CONTENT_TYPE


def filename_from_key(key: str) -> str:
    """A display name for an object put straight into the bucket (no upload record)."""
    name = key.rsplit("/", 1)[-1]
    try:
        return clean_filename(name)
    except ValueError:
        return "file"
