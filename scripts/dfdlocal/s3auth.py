"""What real S3 enforces on presigned requests and moto does not: SigV4 query signatures (so every signed
header — Content-Length, Content-Type, If-None-Match, x-amz-checksum-sha256 — binds the request), expiry,
a body of exactly Content-Length bytes, and the x-amz-checksum-sha256 of the body. The same for PutObject and
UploadPart (``?partNumber=&uploadId=``: the part number and upload id are signed query parameters). A WSGI
middleware for the local stack's emulator, and a plain verifier the tests use against the URLs the service
issues."""

from __future__ import annotations

import base64
import hashlib
import hmac
import io
import threading
from collections.abc import Callable, Iterable, Mapping
from datetime import UTC, datetime, timedelta
from typing import Any
from urllib.parse import parse_qsl, quote, urlsplit

ALGORITHM = "AWS4-HMAC-SHA256"
READ_BYTES = 256 * 1024  # a PUT body is read and hashed in steps of this size (the last one after the last byte)


class Received(threading.local):
    """The last PUT body the guard accepted in this thread (the request's thread, where moto then stores it),
    with the digests S3 keeps of it: its SHA-256 and its MD5 (the ETag), computed once, as it streamed in."""

    body: bytes | None = None
    sha256: bytes = b""
    md5: str = ""

    def digests(self, body: object) -> tuple[bytes, str] | None:
        """(SHA-256, MD5 hex) when `body` is the very object the guard read, else None."""
        return (self.sha256, self.md5) if body is self.body and self.body is not None else None


RECEIVED = Received()


class Refused(Exception):
    def __init__(self, status: int, code: str, message: str) -> None:
        super().__init__(message)
        self.status, self.code, self.message = status, code, message


def _uri_encode(value: str) -> str:
    return quote(value, safe="-_.~")


def _signing_key(secret: str, date: str, region: str, service: str) -> bytes:
    key = f"AWS4{secret}".encode()
    for part in (date, region, service, "aws4_request"):
        key = hmac.new(key, part.encode(), hashlib.sha256).digest()
    return key


def verify_presigned(
    method: str,
    raw_path: str,
    raw_query: str,
    headers: Mapping[str, str],
    secrets: Callable[[str], str | None],
    now: datetime | None = None,
) -> None:
    """Raise Refused unless (method, path, query, headers) is exactly what a SigV4 presigned URL signed."""
    params = parse_qsl(raw_query, keep_blank_values=True)
    query = dict(params)
    if query.get("X-Amz-Algorithm") != ALGORITHM:
        raise Refused(400, "AuthorizationQueryParametersError", "only SigV4 presigned URLs are accepted")
    try:
        credential = query["X-Amz-Credential"]
        amz_date = query["X-Amz-Date"]
        expires = int(query["X-Amz-Expires"])
        signed_names = query["X-Amz-SignedHeaders"].split(";")
        signature = query["X-Amz-Signature"]
        access_key, date, region, service, terminal = credential.split("/")
        issued = datetime.strptime(amz_date, "%Y%m%dT%H%M%SZ").replace(tzinfo=UTC)
    except (KeyError, ValueError):
        raise Refused(400, "AuthorizationQueryParametersError", "malformed presigned URL parameters") from None
    if terminal != "aws4_request" or not amz_date.startswith(date):
        raise Refused(400, "AuthorizationQueryParametersError", "malformed credential scope")
    if (now or datetime.now(UTC)) > issued + timedelta(seconds=expires):
        raise Refused(403, "AccessDenied", "Request has expired")
    secret = secrets(access_key)
    if secret is None:
        raise Refused(403, "InvalidAccessKeyId", "The AWS Access Key Id you provided does not exist in our records.")
    lowered = {name.lower(): value for name, value in headers.items()}
    canonical_headers = ""
    for name in signed_names:
        if name not in lowered:
            raise Refused(403, "SignatureDoesNotMatch", f"signed header {name} is missing from the request")
        canonical_headers += f"{name}:{' '.join(lowered[name].split())}\n"
    canonical_query = "&".join(
        f"{_uri_encode(k)}={_uri_encode(v)}" for k, v in sorted(params) if k != "X-Amz-Signature"
    )
    canonical_request = "\n".join(
        [method, raw_path, canonical_query, canonical_headers, ";".join(signed_names), "UNSIGNED-PAYLOAD"]
    )
    scope = f"{date}/{region}/{service}/aws4_request"
    to_sign = "\n".join([ALGORITHM, amz_date, scope, hashlib.sha256(canonical_request.encode()).hexdigest()])
    expected = hmac.new(_signing_key(secret, date, region, service), to_sign.encode(), hashlib.sha256).hexdigest()
    if not hmac.compare_digest(expected, signature):
        raise Refused(
            403,
            "SignatureDoesNotMatch",
            "The request signature we calculated does not match the signature you provided.",
        )


def verify_url(
    method: str, url: str, headers: Mapping[str, str], secrets: Callable[[str], str | None], **kw: Any
) -> None:
    """verify_presigned for a full URL as a client would send it (Host taken from the URL)."""
    parts = urlsplit(url)
    verify_presigned(method, parts.path, parts.query, {"host": parts.netloc, **headers}, secrets, **kw)


def _error(status: int, code: str, message: str, origin: str | None) -> tuple[str, list[tuple[str, str]], bytes]:
    body = (
        f'<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>{code}</Code><Message>{message}</Message></Error>'
    ).encode()
    headers = [("Content-Type", "application/xml"), ("Content-Length", str(len(body)))]
    if origin:
        headers += [("Access-Control-Allow-Origin", origin), ("Vary", "Origin")]
    reason = {400: "Bad Request", 403: "Forbidden", 411: "Length Required"}.get(status, "Error")
    return f"{status} {reason}", headers, body


def _is_upload_part(raw_query: str) -> bool:
    names = {name for name, _ in parse_qsl(raw_query, keep_blank_values=True)}
    return {"partNumber", "uploadId"} <= names


class PresignedS3Guard:
    """WSGI middleware: presigned S3 requests are verified like S3 does before moto sees them."""

    def __init__(self, app: Callable[..., Iterable[bytes]], secrets: Callable[[str], str | None]) -> None:
        self.app = app
        self.secrets = secrets

    def __call__(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        query = environ.get("QUERY_STRING", "")
        if "X-Amz-Signature=" not in query:
            return self.app(environ, start_response)
        origin = environ.get("HTTP_ORIGIN")
        headers = {
            key[5:].replace("_", "-").lower(): value for key, value in environ.items() if key.startswith("HTTP_")
        }
        if environ.get("CONTENT_TYPE"):
            headers["content-type"] = environ["CONTENT_TYPE"]
        if environ.get("CONTENT_LENGTH"):
            headers["content-length"] = environ["CONTENT_LENGTH"]
        raw_uri = environ.get("RAW_URI") or environ.get("REQUEST_URI") or quote(environ.get("PATH_INFO", ""))
        raw_path = raw_uri.split("?", 1)[0]
        try:
            verify_presigned(environ["REQUEST_METHOD"], raw_path, query, headers, self.secrets)
            if environ["REQUEST_METHOD"] == "PUT":
                self._check_body(environ, headers.get("x-amz-checksum-sha256"))
                if _is_upload_part(query):
                    # S3 ignores an UploadPart's Content-Type; moto parses a form-encoded body as a form (and
                    # refuses one above 500 kB): `curl --data-binary` sends that type by default
                    environ.pop("CONTENT_TYPE", None)
        except Refused as refused:
            status, response_headers, body = _error(refused.status, refused.code, refused.message, origin)
            start_response(status, response_headers)
            return [body]
        try:
            return self.app(environ, start_response)
        finally:
            RECEIVED.body = None  # the store has taken it (or not): this thread's next request is another

    @staticmethod
    def _check_body(environ: dict[str, Any], claimed: str | None) -> None:
        """A PUT body must be exactly Content-Length bytes (S3: 411 MissingContentLength without one, 400
        IncompleteBody when fewer arrive) and match its x-amz-checksum-sha256 when given (400 BadDigest, the
        request refused before anything is stored). The body is handed on to the app as the very bytes object
        moto's ``request.data`` then returns (``wsgi.input_terminated``: werkzeug reads the BytesIO as is, and
        a BytesIO made from bytes shares them; moto holds the whole body in memory anyway), and recorded in
        :data:`RECEIVED` with its SHA-256 and MD5."""
        raw_length = environ.get("CONTENT_LENGTH")
        if not raw_length:
            raise Refused(411, "MissingContentLength", "You must provide the Content-Length HTTP header.")
        try:
            length = int(raw_length)
        except ValueError:
            raise Refused(400, "InvalidArgument", "Content-Length is not a number.") from None
        if length < 0:
            raise Refused(400, "InvalidArgument", "Content-Length is negative.")
        source = environ["wsgi.input"]
        RECEIVED.body = None
        digest, md5 = hashlib.sha256(), hashlib.md5(usedforsecurity=False)
        chunks: list[bytes] = []
        left = length
        while left > 0:
            try:
                chunk = source.read(min(left, READ_BYTES))
            except (OSError, ValueError):
                chunk = b""
            if not chunk:
                raise Refused(
                    400,
                    "IncompleteBody",
                    "You did not provide the number of bytes specified by the Content-Length HTTP header.",
                )
            digest.update(chunk)
            md5.update(chunk)
            chunks.append(chunk)
            left -= len(chunk)
        if claimed is not None and base64.b64encode(digest.digest()).decode() != claimed:
            raise Refused(400, "BadDigest", "The SHA256 you specified did not match the calculated checksum.")
        body = chunks[0] if len(chunks) == 1 else b"".join(chunks)
        del chunks
        RECEIVED.body, RECEIVED.sha256, RECEIVED.md5 = body, digest.digest(), md5.hexdigest()
        environ["wsgi.input"] = io.BytesIO(body)
        environ["wsgi.input_terminated"] = True
        if claimed is None:
            return
        # S3 stores a verified checksum; moto records one only when the SDK announces the algorithm
        environ["HTTP_X_AMZ_SDK_CHECKSUM_ALGORITHM"] = "SHA256"
