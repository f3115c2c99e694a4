"""SHA-256 helpers: streaming digests with flat memory, and S3 checksum encodings."""

from __future__ import annotations

import base64
import binascii
import hashlib
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


def b64_to_crc64(b64_checksum: str) -> int | None:
    """S3's base64 ChecksumCRC64NVME (8 bytes, big-endian) → the unsigned number; None when it is not one."""
    try:
        raw = base64.b64decode(b64_checksum, validate=True)
    except (binascii.Error, ValueError):
        return None
    return int.from_bytes(raw, "big") if len(raw) == 8 else None
