"""CRC64NVME, resumable: the full-object checksum S3 stores for an object uploaded with it, or with no checksum at
all (docs/design/segments.md, "CRC64NVME"). The arithmetic is awscrt's (its C, with the CPU's carry-less multiply);
the value is an unsigned 64-bit integer, S3 shows it as the base64 of its 8 bytes, big-endian.

Importing this module loads awscrt's native library (~80 ms): only SegmentFunction does, at its init. botocore
signs through the CRT whenever awscrt is importable, unless ``BOTO_DISABLE_CRT=true`` (template.yaml's Globals,
the local stack, the tests, the bench and the tools set it): with it, botocore's own signers sign every request.
"""

from __future__ import annotations

import base64

from awscrt import checksums

MASK = (1 << 64) - 1
INITIAL = 0  # the CRC of no bytes: where a resumed CRC starts
# the check value of the CRC-64/NVME parameters: the CRC of b"123456789"
CHECK = 0xAE8B14860A799888


class Crc64Unavailable(RuntimeError):
    """awscrt's CRC64NVME does not give the standard's check value: refused, never used."""


def update(data: bytes | bytearray | memoryview, previous: int = INITIAL) -> int:
    """The CRC of the bytes `previous` covers followed by `data`."""
    return int(checksums.crc64nvme(data, previous)) & MASK


def to_b64(value: int) -> str:
    """The form S3 shows (x-amz-checksum-crc64nvme): base64 of the 8 bytes, big-endian."""
    return base64.b64encode(value.to_bytes(8, "big")).decode()


def self_test() -> None:
    """The check value in one go and resumed at every cut: anything else raises Crc64Unavailable."""
    data = b"123456789"
    if update(data) != CHECK or any(update(data[cut:], update(data[:cut])) != CHECK for cut in range(len(data) + 1)):
        raise Crc64Unavailable("awscrt's crc64nvme does not give CRC-64/NVME's check value")
