"""dfdlocal.sigv4 against the examples of S3's API reference ("Signature Calculations for the Authorization
Header: Transferring Payload in Multiple Chunks"): the seed signature and the three chunk signatures of a
66,560-byte PUT, then tampering, trailers and checksums."""

from __future__ import annotations

import base64
import hashlib
import hmac
import zlib
from datetime import UTC, datetime

import pytest

from dfdlocal import sigv4
from dfdlocal.s3auth import Refused

SECRET = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"
WHEN = datetime(2013, 5, 24, tzinfo=UTC)
HEADERS = {
    "host": "s3.amazonaws.com",
    "x-amz-date": "20130524T000000Z",
    "x-amz-storage-class": "REDUCED_REDUNDANCY",
    "content-encoding": "aws-chunked",
    "content-length": "66824",
    "x-amz-content-sha256": "STREAMING-AWS4-HMAC-SHA256-PAYLOAD",
    "x-amz-decoded-content-length": "66560",
}
SEED = "4f232c4386841ef735655705268965c44a0e4690baa4adea153f7db9fa80a0a9"
AUTHORIZATION = (
    "AWS4-HMAC-SHA256 Credential=AKIAIOSFODNN7EXAMPLE/20130524/us-east-1/s3/aws4_request,"
    "SignedHeaders=content-encoding;content-length;host;x-amz-content-sha256;x-amz-date;"
    f"x-amz-decoded-content-length;x-amz-storage-class,Signature={SEED}"
)
CHUNK_SIGNATURES = (
    "ad80c730a21e5b8d04586a2213dd63b9a0e99e0e2307b0ade35a65485a288648",
    "0055627c9e194cb4542bae2aa5492e3c1575bbb81b612b7d234b86a503ef5497",
    "b6c6ea8a5354eaf15b3cb7646744f4275b71ea724fed81ceb9323e279d449df9",
)
DATA = b"a" * 66560


def signed(headers: dict[str, str] | None = None) -> sigv4.Signed:
    auth = sigv4.parse_authorization(AUTHORIZATION)
    return sigv4.verify_headers("PUT", "/examplebucket/chunkObject.txt", "", headers or HEADERS, auth, SECRET, now=WHEN)


def example_body(signatures: tuple[str, ...] = CHUNK_SIGNATURES, data: bytes = DATA) -> bytes:
    first, second, last = signatures
    return (
        f"10000;chunk-signature={first}\r\n".encode()
        + data[:65536]
        + f"\r\n400;chunk-signature={second}\r\n".encode()
        + data[65536:]
        + f"\r\n0;chunk-signature={last}\r\n\r\n".encode()
    )


def test_the_reference_example_s_seed_and_chunk_signatures_verify() -> None:
    request = signed()
    assert request.seed == SEED and request.payload == sigv4.STREAMING_SIGNED
    raw = example_body()
    assert len(raw) == 66824  # the example's Content-Length
    assert sigv4.decode_chunked(raw, request, ()) == sigv4.Body(DATA, {})


@pytest.mark.parametrize("index", [0, 1, 2])
def test_a_tampered_chunk_signature_is_refused(index: int) -> None:
    signatures = list(CHUNK_SIGNATURES)
    signatures[index] = signatures[index][:-1] + ("0" if signatures[index][-1] != "0" else "1")
    with pytest.raises(Refused) as refused:
        sigv4.decode_chunked(example_body(tuple(signatures)), signed(), ())
    assert (refused.value.status, refused.value.code) == (403, "SignatureDoesNotMatch")


def test_tampered_chunk_bytes_or_reordered_chunks_are_refused() -> None:
    with pytest.raises(Refused) as refused:
        sigv4.decode_chunked(example_body(data=b"b" + DATA[1:]), signed(), ())
    assert refused.value.code == "SignatureDoesNotMatch"
    swapped = (CHUNK_SIGNATURES[1], CHUNK_SIGNATURES[0], CHUNK_SIGNATURES[2])
    with pytest.raises(Refused):
        sigv4.decode_chunked(example_body(swapped), signed(), ())


@pytest.mark.parametrize(
    ("header", "value"),
    [("x-amz-storage-class", "STANDARD"), ("x-amz-decoded-content-length", "1"), ("host", "evil.example")],
)
def test_a_changed_signed_header_is_refused(header: str, value: str) -> None:
    with pytest.raises(Refused) as refused:
        signed({**HEADERS, header: value})
    assert (refused.value.status, refused.value.code) == (403, "SignatureDoesNotMatch")


def test_an_unsigned_amz_header_is_refused() -> None:
    with pytest.raises(Refused) as refused:
        signed({**HEADERS, "x-amz-acl": "public-read"})
    assert (refused.value.status, refused.value.code) == (403, "AccessDenied")
    assert refused.value.extra == {"HeadersNotSigned": "x-amz-acl"}


def test_a_request_older_than_15_minutes_is_refused() -> None:
    auth = sigv4.parse_authorization(AUTHORIZATION)
    with pytest.raises(Refused) as refused:
        sigv4.verify_headers(
            "PUT",
            "/examplebucket/chunkObject.txt",
            "",
            HEADERS,
            auth,
            SECRET,
            now=datetime(2013, 5, 24, 0, 16, tzinfo=UTC),
        )
    assert refused.value.code == "RequestTimeTooSkewed"


def _trailer_signed_body(request: sigv4.Signed, data: bytes, checksum: str, tamper: bool = False) -> bytes:
    """The reference example's chunking, signed from ``request``'s seed, with a trailing CRC32 and its signature."""
    previous = request.seed
    out = b""
    for chunk in (data[:65536], data[65536:], b""):
        to_sign = "\n".join(
            [
                "AWS4-HMAC-SHA256-PAYLOAD",
                request.amz_date,
                request.scope,
                previous,
                sigv4.EMPTY_SHA256,
                hashlib.sha256(chunk).hexdigest(),
            ]
        )
        previous = hmac.new(request.key, to_sign.encode(), hashlib.sha256).hexdigest()
        out += f"{len(chunk):x};chunk-signature={previous}\r\n".encode() + chunk + (b"\r\n" if chunk else b"")
    trailer = f"x-amz-checksum-crc32:{checksum}\n"
    to_sign = "\n".join(
        [
            "AWS4-HMAC-SHA256-TRAILER",
            request.amz_date,
            request.scope,
            previous,
            hashlib.sha256(trailer.encode()).hexdigest(),
        ]
    )
    signature = hmac.new(request.key, to_sign.encode(), hashlib.sha256).hexdigest()
    if tamper:
        signature = "0" * 64
    return out + f"x-amz-checksum-crc32:{checksum}\r\nx-amz-trailer-signature:{signature}\r\n\r\n".encode()


def _crc32(data: bytes) -> str:
    return base64.b64encode(zlib.crc32(data).to_bytes(4, "big")).decode()


def test_a_signed_trailer_with_its_checksum_verifies_and_a_tampered_one_does_not() -> None:
    request = sigv4.Signed(
        b"k" * 32, "20130524T000000Z", "20130524/us-east-1/s3/aws4_request", SEED, sigv4.STREAMING_SIGNED_TRAILER
    )
    body = sigv4.decode_chunked(_trailer_signed_body(request, DATA, _crc32(DATA)), request, ("x-amz-checksum-crc32",))
    assert body == sigv4.Body(DATA, {"x-amz-checksum-crc32": _crc32(DATA)})
    with pytest.raises(Refused) as refused:
        sigv4.decode_chunked(
            _trailer_signed_body(request, DATA, _crc32(DATA), tamper=True), request, ("x-amz-checksum-crc32",)
        )
    assert (refused.value.status, refused.value.code) == (403, "SignatureDoesNotMatch")
    with pytest.raises(Refused) as refused:  # signed, but not the bytes' checksum
        sigv4.decode_chunked(_trailer_signed_body(request, DATA, _crc32(b"x")), request, ("x-amz-checksum-crc32",))
    assert (refused.value.status, refused.value.code) == (400, "BadDigest")


def test_an_unsigned_trailer_s_checksum_is_verified() -> None:
    request = sigv4.Signed(b"k", "20130524T000000Z", "s", SEED, sigv4.STREAMING_UNSIGNED_TRAILER)
    good = (
        b"5\r\nhello\r\n0\r\nx-amz-checksum-sha256:" + base64.b64encode(hashlib.sha256(b"hello").digest()) + b"\r\n\r\n"
    )
    assert sigv4.decode_chunked(good, request, ("x-amz-checksum-sha256",)).data == b"hello"
    bad = good.replace(b"hello", b"jello")
    with pytest.raises(Refused) as refused:
        sigv4.decode_chunked(bad, request, ("x-amz-checksum-sha256",))
    assert (refused.value.status, refused.value.code) == (400, "BadDigest")
    with pytest.raises(Refused):  # a trailer other than the one announced
        sigv4.decode_chunked(good, request, ("x-amz-checksum-crc32",))
    with pytest.raises(Refused):  # cut short
        sigv4.decode_chunked(good[:-4], request, ("x-amz-checksum-sha256",))


@pytest.mark.parametrize(
    ("name", "data", "expected"),
    [
        # the CRC-32C check value of RFC 3720 (B.4): 32 bytes of zeros -> 0x8A9136AA
        ("x-amz-checksum-crc32c", bytes(32), base64.b64encode(bytes.fromhex("8a9136aa")).decode()),
        ("x-amz-checksum-crc32", b"123456789", base64.b64encode(bytes.fromhex("cbf43926")).decode()),
        (
            "x-amz-checksum-sha1",
            b"abc",
            base64.b64encode(bytes.fromhex("a9993e364706816aba3e25717850c26c9cd0d89d")).decode(),
        ),
        ("x-amz-checksum-sha256", b"abc", base64.b64encode(hashlib.sha256(b"abc").digest()).decode()),
    ],
)
def test_checksums(name: str, data: bytes, expected: str) -> None:
    assert sigv4.checksum_of(name, data) == expected
    sigv4.verify_checksum(name, expected, data)
    with pytest.raises(Refused) as refused:
        sigv4.verify_checksum(name, expected, data + b"!")
    assert (refused.value.status, refused.value.code) == (400, "BadDigest")


def test_an_unknown_checksum_algorithm_is_refused_not_waved_through() -> None:
    with pytest.raises(Refused) as refused:
        sigv4.verify_checksum("x-amz-checksum-crc64nvme", "AAAAAAAAAAA=", b"")
    assert refused.value.status == 400


def test_a_signed_payload_hash_must_be_the_body_s() -> None:
    request = sigv4.Signed(b"k", "d", "s", SEED, hashlib.sha256(b"body").hexdigest())
    sigv4.verify_plain(b"body", request)
    with pytest.raises(Refused) as refused:
        sigv4.verify_plain(b"bodY", request)
    assert (refused.value.status, refused.value.code) == (400, "XAmzContentSHA256Mismatch")
