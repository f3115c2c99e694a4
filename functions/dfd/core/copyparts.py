"""The parts of a multipart copy: their size, derived from the object's so that any object S3 holds (up to
10,000 parts of 5 GiB, 48.8 TiB) takes at most 10,000 parts, and their ranges (dfd.adapters.s3.copies,
dfd.ingest.dropcopy)."""

from __future__ import annotations

import math

GIB = 1024**3
MIB = 1024**2
COPY_PART = 512 * MIB  # the smallest part: every object up to 10,000 of them (4.88 TiB) is cut into parts of this size
COPY_MAX_PARTS = 10_000  # S3's most parts of one multipart upload
COPY_PART_MAX = 5 * GIB  # S3's largest part (and its smallest is 5 MiB, every part but the last)


def copy_part_bytes(size: int, smallest: int = COPY_PART) -> int:
    """The part size of a multipart copy of `size` bytes: `smallest`, or above 10,000 of them the size over 10,000
    rounded up to a MiB, so that any object S3 holds (up to 10,000 parts of 5 GiB) takes at most 10,000 parts."""
    part = max(smallest, math.ceil(math.ceil(size / COPY_MAX_PARTS) / MIB) * MIB)
    if part > COPY_PART_MAX:
        raise ValueError(f"{size} bytes is more than S3's 10,000 parts of 5 GiB hold")
    return part


def copy_ranges(size: int, part: int) -> list[tuple[int, int, int]]:
    """(part number, first byte, last byte) of each `part`-byte range of a `size`-byte object."""
    return [(n + 1, start, min(start + part, size) - 1) for n, start in enumerate(range(0, size, part))]
