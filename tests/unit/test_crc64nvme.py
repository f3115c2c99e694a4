"""The resumable CRC64NVME (dfd.ingest.crc64nvme): awscrt's, resumed at any cut, equals the one-go value and a
bitwise reference of CRC-64/NVME; S3's base64 form decodes to it; the self-test refuses a wrong implementation."""

from __future__ import annotations

import dataclasses
import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dfd.core.hashing import b64_to_crc64
from dfd.ingest import crc64nvme

POLY = 0x9A6C9329AC4BC9B5  # CRC-64/NVME, reflected; initial value and final xor all ones


def _reference(data: bytes) -> int:
    crc = crc64nvme.MASK
    for byte in data:
        crc ^= byte
        for _ in range(8):
            crc = (crc >> 1) ^ POLY if crc & 1 else crc >> 1
    return crc ^ crc64nvme.MASK


def test_the_check_value() -> None:
    assert crc64nvme.update(b"123456789") == crc64nvme.CHECK == _reference(b"123456789")
    assert crc64nvme.update(b"") == crc64nvme.INITIAL
    crc64nvme.self_test()


@settings(max_examples=80, deadline=None)
@given(data=st.binary(max_size=3000), cuts=st.lists(st.integers(min_value=0, max_value=3000), max_size=6))
def test_resumed_at_random_cuts_it_is_the_one_go_value(data: bytes, cuts: list[int]) -> None:
    whole = crc64nvme.update(data)
    assert whole == _reference(data)
    crc, at = crc64nvme.INITIAL, 0
    for cut in [*sorted({min(cut, len(data)) for cut in cuts}), len(data)]:
        crc = crc64nvme.update(memoryview(data)[at:cut], crc)  # the segments feed memoryviews
        at = cut
    assert crc == whole


def test_a_large_object_cut_at_block_multiples() -> None:
    data = random.Random(5).randbytes(3 * 1024 * 1024 + 17)
    rng = random.Random(6)
    cuts = sorted(rng.randrange(0, len(data) // 64) * 64 for _ in range(12))
    crc, at = crc64nvme.INITIAL, 0
    for cut in [*cuts, len(data)]:
        crc = crc64nvme.update(data[at:cut], crc)
        at = cut
    assert crc == crc64nvme.update(data)


def test_s3s_base64_form() -> None:
    value = crc64nvme.update(b"hello")
    assert b64_to_crc64(crc64nvme.to_b64(value)) == value
    assert crc64nvme.to_b64(crc64nvme.CHECK) == "rosUhgp5mIg="
    for bad in ("", "not base64!", "AAAA", "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA="):  # wrong lengths, garbage
        assert b64_to_crc64(bad) is None


def test_the_self_test_refuses_a_wrong_crc(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(crc64nvme.checksums, "crc64nvme", lambda data, previous=0: previous ^ len(data))
    with pytest.raises(crc64nvme.Crc64Unavailable):
        crc64nvme.self_test()


def test_a_stored_crc64nvme_that_is_not_16_hex_digits_is_refused() -> None:
    from dfd.ingest import codec
    from dfd.ingest.ports import HashProgress
    from dfd.ingest.sha256state import INITIAL

    progress = HashProgress("b/k#v", "b", "k", '"e"', None, 10, INITIAL, stored_crc64nvme=5, crc64nvme=0)
    item = codec.hashing_item(progress, "2026-03-01T12:00:00Z", 0)
    assert (item["s3_crc64nvme"], item["crc64nvme"]) == ("0000000000000005", "0000000000000000")
    assert codec.hash_progress(item) == dataclasses.replace(progress, updated_at="2026-03-01T12:00:00Z")
    for bad in ("5", 5, "0" * 17, "0x" + "0" * 14, "-" + "0" * 15, "0" * 15 + "g"):
        with pytest.raises(ValueError, match="16 hex digits"):
            codec.hash_progress(item | {"s3_crc64nvme": bad})
