"""What real S3 enforces on presigned requests and moto does not: SigV4 query signatures (so every signed
header — Content-Length, Content-Type, If-None-Match, x-amz-checksum-sha256 — binds the request), every
``x-amz-*`` header of the request signed (an unsigned storage class, ACL, tagging, redirect, metadata or
checksum is refused, 403 AccessDenied), expiry, a body of exactly Content-Length bytes, and the
x-amz-checksum-sha256 / x-amz-content-sha256 / Content-MD5 of the body. aws-chunked bodies and trailing
checksums, which moto would decode differently from the bytes checked here, are refused, as is any checksum
algorithm other than SHA-256. The same for PutObject and UploadPart (``?partNumber=&uploadId=``: the part
number and upload id are signed query parameters); a part for a multipart upload that no longer exists
(aborted, completed) is 404 NoSuchUpload, as S3 answers. Every answer to a browser's presigned request,
errors included, carries the CORS headers of the bucket rule its origin and method match. A WSGI middleware
for the local stack's emulator, and a plain verifier the tests use against the URLs the service issues.

:class:`S3RequestChecks` holds every S3 request, whoever signed it, to what S3 answers and moto does not (a
parseable target, each query parameter once, keys of at most 1,024 bytes, an UploadId of the key addressed)
and hands moto an object request's body as the bytes sent, whatever its Content-Type
(:func:`opaque_object_bodies`);
:func:`raw_target`, :func:`single_values` and :func:`address` are the one reading of a request that the guards
decide on and moto serves."""

from __future__ import annotations

import base64
import hashlib
import hmac
import io
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any
from urllib.parse import parse_qsl, quote, unquote, urlsplit
from xml.sax.saxutils import escape

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
    def __init__(self, status: int, code: str, message: str, extra: Mapping[str, str] | None = None) -> None:
        super().__init__(message)
        self.status, self.code, self.message = status, code, message
        self.extra = dict(extra or {})  # more elements of S3's <Error> document (HeadersNotSigned, UploadId...)


def _uri_encode(value: str) -> str:
    return quote(value, safe="-_.~")


def signing_key(secret: str, date: str, region: str, service: str) -> bytes:
    key = f"AWS4{secret}".encode()
    for part in (date, region, service, "aws4_request"):
        key = hmac.new(key, part.encode(), hashlib.sha256).digest()
    return key


def sign(key: bytes, text: str) -> str:
    return hmac.new(key, text.encode(), hashlib.sha256).hexdigest()


def string_to_sign(
    method: str,
    raw_path: str,
    params: Iterable[tuple[str, str]],
    headers: Mapping[str, str],
    signed_names: Sequence[str],
    payload: str,
    amz_date: str,
    scope: str,
) -> str:
    """SigV4's string to sign of a request (presigned or header-signed alike), after S3's checks of its headers:
    every ``x-amz-*`` header signed (else 403 AccessDenied, HeadersNotSigned), every signed header present.
    ``headers``: lower-case names; ``params``: the query's, the signature's own left out."""
    unsigned = sorted(name for name in headers if name.startswith("x-amz-") and name not in signed_names)
    if unsigned:
        raise Refused(
            403,
            "AccessDenied",
            "There were headers present in the request which were not signed",
            {"HeadersNotSigned": ", ".join(unsigned)},
        )
    canonical_headers = ""
    for name in signed_names:
        if name not in headers:
            raise Refused(403, "SignatureDoesNotMatch", f"signed header {name} is missing from the request")
        canonical_headers += f"{name}:{' '.join(headers[name].split())}\n"
    canonical_query = "&".join(f"{_uri_encode(k)}={_uri_encode(v)}" for k, v in sorted(params))
    canonical_request = "\n".join(
        [method, raw_path or "/", canonical_query, canonical_headers, ";".join(signed_names), payload]
    )
    return "\n".join([ALGORITHM, amz_date, scope, hashlib.sha256(canonical_request.encode()).hexdigest()])


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
    scope = f"{date}/{region}/{service}/aws4_request"
    unsigned_params = [(k, v) for k, v in params if k != "X-Amz-Signature"]
    to_sign = string_to_sign(
        method, raw_path, unsigned_params, lowered, signed_names, "UNSIGNED-PAYLOAD", amz_date, scope
    )
    expected = sign(signing_key(secret, date, region, service), to_sign)
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


CorsHeaders = Callable[[str, str, str], list[tuple[str, str]]]
"""(bucket, origin, method) -> the CORS headers S3 answers for the bucket rule they match ([] when none)."""

MultipartExists = Callable[[str, str, str], bool]
"""(bucket, key, upload id) -> whether that multipart upload is in progress."""

_REASONS = {400: "Bad Request", 403: "Forbidden", 404: "Not Found", 411: "Length Required"}


def _error(refused: Refused) -> tuple[str, list[tuple[str, str]], bytes]:
    extra = "".join(f"<{name}>{escape(value)}</{name}>" for name, value in refused.extra.items())
    body = (
        f'<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>{refused.code}</Code>'
        f"<Message>{escape(refused.message)}</Message>{extra}</Error>"
    ).encode()
    headers = [("Content-Type", "application/xml"), ("Content-Length", str(len(body)))]
    return f"{refused.status} {_REASONS.get(refused.status, 'Error')}", headers, body


def _is_upload_part(raw_query: str) -> bool:
    names = {name for name, _ in parse_qsl(raw_query, keep_blank_values=True)}
    return {"partNumber", "uploadId"} <= names


# --------------------------------------------------------------------------------------------------
# The request as the local S3 (moto) serves it: one parse for the guards and for the store
# --------------------------------------------------------------------------------------------------
MAX_KEY_BYTES = 1024  # S3's longest key, UTF-8 encoded
_BAD_URI = ("InvalidURI", "Couldn't parse the specified URI.")


def raw_target(environ: Mapping[str, Any]) -> tuple[str, str]:
    """(raw path, raw query) of a request as it arrived. Refused (400 InvalidURI): a target that is not an
    absolute path (``http://...``, ``*``), one starting with ``//`` (moto reads the first segment of such a path
    as the bucket and the rest, bucket included, as the key) and one holding a ``#`` (moto reads what follows
    as a fragment, the query included, where werkzeug hands the query on)."""
    raw_uri = environ.get("RAW_URI") or environ.get("REQUEST_URI")
    if not raw_uri:  # PATH_INFO: the path's bytes as latin-1, percent-decoded
        raw_uri = quote(str(environ.get("PATH_INFO", "")).encode("latin-1", "replace"))
    raw_uri = str(raw_uri)
    if not raw_uri.startswith("/") or raw_uri.startswith("//") or "#" in raw_uri:
        raise Refused(400, *_BAD_URI)
    raw_path, _, _ = raw_uri.partition("?")
    return raw_path, str(environ.get("QUERY_STRING", ""))


def single_values(raw_query: str) -> dict[str, str]:
    """The query's parameters by name. S3 reads the first of a repeated parameter, a policy check could read
    another: a parameter named twice is refused (400 InvalidArgument, the name in ArgumentName, bounded)."""
    values: dict[str, str] = {}
    for name, value in parse_qsl(raw_query, keep_blank_values=True):
        if name in values:
            raise Refused(
                400, "InvalidArgument", "A query parameter may be given once only.", {"ArgumentName": name[:64]}
            )
        values[name] = value
    return values


def address(raw_path: str, host: str) -> tuple[str, str]:
    """(bucket, key) a request addresses, read as moto reads it (its own functions): virtual-hosted when moto
    takes the Host for a bucket's (``<bucket>.localhost:4566``: the bucket from the Host, the whole path the key,
    as on S3), else path-style (``/<bucket>/<key>``). The key is the percent-decoded path, which must be UTF-8
    (else 400 InvalidURI); a Host naming an access point or S3 Control, which moto serves otherwise, is refused
    (400 InvalidRequest)."""
    from types import SimpleNamespace

    from moto.s3.responses import S3Response
    from moto.s3.utils import bucket_name_from_url
    from moto.s3bucket_path import utils as path_style

    if ".s3-accesspoint." in host or "s3-control" in host:
        raise Refused(400, "InvalidRequest", "The local S3 serves buckets only: no access points, no S3 Control.")
    try:
        path = unquote(raw_path, errors="strict")
    except UnicodeDecodeError:
        raise Refused(400, *_BAD_URI) from None
    url = f"http://{host}{raw_path}"
    if S3Response.subdomain_based_buckets(SimpleNamespace(headers={"host": host}, url=url)):
        return bucket_name_from_url(url) or "", path.removeprefix("/")
    return path_style.bucket_name_from_url(url) or "", path_style.parse_key_name(path)


def _address_of(environ: Mapping[str, Any], raw_path: str) -> tuple[str, str]:
    return address(raw_path, str(environ.get("HTTP_HOST", "")))


def _no_cors(bucket: str, origin: str, method: str) -> list[tuple[str, str]]:
    return []


def _refuse_encodings(headers: Mapping[str, str]) -> None:
    """Refuse what the guard cannot check byte for byte: an aws-chunked body (its checksums and length live
    inside the encoding: moto would decode and store other bytes than the ones checked here), a trailing
    checksum, and a checksum of any algorithm but SHA-256."""
    content_sha = headers.get("x-amz-content-sha256", "")
    encodings = [part.strip().lower() for part in headers.get("content-encoding", "").split(",")]
    if "aws-chunked" in encodings or content_sha.startswith("STREAMING-") or "x-amz-trailer" in headers:
        raise Refused(
            400,
            "InvalidRequest",
            "aws-chunked bodies and trailing checksums are not accepted on presigned URLs: send the plain body",
        )
    if "x-amz-decoded-content-length" in headers:
        raise Refused(400, "InvalidRequest", "x-amz-decoded-content-length is only valid with an aws-chunked body")
    others = sorted(
        name for name in headers if name.startswith("x-amz-checksum-") and name not in _CHECKSUM_HEADERS_ALLOWED
    )
    algorithm = headers.get("x-amz-sdk-checksum-algorithm")
    if others or (algorithm is not None and algorithm.upper() != "SHA256"):
        raise Refused(400, "InvalidRequest", "only SHA-256 checksums (x-amz-checksum-sha256) are accepted locally")
    if algorithm is not None and "x-amz-checksum-sha256" not in headers:
        raise Refused(400, "InvalidRequest", "x-amz-sdk-checksum-algorithm needs its x-amz-checksum-sha256 header")


_CHECKSUM_HEADERS_ALLOWED = frozenset({"x-amz-checksum-sha256", "x-amz-checksum-type"})


class PresignedS3Guard:
    """WSGI middleware: presigned S3 requests are verified like S3 does before moto sees them, and answered
    with the bucket's CORS headers (errors included)."""

    def __init__(
        self,
        app: Callable[..., Iterable[bytes]],
        secrets: Callable[[str], str | None],
        *,
        cors: CorsHeaders = _no_cors,
        multipart_exists: MultipartExists | None = None,
    ) -> None:
        self.app = app
        self.secrets = secrets
        self.cors = cors
        self.multipart_exists = multipart_exists

    def __call__(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        query = environ.get("QUERY_STRING", "")
        if "X-Amz-Signature=" not in query:
            return self.app(environ, start_response)
        method = environ["REQUEST_METHOD"]
        headers = {
            key[5:].replace("_", "-").lower(): value for key, value in environ.items() if key.startswith("HTTP_")
        }
        if environ.get("CONTENT_TYPE"):
            headers["content-type"] = environ["CONTENT_TYPE"]
        if environ.get("CONTENT_LENGTH"):
            headers["content-length"] = environ["CONTENT_LENGTH"]
        try:
            raw_path, _ = raw_target(environ)
            bucket, key = _address_of(environ, raw_path)
            params = single_values(query)
        except Refused as refused:
            status, response_headers, body = _error(refused)
            start_response(status, response_headers)
            return [body]
        origin = environ.get("HTTP_ORIGIN")
        cors = self.cors(bucket, origin, method) if origin else []

        def answer(status: str, response_headers: list[tuple[str, str]], exc_info: Any = None) -> Any:
            # S3 answers every request of a matching origin with the rule's headers, whatever the status
            kept = [(name, value) for name, value in response_headers if not name.lower().startswith("access-control-")]
            if origin:
                kept = [(name, value) for name, value in kept if name.lower() != "vary"] + cors
            return start_response(status, kept) if exc_info is None else start_response(status, kept, exc_info)

        upload_id = params.get("uploadId", "")
        part = method == "PUT" and _is_upload_part(query)
        try:
            verify_presigned(method, raw_path, query, headers, self.secrets)
            if method == "PUT":
                _refuse_encodings(headers)
                self._check_body(environ, headers)
                if part:
                    self._check_upload(bucket, key, upload_id)
                    # S3 ignores an UploadPart's Content-Type (`curl --data-binary` sends a form's by default)
                    environ.pop("CONTENT_TYPE", None)
            try:
                return self.app(environ, answer)
            except Exception:
                # moto fails with a KeyError on a part of an upload aborted or completed since the check above
                if part and self.multipart_exists is not None:
                    self._check_upload(bucket, key, upload_id)
                raise
        except Refused as refused:
            status, response_headers, body = _error(refused)
            answer(status, response_headers)
            return [body]
        finally:
            RECEIVED.body = None  # the store has taken it (or not): this thread's next request is another

    def _check_upload(self, bucket: str, key: str, upload_id: str) -> None:
        if self.multipart_exists is not None and not self.multipart_exists(bucket, key, upload_id):
            raise no_such_upload(upload_id)

    @staticmethod
    def _check_body(environ: dict[str, Any], headers: Mapping[str, str]) -> None:
        """A PUT body must be exactly Content-Length bytes (S3: 411 MissingContentLength without one, 400
        IncompleteBody when fewer arrive) and match its x-amz-checksum-sha256 (400 BadDigest), its
        x-amz-content-sha256 (400 XAmzContentSHA256Mismatch) and its Content-MD5 (400 BadDigest) when given,
        the request refused before anything is stored. The body is handed on to the app as the very bytes object
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
        claimed = headers.get("x-amz-checksum-sha256")
        if claimed is not None and base64.b64encode(digest.digest()).decode() != claimed:
            raise Refused(400, "BadDigest", "The SHA256 you specified did not match the calculated checksum.")
        content_sha = headers.get("x-amz-content-sha256", "UNSIGNED-PAYLOAD")
        if content_sha != "UNSIGNED-PAYLOAD" and content_sha.lower() != digest.hexdigest():
            raise Refused(
                400,
                "XAmzContentSHA256Mismatch",
                "The provided 'x-amz-content-sha256' header does not match what was computed.",
            )
        content_md5 = headers.get("content-md5")
        if content_md5 is not None and content_md5 != base64.b64encode(md5.digest()).decode():
            raise Refused(400, "BadDigest", "The Content-MD5 you specified did not match what we received.")
        body = chunks[0] if len(chunks) == 1 else b"".join(chunks)
        del chunks
        RECEIVED.body, RECEIVED.sha256, RECEIVED.md5 = body, digest.digest(), md5.hexdigest()
        environ["wsgi.input"] = io.BytesIO(body)
        environ["wsgi.input_terminated"] = True
        if claimed is None:
            return
        # S3 stores a verified checksum; moto records one only when the SDK announces the algorithm
        environ["HTTP_X_AMZ_SDK_CHECKSUM_ALGORITHM"] = "SHA256"


def _signing_service(environ: Mapping[str, Any]) -> str | None:
    """The service a request is signed for (SigV4, header or presigned; SigV2 is S3's), None when unsigned."""
    credential = ""
    authorization = str(environ.get("HTTP_AUTHORIZATION", ""))
    query = str(environ.get("QUERY_STRING", ""))
    if authorization.startswith("AWS ") or ("AWSAccessKeyId=" in query and "Signature=" in query):
        return "s3"
    if authorization.startswith(ALGORITHM) and "Credential=" in authorization:
        credential = authorization.split("Credential=", 1)[1].split(",", 1)[0]
    elif "X-Amz-Credential=" in query:
        credential = unquote(query.split("X-Amz-Credential=", 1)[1].split("&", 1)[0])
    parts = credential.strip().split("/")
    return parts[3] if len(parts) == 5 else None


_FORM_TYPES = frozenset({"application/x-www-form-urlencoded", "multipart/form-data"})
HELD_CONTENT_TYPE = "dfdlocal.s3.content_type"
"""Environ key of a form Content-Type :class:`S3RequestChecks` holds out of ``CONTENT_TYPE`` on its way to moto:
moto's dispatcher would read such a body for an Action, werkzeug would parse it as a form (moto then takes its
fields for the query's and a field named ``key`` for the body). The request class of
:func:`opaque_object_bodies` puts it back once the request is routed, its body left unparsed."""


def _is_form(environ: Mapping[str, Any]) -> bool:
    """Whether werkzeug would parse the body as a form."""
    return str(environ.get("CONTENT_TYPE", "")).split(";", 1)[0].strip().lower() in _FORM_TYPES


def opaque_object_bodies(create_app: Callable[[Any], Any]) -> Callable[[Any], Any]:
    """moto's ``create_backend_app`` whose apps read a request whose Content-Type :class:`S3RequestChecks` held
    (:data:`HELD_CONTENT_TYPE`) as S3 does: the body as the bytes sent, never a form, and the Content-Type as
    declared (the stored object's, the multipart upload's, CopyObject's REPLACE)."""
    from werkzeug.wrappers import Request

    class HeldContentType(Request):
        def __init__(self, environ: dict[str, Any], *args: Any, **kwargs: Any) -> None:
            held = environ.pop(HELD_CONTENT_TYPE, None)
            if held is not None:
                environ["CONTENT_TYPE"] = held
            self.opaque_body = held is not None
            super().__init__(environ, *args, **kwargs)

        @property
        def want_form_data_parsed(self) -> bool:
            return not self.opaque_body and super().want_form_data_parsed

    def create(service: Any) -> Any:
        app = create_app(service)
        base = app.request_class
        app.request_class = type(base.__name__, (HeldContentType, base), {})
        return app

    return create


def no_such_upload(upload_id: str) -> Refused:
    return Refused(
        404,
        "NoSuchUpload",
        "The specified multipart upload does not exist. The upload ID might be invalid, or the multipart upload"
        " might have been aborted or completed.",
        {"UploadId": upload_id[:128]},
    )


class S3RequestChecks:
    """WSGI middleware: what S3 answers every S3 request, whoever signed it, and moto does not: a target it can
    parse (400 InvalidURI: :func:`raw_target`, :func:`address`), each query parameter once (400 InvalidArgument:
    :func:`single_values`), a key of at most 1,024 bytes (400 KeyTooLongError), and an UploadId that belongs to
    the key addressed (404 NoSuchUpload) on UploadPart, ListParts, CompleteMultipartUpload and
    AbortMultipartUpload: moto finds an upload by its id alone, and would act on another key's upload. A form
    Content-Type is held out of the request moto routes and parses (:data:`HELD_CONTENT_TYPE`) on every request
    but a POST to a bucket (S3's browser form upload): S3 reads no other body as a form."""

    def __init__(self, app: Callable[..., Iterable[bytes]], multipart_exists: MultipartExists) -> None:
        self.app = app
        self.multipart_exists = multipart_exists

    def __call__(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        if _signing_service(environ) != "s3" or "HTTP_X_AMZ_TARGET" in environ:
            return self.app(environ, start_response)
        try:
            self.check(environ)
        except Refused as refused:
            status, headers, body = _error(refused)
            start_response(status, headers)
            return [body]
        return self.app(environ, start_response)

    def check(self, environ: dict[str, Any]) -> None:
        raw_path, raw_query = raw_target(environ)
        bucket, key = _address_of(environ, raw_path)
        params = single_values(raw_query)
        size = len(key.encode())
        if size > MAX_KEY_BYTES:
            raise Refused(400, "KeyTooLongError", "Your key is too long", {"Size": str(size), "MaxSizeAllowed": "1024"})
        method = str(environ.get("REQUEST_METHOD", ""))
        upload_id = params.get("uploadId")
        if (
            key
            and upload_id is not None
            and method in ("GET", "PUT", "POST", "DELETE")
            and not self.multipart_exists(bucket, key, upload_id)
        ):
            raise no_such_upload(upload_id)
        if _is_form(environ) and not (method == "POST" and not key):
            environ[HELD_CONTENT_TYPE] = environ.pop("CONTENT_TYPE")
