"""What S3 enforces on requests signed with temporary credentials the emulator's STS issued (``AssumeRole``, the
prefix-scoped S3 credentials of dfd/identity/s3access.py), which moto does not: the SigV4 header signature made with
the session's secret (dfdlocal.sigv4), the session token, the expiry, the request's S3 action on its resource
allowed by the session policy AND the role's policies with no Deny, and what the bucket policy denies the role
whatever the session says (template.yaml, FilesBucketPolicy: ACL headers, SSE-C; reads and keys outside ``s3/``
are outside the role's policy already). The body is read whole and verified (a signed SHA-256, the
``x-amz-checksum-*`` headers, an aws-chunked body's chunk and trailer signatures and its trailing checksum),
and moto receives the decoded bytes with the verified checksum as a plain header, so that it stores what S3
would. Requests with any other credentials pass unchanged (the functions' own, presigned URLs).

The decision is on the request moto then serves: its bucket and key read as moto reads them
(:func:`dfdlocal.s3auth.address`: a virtual-hosted Host makes the whole path the key), a query naming a
parameter twice refused (400 InvalidArgument) and so is a target moto would read otherwise (400 InvalidURI). As
on S3, a write carrying ``x-amz-tagging`` needs ``s3:PutObjectTagging`` too (object-lock headers
``s3:PutObjectRetention`` / ``s3:PutObjectLegalHold``), and ``x-amz-storage-class`` is the condition key
``s3:x-amz-storage-class``.

Policies are evaluated here rather than by moto's ``IAMPolicy``: moto reads a Resource as a regular expression
('.' matches any character: ``s3/t/a.b/*`` would admit ``s3/t/aXb/``), fails an Allow whose condition does not
hold as if it were a Deny, and knows no ``s3:prefix``.
"""

from __future__ import annotations

import base64
import hashlib
import io
import json
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any
from urllib.parse import unquote

from dfdlocal import sigv4
from dfdlocal.s3auth import Refused, _error, address, raw_target, single_values

TEMPORARY_KEY_PREFIX = "ASIA"  # the access key ids STS issues (moto's too)
# what FilesBucketPolicy denies S3CredentialsRole on any write (a test holds this list to the template's)
DENIED_HEADERS = (
    "x-amz-acl",
    "x-amz-grant-full-control",
    "x-amz-grant-read",
    "x-amz-grant-read-acp",
    "x-amz-grant-write-acp",
    "x-amz-server-side-encryption-customer-algorithm",
)
# the one ACL a write may carry: the bucket is BucketOwnerEnforced, where S3 accepts this canned ACL (and refuses
# every other) and it grants nothing (the bucket owner owns every object); rclone before 1.61 sends an ACL on every
# write (FilesBucketPolicy's S3CredentialsNoAcl allows the same value)
OWNER_ACL = ("x-amz-acl", "bucket-owner-full-control")
_OTHER_CHECKSUMS = frozenset({"x-amz-checksum-crc64nvme"})  # S3 knows it, the local S3 refuses it (400)
_SSE_C = ("x-amz-server-side-encryption-customer-key", "x-amz-server-side-encryption-customer-key-md5")
STORAGE_CLASS = "x-amz-storage-class"  # its value is the request's s3:x-amz-storage-class
# headers of a write (PutObject, CreateMultipartUpload) that need a permission of their own, as on S3
_WRITE_EXTRAS = (
    ("x-amz-tagging", "s3:PutObjectTagging"),
    ("x-amz-object-lock-mode", "s3:PutObjectRetention"),
    ("x-amz-object-lock-retain-until-date", "s3:PutObjectRetention"),
    ("x-amz-object-lock-legal-hold", "s3:PutObjectLegalHold"),
)


@dataclass(frozen=True)
class IssuedSession:
    """Credentials the emulator's STS issued."""

    access_key_id: str
    secret_access_key: str
    session_token: str
    expiration: datetime  # aware, UTC
    role_arn: str
    policy: str | None  # the session policy passed to AssumeRole (JSON), if any
    issued: datetime | None = None  # aware, UTC: the condition key aws:TokenIssueTime


Sessions = Callable[[str], IssuedSession | None]
RolePolicies = Callable[[str], Sequence[Mapping[str, Any]]]  # role ARN -> its policy documents


# --------------------------------------------------------------------------------------------------
# Which S3 action a request is (IAM's names: docs "Actions, resources, and condition keys for Amazon S3")
# --------------------------------------------------------------------------------------------------
_OBJECT_SUBRESOURCES = {
    ("GET", "acl"): "s3:GetObjectAcl",
    ("PUT", "acl"): "s3:PutObjectAcl",
    ("GET", "tagging"): "s3:GetObjectTagging",
    ("PUT", "tagging"): "s3:PutObjectTagging",
    ("DELETE", "tagging"): "s3:DeleteObjectTagging",
    ("GET", "attributes"): "s3:GetObjectAttributes",
    ("GET", "retention"): "s3:GetObjectRetention",
    ("PUT", "retention"): "s3:PutObjectRetention",
    ("GET", "legal-hold"): "s3:GetObjectLegalHold",
    ("PUT", "legal-hold"): "s3:PutObjectLegalHold",
    ("POST", "restore"): "s3:RestoreObject",
    ("POST", "select"): "s3:GetObject",
    ("GET", "torrent"): "s3:GetObjectTorrent",
}


@dataclass(frozen=True)
class S3Request:
    action: str
    resource: str  # ARN
    context: dict[str, str]  # condition keys with a value in this request (s3:prefix, s3:x-amz-acl...)
    also: tuple[tuple[str, str], ...] = ()  # further (action, resource) the request needs (a copy's source read)


def classify(method: str, raw_path: str, raw_query: str, headers: Mapping[str, str]) -> S3Request:
    """The IAM action and resource of an S3 request, its bucket and key read as the local S3 reads them
    (:func:`dfdlocal.s3auth.address`: path-style, or virtual-hosted by its ``host``), its query refused when a
    parameter is repeated."""
    bucket, key = address(raw_path, headers.get("host", ""))
    query = single_values(raw_query)
    context = {f"s3:{name}": headers[name] for name in (*DENIED_HEADERS, STORAGE_CLASS) if name in headers}
    if not key:
        arn = f"arn:aws:s3:::{bucket}"
        if method in ("GET", "HEAD") and not set(query) - {
            "list-type",
            "prefix",
            "delimiter",
            "max-keys",
            "continuation-token",
            "start-after",
            "encoding-type",
            "fetch-owner",
            "marker",
        }:
            if "prefix" in query:
                context["s3:prefix"] = query["prefix"]
            return S3Request("s3:ListBucket", arn, context)
        if method == "GET" and "uploads" in query:
            return S3Request("s3:ListBucketMultipartUploads", arn, context)
        if method == "GET" and "versions" in query:
            return S3Request("s3:ListBucketVersions", arn, context)
        if method == "POST" and "delete" in query:
            return S3Request("s3:DeleteObject", f"{arn}/*", context)
        return S3Request("s3:BucketConfiguration", arn, context)  # any other bucket call: none is granted
    arn = f"arn:aws:s3:::{bucket}/{key}"
    for (verb, name), action in _OBJECT_SUBRESOURCES.items():
        if method == verb and name in query:
            return S3Request(action, arn, context)
    if method == "HEAD":  # HeadObject, whatever the query
        return S3Request("s3:GetObject", arn, context)
    if method == "GET":
        return S3Request("s3:ListMultipartUploadParts" if "uploadId" in query else "s3:GetObject", arn, context)
    if method == "DELETE":
        return S3Request("s3:AbortMultipartUpload" if "uploadId" in query else "s3:DeleteObject", arn, context)
    if method in ("PUT", "POST"):
        # PutObject, UploadPart, CreateMultipartUpload (?uploads), CompleteMultipartUpload (?uploadId)
        source = headers.get("x-amz-copy-source")
        also: tuple[tuple[str, str], ...] = ()
        if source is not None:  # CopyObject / UploadPartCopy read their source
            path = unquote(source.split("?", 1)[0]).lstrip("/")
            also = (("s3:GetObject", f"arn:aws:s3:::{path}"),)
        # a write that tags its object, or locks it, needs that permission too
        also = (*also, *((permission, arn) for header, permission in _WRITE_EXTRAS if header in headers))
        return S3Request("s3:PutObject", arn, context, also)
    return S3Request(f"s3:{method.capitalize()}", arn, context)


# --------------------------------------------------------------------------------------------------
# Policy evaluation
# --------------------------------------------------------------------------------------------------
def _glob(pattern: str) -> re.Pattern[str]:
    return re.compile("".join(".*" if c == "*" else "." if c == "?" else re.escape(c) for c in pattern), re.DOTALL)


def _listed(value: Any) -> list[str]:
    return [str(item) for item in (value if isinstance(value, list) else [value])]


def _matches(patterns: Any, value: str, *, ignore_case: bool = False) -> bool:
    flags = re.IGNORECASE if ignore_case else 0
    return any(re.fullmatch(_glob(p).pattern, value, flags | re.DOTALL) for p in _listed(patterns))


def _condition_holds(condition: Mapping[str, Any], context: Mapping[str, str]) -> bool:
    for qualified, keys in condition.items():
        if_exists = qualified.endswith("IfExists")
        operator = qualified.removesuffix("IfExists")
        for key, expected in keys.items():
            actual = context.get(key)
            values = _listed(expected)
            if if_exists and actual is None:  # ...IfExists: a key absent from the request matches
                continue
            if operator == "StringLike":
                holds = actual is not None and _matches(values, actual)
            elif operator == "StringNotLike":
                holds = actual is None or not _matches(values, actual)
            elif operator == "StringEquals":
                holds = actual is not None and actual in values
            elif operator == "StringNotEquals":
                holds = actual is None or actual not in values
            elif operator == "Null":
                holds = (actual is None) == (values[0].lower() == "true")
            elif operator in _DATE_OPERATORS:
                holds = actual is not None and any(_DATE_OPERATORS[operator](_date(actual), _date(v)) for v in values)
            else:
                raise Refused(403, "AccessDenied", f"the local S3 does not evaluate the condition operator {qualified}")
            if not holds:
                return False
    return True


_DATE_OPERATORS: dict[str, Callable[[datetime, datetime], bool]] = {
    "DateEquals": lambda a, b: a == b,
    "DateNotEquals": lambda a, b: a != b,
    "DateLessThan": lambda a, b: a < b,
    "DateLessThanEquals": lambda a, b: a <= b,
    "DateGreaterThan": lambda a, b: a > b,
    "DateGreaterThanEquals": lambda a, b: a >= b,
}


def _date(text: str) -> datetime:
    """An IAM date condition value: ISO 8601 (``2026-12-01T12:00:00Z``) or epoch seconds; 403 for anything else."""
    try:
        moment = datetime.fromtimestamp(int(text), UTC) if text.isdigit() else datetime.fromisoformat(text)
    except ValueError:
        raise Refused(403, "AccessDenied", "the local S3 cannot read a date condition value") from None
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def evaluate(policy: Mapping[str, Any], action: str, resource: str, context: Mapping[str, str]) -> str | None:
    """ "Deny", "Allow" or None (no statement applies) for one identity policy document."""
    statements = policy.get("Statement") or []
    result = None
    for statement in statements if isinstance(statements, list) else [statements]:
        if "Action" in statement:
            applies = _matches(statement["Action"], action, ignore_case=True)
        else:
            applies = not _matches(statement.get("NotAction", []), action, ignore_case=True)
        if applies and "Resource" in statement:
            applies = _matches(statement["Resource"], resource)
        elif applies:
            applies = not _matches(statement.get("NotResource", []), resource)
        if not applies or not _condition_holds(statement.get("Condition") or {}, context):
            continue
        if statement.get("Effect") == "Deny":
            return "Deny"
        if statement.get("Effect") == "Allow":
            result = "Allow"
    return result


def allowed(
    policies: Sequence[Mapping[str, Any]], role_policies: Sequence[Mapping[str, Any]], request: S3Request
) -> bool:
    """Whether a session may make the request: the role's policies allow every (action, resource) it needs,
    each session policy too, and none denies."""
    for action, resource in ((request.action, request.resource), *request.also):
        verdicts = [evaluate(policy, action, resource, request.context) for policy in role_policies]
        if "Deny" in verdicts or "Allow" not in verdicts:
            return False
        for policy in policies:
            if evaluate(policy, action, resource, request.context) != "Allow":
                return False
    return True


# --------------------------------------------------------------------------------------------------
# The middleware
# --------------------------------------------------------------------------------------------------
def _headers(environ: Mapping[str, Any]) -> dict[str, str]:
    headers = {
        key[5:].replace("_", "-").lower(): str(value) for key, value in environ.items() if key.startswith("HTTP_")
    }
    if environ.get("CONTENT_TYPE"):
        headers["content-type"] = str(environ["CONTENT_TYPE"])
    if environ.get("CONTENT_LENGTH"):
        headers["content-length"] = str(environ["CONTENT_LENGTH"])
    return headers


def is_temporary_s3_request(environ: Mapping[str, Any]) -> bool:
    """Whether the request is an S3 request header-signed with temporary (STS) credentials (what
    :class:`IssuedCredentialsGuard` checks before any service sees it)."""
    authorization = str(environ.get("HTTP_AUTHORIZATION", ""))
    key = sigv4.access_key_of(authorization)
    return (
        key is not None
        and key.startswith(TEMPORARY_KEY_PREFIX)
        and "/s3/aws4_request" in authorization
        and "HTTP_X_AMZ_TARGET" not in environ
    )


class IssuedCredentialsGuard:
    """WSGI middleware: requests signed with STS-issued credentials are verified and authorized as S3 does
    before moto sees them (403 AccessDenied & co., S3's XML); every other request passes unchanged."""

    def __init__(
        self,
        app: Callable[..., Iterable[bytes]],
        sessions: Sessions,
        role_policies: RolePolicies,
        now: Callable[[], datetime] = lambda: datetime.now(UTC),
    ) -> None:
        self.app = app
        self.sessions = sessions
        self.role_policies = role_policies
        self.now = now

    def __call__(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        authorization = str(environ.get("HTTP_AUTHORIZATION", ""))
        key = sigv4.access_key_of(authorization)
        if key is None or not key.startswith(TEMPORARY_KEY_PREFIX):
            return self.app(environ, start_response)  # the stack's own credentials, presigned URLs: as before
        try:
            self._verify(environ, authorization, self.sessions(key))
        except Refused as refused:
            status, headers, body = _error(refused)
            start_response(status, headers)
            return [body]
        return self.app(environ, start_response)

    def _verify(self, environ: dict[str, Any], authorization: str, session: IssuedSession | None) -> None:
        if session is None:
            raise Refused(
                403, "InvalidAccessKeyId", "The AWS Access Key Id you provided does not exist in our records."
            )
        auth = sigv4.parse_authorization(authorization)
        if auth.service != "s3" or "HTTP_X_AMZ_TARGET" in environ:  # S3's API names no X-Amz-Target
            raise Refused(403, "AccessDenied", "these credentials are for S3 only")
        method = str(environ["REQUEST_METHOD"])
        raw_path, raw_query = raw_target(environ)
        headers = _headers(environ)
        now = self.now()
        signed = sigv4.verify_headers(method, raw_path, raw_query, headers, auth, session.secret_access_key, now)
        if headers.get("x-amz-security-token") != session.session_token:
            raise Refused(403, "InvalidToken", "The provided token is malformed or otherwise invalid.")
        if now >= session.expiration:
            raise Refused(400, "ExpiredToken", "The provided token has expired.")
        request = classify(method, raw_path, raw_query, headers)
        if session.issued is not None:
            request.context["aws:TokenIssueTime"] = session.issued.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        denied = [name for name in (*DENIED_HEADERS, *_SSE_C) if name in headers and (name, headers[name]) != OWNER_ACL]
        policies = [json.loads(session.policy)] if session.policy else []
        if denied or not allowed(policies, self.role_policies(session.role_arn), request):
            raise Refused(403, "AccessDenied", "Access Denied")
        self._body(environ, method, headers, signed)

    @staticmethod
    def _body(environ: dict[str, Any], method: str, headers: Mapping[str, str], signed: sigv4.Signed) -> None:
        """Read, verify and decode the body; hand moto the plain bytes, with the verified trailing checksum as
        a header."""
        raw = _read(environ)
        if signed.payload in sigv4.STREAMING:
            trailer = tuple(n.strip().lower() for n in headers.get("x-amz-trailer", "").split(",") if n.strip())
            decoded = sigv4.decode_chunked(raw, signed, trailer)
            declared = headers.get("x-amz-decoded-content-length")
            if declared is None or declared != str(len(decoded.data)):
                raise Refused(
                    400,
                    "IncompleteBody",
                    "x-amz-decoded-content-length does not match the length of the decoded body",
                )
            data, trailers = decoded.data, decoded.trailers
        else:
            sigv4.verify_plain(raw, signed)
            data, trailers = raw, {}
        # a PUT's checksum headers are its body's (PutObject, UploadPart); CompleteMultipartUpload's name the
        # whole object (moto checks them against the parts)
        for name, value in headers.items():
            if method == "PUT" and name in sigv4.CHECKSUM_HEADERS | _OTHER_CHECKSUMS:
                sigv4.verify_checksum(name, value, data)
        content_md5 = headers.get("content-md5")
        if content_md5 is not None and content_md5 != base64.b64encode(_md5(data)).decode():
            raise Refused(400, "BadDigest", "The Content-MD5 you specified did not match what we received.")
        if signed.payload in sigv4.STREAMING:
            for name in ("HTTP_TRANSFER_ENCODING", "HTTP_X_AMZ_DECODED_CONTENT_LENGTH", "HTTP_X_AMZ_TRAILER"):
                environ.pop(name, None)
            encodings = [e.strip() for e in str(environ.get("HTTP_CONTENT_ENCODING", "")).split(",")]
            kept = [e for e in encodings if e and e.lower() != "aws-chunked"]
            if kept:
                environ["HTTP_CONTENT_ENCODING"] = ",".join(kept)
            else:
                environ.pop("HTTP_CONTENT_ENCODING", None)
            environ["HTTP_X_AMZ_CONTENT_SHA256"] = sigv4.UNSIGNED_PAYLOAD
            for name, value in trailers.items():
                environ["HTTP_" + name.upper().replace("-", "_")] = value
                # moto stores a checksum only when the SDK names its algorithm, as S3 stores a verified one
                environ["HTTP_X_AMZ_SDK_CHECKSUM_ALGORITHM"] = name.removeprefix("x-amz-checksum-").upper()
        environ["CONTENT_LENGTH"] = str(len(data))
        environ["wsgi.input"] = io.BytesIO(data)
        environ["wsgi.input_terminated"] = True


def _md5(data: bytes) -> bytes:
    return hashlib.md5(data, usedforsecurity=False).digest()


def _read(environ: Mapping[str, Any]) -> bytes:
    """The whole request body: Content-Length bytes, or to the end of a chunked transfer (werkzeug decodes it)."""
    source = environ["wsgi.input"]
    raw_length = environ.get("CONTENT_LENGTH")
    if raw_length:
        try:
            length = int(raw_length)
        except ValueError:
            raise Refused(400, "InvalidArgument", "Content-Length is not a number.") from None
        data = source.read(length) if length > 0 else b""
        if len(data) != length:
            raise Refused(
                400,
                "IncompleteBody",
                "You did not provide the number of bytes specified by the Content-Length HTTP header.",
            )
        return bytes(data)
    if environ.get("wsgi.input_terminated") or "chunked" in str(environ.get("HTTP_TRANSFER_ENCODING", "")).lower():
        return bytes(source.read())
    return b""


# --------------------------------------------------------------------------------------------------
# moto's STS and IAM as the sources of sessions and role policies
# --------------------------------------------------------------------------------------------------
def moto_sessions(account_id: str) -> Sessions:
    """Sessions issued by the emulator's STS (moto keeps every AssumeRole's credentials, expired ones too)."""

    def find(access_key_id: str) -> IssuedSession | None:
        from moto.sts.models import sts_backends

        for role in sts_backends[account_id]["aws"].assumed_roles:
            if role.access_key_id == access_key_id:
                expiration = role.expiration
                if expiration.tzinfo is None:
                    expiration = expiration.replace(tzinfo=UTC)
                issued = role.access_key.create_date  # the AssumeRole's moment (moto: naive UTC)
                return IssuedSession(
                    role.access_key_id,
                    role.secret_access_key,
                    role.session_token,
                    expiration,
                    role.role_arn,
                    role.policy or None,
                    issued if issued.tzinfo else issued.replace(tzinfo=UTC),
                )
        return None

    return find


def moto_role_policies(account_id: str) -> RolePolicies:
    """A role's inline and attached policies in the emulator's IAM (none for a role it does not hold)."""

    def policies(role_arn: str) -> list[Mapping[str, Any]]:
        from moto.iam.models import iam_backends

        backend = iam_backends[account_id]["aws"]
        try:
            role = backend.get_role_by_arn(role_arn)
        except Exception:  # moto raises its IAMNotFoundException: the role is unknown, it grants nothing
            return []
        documents: list[Mapping[str, Any]] = []
        for document in role.policies.values():
            documents.append(json.loads(document) if isinstance(document, str) else document)
        for managed in role.managed_policies.values():
            default = next(version for version in managed.versions if version.is_default)
            text = default.document
            documents.append(json.loads(text) if isinstance(text, str) else text)
        return documents

    return policies
