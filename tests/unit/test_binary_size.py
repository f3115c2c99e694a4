"""dfd.core.text.binary_size: the size a too_large error names, in the largest binary unit it reaches."""

from __future__ import annotations

import pytest

from dfd.core.config import S3_MAX_OBJECT
from dfd.core.text import binary_size

GIB = 2**30


@pytest.mark.parametrize(
    ("size", "text"),
    [
        (1, "1 byte"),
        (1023, "1023 bytes"),
        (1024, "1 KiB"),
        (5 * 2**20, "5 MiB"),
        (180 * GIB, "180 GiB"),
        (1000 * GIB, "1000 GiB"),
        (1536 * GIB, "1.5 TiB"),
        (S3_MAX_OBJECT, "48.8 TiB"),
    ],
)
def test_a_size_reads_in_its_largest_unit(size: int, text: str) -> None:
    assert binary_size(size) == text
