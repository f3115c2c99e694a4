"""SigV4 for header-signed S3 requests, as S3 checks it: the Authorization header's signature over the canonical
request (every signed header, the payload hash the client declared), the clock skew, every ``x-amz-*`` header
signed; then the body: a signed SHA-256 payload hash, ``UNSIGNED-PAYLOAD``, or an aws-chunked body
(``STREAMING-UNSIGNED-PAYLOAD-TRAILER``, ``STREAMING-AWS4-HMAC-SHA256-PAYLOAD[-TRAILER]``) decoded with every chunk
signature, the trailer signature and the trailing checksum verified; and any ``x-amz-checksum-*`` of the body.

Hand-written: botocore signs requests but verifies none, and no library at hand decodes aws-chunked bodies
(the chain of chunk signatures and the trailer are specified in S3's API reference, "sigv4-streaming").
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import re
import zlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from urllib.parse import parse_qsl

from dfdlocal.s3auth import Refused, sign, signing_key, string_to_sign

UNSIGNED_PAYLOAD = "UNSIGNED-PAYLOAD"
STREAMING_UNSIGNED_TRAILER = "STREAMING-UNSIGNED-PAYLOAD-TRAILER"
STREAMING_SIGNED = "STREAMING-AWS4-HMAC-SHA256-PAYLOAD"
STREAMING_SIGNED_TRAILER = "STREAMING-AWS4-HMAC-SHA256-PAYLOAD-TRAILER"
STREAMING = frozenset({STREAMING_UNSIGNED_TRAILER, STREAMING_SIGNED, STREAMING_SIGNED_TRAILER})
EMPTY_SHA256 = hashlib.sha256(b"").hexdigest()
MAX_SKEW = timedelta(minutes=15)  # S3's RequestTimeTooSkewed
_HEX64 = re.compile(r"[0-9a-f]{64}")
_AUTHORIZATION = re.compile(
    r"AWS4-HMAC-SHA256 Credential=([^/,\s]+)/(\d{8})/([^/,\s]+)/([^/,\s]+)/aws4_request\s*,\s*"
    r"SignedHeaders=([a-z0-9;-]+)\s*,\s*Signature=([0-9a-f]{64})"
)


@dataclass(frozen=True)
class Authorization:
    """The parts of an ``Authorization: AWS4-HMAC-SHA256 ...`` header."""

    access_key: str
    date: str
    region: str
    service: str
    signed_headers: tuple[str, ...]
    signature: str

    @property
    def scope(self) -> str:
        return f"{self.date}/{self.region}/{self.service}/aws4_request"


def parse_authorization(value: str) -> Authorization:
    match = _AUTHORIZATION.fullmatch(value.strip())
    if match is None:
        raise Refused(400, "AuthorizationHeaderMalformed", "The authorization header is malformed.")
    access_key, date, region, service, signed, signature = match.groups()
    return Authorization(access_key, date, region, service, tuple(signed.split(";")), signature)


def access_key_of(value: str) -> str | None:
    """The access key id an ``Authorization`` header names (None when it is not SigV4's)."""
    match = re.match(r"AWS4-HMAC-SHA256 Credential=([^/,\s]+)/", value.strip())
    return match.group(1) if match else None


@dataclass(frozen=True)
class Signed:
    """A request whose headers' signature was verified: what its chunks' signatures chain from."""

    key: bytes
    amz_date: str
    scope: str
    seed: str  # the header signature
    payload: str  # x-amz-content-sha256 as declared


def verify_headers(
    method: str,
    raw_path: str,
    raw_query: str,
    headers: Mapping[str, str],
    auth: Authorization,
    secret: str,
    now: datetime | None = None,
) -> Signed:
    """Raise Refused unless the headers carry a valid SigV4 signature of the request made with ``secret``.
    ``headers``: lower-case names."""
    amz_date = headers.get("x-amz-date", "")
    try:
        issued = datetime.strptime(amz_date, "%Y%m%dT%H%M%SZ").replace(tzinfo=UTC)
    except ValueError:
        raise Refused(403, "AccessDenied", "AWS authentication requires a valid x-amz-date header") from None
    if not amz_date.startswith(auth.date):
        raise Refused(400, "AuthorizationHeaderMalformed", "The credential date does not match x-amz-date.")
    if abs((now or datetime.now(UTC)) - issued) > MAX_SKEW:
        raise Refused(
            403,
            "RequestTimeTooSkewed",
            "The difference between the request time and the current time is too large.",
        )
    payload = headers.get("x-amz-content-sha256")
    if payload is None:
        raise Refused(400, "InvalidRequest", "Missing required header for this request: x-amz-content-sha256")
    if payload not in STREAMING and payload != UNSIGNED_PAYLOAD and not _HEX64.fullmatch(payload):
        raise Refused(400, "InvalidArgument", "x-amz-content-sha256 must be UNSIGNED-PAYLOAD, a SHA-256 or STREAMING-*")
    signed = auth.signed_headers
    if "host" not in signed:
        raise Refused(403, "AccessDenied", "The host header must be signed.")
    params = parse_qsl(raw_query, keep_blank_values=True)
    to_sign = string_to_sign(method, raw_path, params, headers, signed, payload, amz_date, auth.scope)
    key = signing_key(secret, auth.date, auth.region, auth.service)
    if not hmac.compare_digest(sign(key, to_sign), auth.signature):
        raise Refused(
            403,
            "SignatureDoesNotMatch",
            "The request signature we calculated does not match the signature you provided. Check your key and"
            " signing method.",
        )
    return Signed(key, amz_date, auth.scope, auth.signature, payload)


# --------------------------------------------------------------------------------------------------
# Checksums (x-amz-checksum-*)
# --------------------------------------------------------------------------------------------------
def _crc32c_table() -> list[int]:
    table = []
    for byte in range(256):
        crc = byte
        for _ in range(8):
            crc = (crc >> 1) ^ 0x82F63B78 if crc & 1 else crc >> 1
        table.append(crc)
    return table


_CRC32C = _crc32c_table()


def crc32c(data: bytes) -> int:
    """CRC-32C (Castagnoli), table-driven: the standard library has none and botocore's needs awscrt."""
    crc = 0xFFFFFFFF
    table = _CRC32C
    for byte in data:
        crc = table[(crc ^ byte) & 0xFF] ^ (crc >> 8)
    return crc ^ 0xFFFFFFFF


_DIGESTS: dict[str, Callable[[bytes], bytes]] = {
    "crc32": lambda data: zlib.crc32(data).to_bytes(4, "big"),
    "crc32c": lambda data: crc32c(data).to_bytes(4, "big"),
    "sha1": lambda data: hashlib.sha1(data, usedforsecurity=False).digest(),
    "sha256": lambda data: hashlib.sha256(data).digest(),
}
CHECKSUM_HEADERS = frozenset(f"x-amz-checksum-{name}" for name in _DIGESTS)


def checksum_of(name: str, data: bytes) -> str:
    """The base64 value of the checksum header ``name`` (x-amz-checksum-crc32...) for ``data``."""
    algorithm = name.removeprefix("x-amz-checksum-")
    if algorithm not in _DIGESTS:
        raise Refused(400, "InvalidRequest", f"{name} is not a checksum the local S3 verifies")
    return base64.b64encode(_DIGESTS[algorithm](data)).decode()


def verify_checksum(name: str, claimed: str, data: bytes) -> None:
    if checksum_of(name, data) != claimed:
        algorithm = name.removeprefix("x-amz-checksum-").upper()
        raise Refused(400, "BadDigest", f"The {algorithm} you specified did not match the calculated checksum.")


# --------------------------------------------------------------------------------------------------
# Bodies
# --------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Body:
    data: bytes
    trailers: dict[str, str]  # verified trailing headers (the trailing checksum)


def verify_plain(data: bytes, signed: Signed) -> None:
    """A body sent as is: its SHA-256 when the client signed one."""
    if signed.payload != UNSIGNED_PAYLOAD and hashlib.sha256(data).hexdigest() != signed.payload:
        raise Refused(
            400,
            "XAmzContentSHA256Mismatch",
            "The provided 'x-amz-content-sha256' header does not match what was computed.",
        )


def decode_chunked(raw: bytes, signed: Signed, trailer_names: tuple[str, ...]) -> Body:
    """An aws-chunked body decoded: with signed chunks, every chunk's signature (chained from the header
    signature) and the trailer's; the trailing headers announced in x-amz-trailer (and no other), each
    checksum verified against the decoded bytes."""
    chunk_signed = signed.payload in (STREAMING_SIGNED, STREAMING_SIGNED_TRAILER)
    wants_trailer = signed.payload in (STREAMING_UNSIGNED_TRAILER, STREAMING_SIGNED_TRAILER)
    if wants_trailer != bool(trailer_names):
        raise Refused(400, "InvalidRequest", "x-amz-trailer must name the trailing checksum of a *-TRAILER body")
    previous = signed.seed
    parts: list[bytes] = []
    position = 0
    while True:
        end = raw.find(b"\r\n", position)
        if end < 0:
            raise Refused(400, "IncompleteBody", "The request body terminated unexpectedly")
        header = raw[position:end].decode("latin-1")
        size_text, _, extension = header.partition(";")
        try:
            size = int(size_text, 16)
        except ValueError:
            raise Refused(400, "IncompleteBody", "an aws-chunked chunk size is not hexadecimal") from None
        start = end + 2
        data = raw[start : start + size]
        if len(data) != size:
            raise Refused(400, "IncompleteBody", "The request body terminated unexpectedly")
        if chunk_signed:
            name, _, signature = extension.partition("=")
            if name != "chunk-signature" or not _HEX64.fullmatch(signature):
                raise Refused(403, "SignatureDoesNotMatch", "a chunk carries no chunk-signature")
            to_sign = "\n".join(
                [
                    "AWS4-HMAC-SHA256-PAYLOAD",
                    signed.amz_date,
                    signed.scope,
                    previous,
                    EMPTY_SHA256,
                    hashlib.sha256(data).hexdigest(),
                ]
            )
            if not hmac.compare_digest(sign(signed.key, to_sign), signature):
                raise Refused(
                    403,
                    "SignatureDoesNotMatch",
                    "The request signature we calculated does not match the signature you provided.",
                )
            previous = signature
        elif extension:
            raise Refused(400, "InvalidRequest", "an unsigned aws-chunked body carries a chunk signature")
        position = start + size
        if size == 0:
            break
        parts.append(data)
        if raw[position : position + 2] != b"\r\n":
            raise Refused(400, "IncompleteBody", "a chunk is not followed by CRLF")
        position += 2
    body = b"".join(parts)
    trailers: dict[str, str] = {}
    lines: list[str] = []
    while True:
        end = raw.find(b"\r\n", position)
        if end < 0:
            raise Refused(400, "IncompleteBody", "The request body terminated unexpectedly")
        line = raw[position:end].decode("latin-1")
        position = end + 2
        if not line:
            break
        lines.append(line)
    if position != len(raw):
        raise Refused(400, "IncompleteBody", "bytes after the end of the aws-chunked body")
    trailer_signature = None
    for line in lines:
        name, colon, value = line.partition(":")
        name, value = name.strip().lower(), value.strip()
        if not colon:
            raise Refused(400, "MalformedTrailerError", "The request contained trailing data that was not well-formed.")
        if name == "x-amz-trailer-signature" and chunk_signed:
            trailer_signature = value
        elif name in trailer_names and name not in trailers:
            trailers[name] = value
        else:
            raise Refused(400, "MalformedTrailerError", f"trailing header {name} was not announced in x-amz-trailer")
    if set(trailers) != set(trailer_names):
        raise Refused(400, "MalformedTrailerError", "a trailing header announced in x-amz-trailer is missing")
    if chunk_signed and wants_trailer:
        canonical = "".join(f"{name}:{trailers[name]}\n" for name in trailer_names)
        to_sign = "\n".join(
            [
                "AWS4-HMAC-SHA256-TRAILER",
                signed.amz_date,
                signed.scope,
                previous,
                hashlib.sha256(canonical.encode()).hexdigest(),
            ]
        )
        if trailer_signature is None or not hmac.compare_digest(sign(signed.key, to_sign), trailer_signature):
            raise Refused(
                403,
                "SignatureDoesNotMatch",
                "The request signature we calculated does not match the signature you provided.",
            )
    for name, value in trailers.items():
        verify_checksum(name, value, body)
    return Body(body, trailers)
