"""SHA-256 helpers: streaming digests with flat memory, S3 checksum encodings, and the checksum hint an upload
id carries."""

from __future__ import annotations

import base64
import binascii
import hashlib
import secrets
from collections.abc import Iterable


def sha256_of_chunks(chunks: Iterable[bytes]) -> tuple[str, int]:
    """Hex digest and byte count of a stream of chunks (memory: one chunk at a time)."""
    digest = hashlib.sha256()
    total = 0
    for chunk in chunks:
        digest.update(chunk)
        total += len(chunk)
    return digest.hexdigest(), total


def hex_to_b64(hex_digest: str) -> str:
    """64-hex SHA-256 → the base64 form S3 uses in x-amz-checksum-sha256."""
    return base64.b64encode(bytes.fromhex(hex_digest)).decode("ascii")


def b64_to_hex(b64_digest: str) -> str | None:
    """S3's base64 ChecksumSHA256 → 64-hex; None when it is not a whole-object SHA-256 value."""
    try:
        raw = base64.b64decode(b64_digest, validate=True)
    except (binascii.Error, ValueError):
        return None
    return raw.hex() if len(raw) == 32 else None


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
