"""Domain errors. Each carries its HTTP status and a stable code; http.py maps them in one place."""

from __future__ import annotations

from typing import Any


class DfdError(Exception):
    status: int = 500
    code: str = "internal_error"

    def __init__(self, message: str, *, code: str | None = None, details: Any = None) -> None:
        super().__init__(message)
        self.message = message
        if code is not None:
            self.code = code
        self.details = details

    def to_body(self) -> dict[str, Any]:
        error: dict[str, Any] = {"code": self.code, "message": self.message}
        if self.details is not None:
            error["details"] = self.details
        return {"error": error}


class BadRequest(DfdError):
    status = 400
    code = "bad_request"


class ValidationFailed(BadRequest):
    code = "validation_error"


class TooLarge(BadRequest):
    """An upload larger than MaxUploadBytes: what one ingest invocation can read and hash (docs/performance.md)."""

    code = "too_large"


class StillCompleting(Exception):
    """S3 has not finished assembling a multipart upload within the request's budget; it carries on, and a
    repeat of CompleteMultipartUpload (idempotent) finds it done."""


class NotFound(DfdError):
    status = 404
    code = "not_found"


class Conflict(DfdError):
    status = 409
    code = "conflict"


class NotReady(Conflict):
    code = "not_ready"


class TooManyRequests(DfdError):
    """Refused for now: `details["retry_after"]` seconds later it may be answered (also a Retry-After header)."""

    status = 429
    code = "too_many_requests"


class Gone(DfdError):
    """The resource existed and was deleted (an upload deleted by its owner or an admin)."""

    status = 410
    code = "deleted"


class ServiceUnavailable(DfdError):
    """A dependency is throttling or unavailable: the request may be retried."""

    status = 503
    code = "service_unavailable"


class InvalidEvent(DfdError):
    """An ingest event that can never be processed (malformed); it touches no state."""

    status = 400
    code = "invalid_event"


class ObjectNotFound(DfdError):
    """The S3 object does not exist (deleted duplicate, never uploaded)."""

    status = 404
    code = "object_not_found"


class ObjectChanged(DfdError):
    """The object changed while it was read (412): a newer event follows."""

    status = 409
    code = "object_changed"


class ObjectArchived(DfdError):
    """The object's storage class keeps its bytes unreadable until restored (GLACIER, DEEP_ARCHIVE, an
    INTELLIGENT_TIERING archive tier: S3's InvalidObjectState, ObjectNotInActiveTierError): no read or copy of it
    can succeed."""

    status = 409
    code = "object_archived"


class TransactionRetryable(ServiceUnavailable):
    """A transaction was cancelled by a conflict or throttling and may be retried."""

    code = "transaction_conflict"


class Unauthorized(DfdError):
    """No verified identity on the request (no or unreadable JWT claims)."""

    status = 401
    code = "unauthorized"


class Forbidden(DfdError):
    """The caller is known but may not do this (admins only, ambiguous or invalid tenant membership)."""

    status = 403
    code = "forbidden"


class MultipartGone(DfdError):
    """S3 knows no such multipart upload (completed, aborted or expired: NoSuchUpload)."""

    status = 409
    code = "upload_gone"


class PartsRejected(Conflict):
    """CompleteMultipartUpload refused the parts list (InvalidPart, InvalidPartOrder, EntityTooSmall)."""

    code = "incomplete"


class UpstreamFailed(DfdError):
    """An AWS service refused a call the deployment should be allowed to make (a misconfiguration, not the
    caller's fault, not worth a retry)."""

    status = 502
    code = "upstream_error"
