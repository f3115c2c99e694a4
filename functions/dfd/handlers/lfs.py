"""LfsFunction: the Git LFS Batch and Locking APIs at /lfs/{repo}/... (dfd.lfs.batch, dfd.lfs.locks), and the
parts of the multipart uploads a ``dfd-multipart`` batch registers (/lfs/{repo}/uploads/{id}/...: presign, list,
complete, abort; dfd.uploads.multipart, the owner's only, as at /uploads/{id}/...).

These routes have no API Gateway authorizer. Every request's path parameters are checked first (dfd.lfs.request:
404 for a malformed one), then its credentials (dfd.identity.credentials), before anything is read; a refusal of those
is git-lfs's 401 with ``LFS-Authenticate: Basic realm="dfd"`` (git then asks its credential helpers). Every answer
is ``application/vnd.git-lfs+json``; every error body is ``{"message", "request_id", "documentation_url"}`` (git
prints the message).
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from aws_lambda_powertools.event_handler.api_gateway import Response

from dfd import deps
from dfd.adapters import aws
from dfd.core.config import settings
from dfd.core.errors import DfdError, Forbidden, NotFound, ServiceUnavailable, Unauthorized
from dfd.core.http import lambda_entry, make_app, query_values
from dfd.core.observability import logger
from dfd.handlers import init_done
from dfd.lfs import request as lfsrequest
from dfd.lfs.batch import MEDIA_TYPE
from dfd.lfs.locks import LockError
from dfd.lfs.request import LfsError
from dfd.uploads.multipart import COMPLETING
from dfd.uploads.multipart import RETRY_AFTER_SECONDS as MULTIPART_RETRY_AFTER

if TYPE_CHECKING:
    from dfd.identity.caller import Caller

settings()
deps.lfs_settings()
app = make_app()

CHALLENGE = {"LFS-Authenticate": 'Basic realm="dfd"'}
RETRY_AFTER_SECONDS = 2
_ACCEPTED = ("application/vnd.git-lfs+json", "application/vnd.git-lfs", "application/*", "*/*")


def lfs_response(status: int, body: Any, headers: dict[str, str] | None = None) -> Response[str]:
    return Response(
        status_code=status,
        content_type=MEDIA_TYPE,
        body=json.dumps(body, separators=(",", ":")),
        headers={"Cache-Control": "no-store", **(headers or {})},
    )


def lfs_error(status: int, message: str, headers: dict[str, str] | None = None) -> Response[str]:
    request_id = app.current_event.request_context.request_id
    body = {"message": message, "request_id": request_id, "documentation_url": deps.lfs_settings().documentation_url}
    return lfs_response(status, body, headers)


@app.exception_handler(LfsError)  # type: ignore[untyped-decorator]
def _lfs_error(error: LfsError) -> Response[str]:
    logger.warning("lfs request refused", extra={"status": error.status, "error": error.message[:512]})
    return lfs_error(error.status, error.message, error.headers)


@app.exception_handler(LockError)  # type: ignore[untyped-decorator]
def _lock_error(error: LockError) -> Response[str]:
    logger.warning("lock request refused", extra={"status": error.status, "error": error.message[:512]})
    return lfs_error(error.status, error.message)


@app.exception_handler(DfdError)  # type: ignore[untyped-decorator]
def _domain_error(error: DfdError) -> Response[str]:
    """The domain's errors in git-lfs's terms: 401 with the Basic challenge; throttling as 429 + Retry-After."""
    if isinstance(error, Unauthorized):
        logger.info("lfs credentials refused", extra={"reason": error.message})
        return lfs_error(
            401, "Credentials needed: a personal access token (POST /me/tokens) as the password", CHALLENGE
        )
    if isinstance(error, ServiceUnavailable):
        logger.warning("lfs request throttled", extra={"error": error.message[:512]})
        return lfs_error(429, "the service is busy: retry shortly", {"Retry-After": str(RETRY_AFTER_SECONDS)})
    if error.status == 429:  # a rate bound of the domain: its own wait when it names one
        details = error.details if isinstance(error.details, dict) else {}
        retry_after = str(details.get("retry_after", RETRY_AFTER_SECONDS))
        return lfs_error(429, error.message, {"Retry-After": retry_after})
    if error.status >= 500:
        logger.error("lfs request failed", extra={"code": error.code, "error": error.message[:512]})
        return lfs_error(500, "internal error; the request id is in the logs")
    status = error.status if isinstance(error, Forbidden | NotFound) else 422
    logger.warning("lfs request refused", extra={"status": status, "code": error.code})
    return lfs_error(status, error.message)


@app.not_found
def _no_route(_: Exception) -> Response[str]:
    return lfs_error(404, "no such LFS route")


def _caller() -> Caller:
    """The verified caller (401 first, before anything is read), then the request's Accept (406)."""
    event = app.current_event
    caller = deps.credentials().caller(event.headers.get("authorization"))
    accept = event.headers.get("accept")
    if accept and not any(kind in accept for kind in _ACCEPTED):
        raise LfsError(406, f"the Accept header must be {MEDIA_TYPE}")
    return caller


def _body() -> Any:
    event = app.current_event
    try:
        raw = event.decoded_body
        return json.loads(raw) if raw else None
    except (ValueError, UnicodeDecodeError, RecursionError):
        raise LfsError(422, "the request body is not valid JSON") from None


def _path(name: str, fallback: str) -> str:
    """A path parameter as API Gateway decoded it (the router's own match when the event has none)."""
    return str((app.current_event.path_parameters or {}).get(name, fallback))


@app.post("/lfs/<repo>/objects/batch")
def batch(repo: str) -> Response[str]:
    name = lfsrequest.repo_name(_path("repo", repo))
    caller = _caller()
    api_url = deps.lfs_settings().api_url_for(app.current_event.request_context.api_id)
    authorization = app.current_event.headers.get("authorization")
    answer = deps.lfs_service().batch(caller, name, _body(), api_url, authorization)
    uploads = sum(1 for obj in answer["objects"] if "upload" in obj.get("actions", {}))
    extra = {"objects": len(answer["objects"]), "to_upload": uploads, "tenant": caller.tenant}
    logger.info("lfs batch", extra={**extra, "transfer": answer["transfer"]})
    return lfs_response(200, answer)


@app.post("/lfs/<repo>/verify/<id>")
def verify(repo: str, id: str) -> Response[str]:
    lfsrequest.repo_name(_path("repo", repo))
    upload_id = lfsrequest.upload_id(_path("id", id))
    caller = _caller()
    deps.lfs_service().verify(caller, upload_id, _body())
    return lfs_response(200, {})


def _upload_id(repo: str, id: str) -> str:
    lfsrequest.repo_name(_path("repo", repo))
    return lfsrequest.upload_id(_path("id", id))


@app.post("/lfs/<repo>/uploads/<id>/parts")
def presign_parts(repo: str, id: str) -> Response[str]:
    upload_id = _upload_id(repo, id)
    caller = _caller()
    answer = deps.lfs_service().multipart.presign_parts(caller, upload_id, _body())
    logger.info("lfs parts presigned", extra={"upload_id": upload_id, "parts": len(answer["parts"])})
    return lfs_response(200, answer)


@app.get("/lfs/<repo>/uploads/<id>/parts")
def list_parts(repo: str, id: str) -> Response[str]:
    upload_id = _upload_id(repo, id)
    caller = _caller()
    return lfs_response(200, deps.lfs_service().multipart.list_parts(caller, upload_id))


@app.post("/lfs/<repo>/uploads/<id>/complete")
def complete(repo: str, id: str) -> Response[str]:
    """202 once S3 assembled the object (then git-lfs's verify ingests it), or "completing" with Retry-After."""
    upload_id = _upload_id(repo, id)
    caller = _caller()
    answer = deps.lfs_service().multipart.complete(caller, upload_id, _body())
    logger.info("lfs multipart completed", extra={"upload_id": upload_id, "status": answer["status"]})
    retry = {"Retry-After": str(MULTIPART_RETRY_AFTER)} if answer["status"] == COMPLETING else None
    return lfs_response(202, answer, retry)


@app.delete("/lfs/<repo>/uploads/<id>")
def abort(repo: str, id: str) -> Response[str]:
    """The agent's abort of the upload a batch registered when it resumed an earlier one in its place."""
    upload_id = _upload_id(repo, id)
    caller = _caller()
    return lfs_response(200, deps.lfs_service().multipart.abort(caller, upload_id))


@app.post("/lfs/<repo>/locks")
def create_lock(repo: str) -> Response[str]:
    name = lfsrequest.repo_name(_path("repo", repo))
    caller = _caller()
    path = lfsrequest.lock_path(lfsrequest.body_object(_body()))
    status, body = deps.lock_service().create(caller, name, path)
    if status == 409:  # the lock in the way, with git-lfs's message
        return lfs_response(409, body)
    return lfs_response(201, body)


@app.get("/lfs/<repo>/locks")
def list_locks(repo: str) -> Response[str]:
    name = lfsrequest.repo_name(_path("repo", repo))
    caller = _caller()
    path, ident, cursor, limit, tenant, _ = query_values(app, "path", "id", "cursor", "limit", "tenant", "refspec")
    query = lfsrequest.lock_query(path, ident, cursor, limit, tenant)  # refspec: git-lfs's, not filtered on
    return lfs_response(200, deps.lock_service().list(caller, name, query))


@app.post("/lfs/<repo>/locks/verify")
def verify_locks(repo: str) -> Response[str]:
    name = lfsrequest.repo_name(_path("repo", repo))
    caller = _caller()
    page = lfsrequest.body_page(lfsrequest.body_object(_body(), optional=True))
    return lfs_response(200, deps.lock_service().verify(caller, name, page))


@app.post("/lfs/<repo>/locks/<id>/unlock")
def unlock(repo: str, id: str) -> Response[str]:
    name = lfsrequest.repo_name(_path("repo", repo))
    lock_id = lfsrequest.lock_id(_path("id", id))
    caller = _caller()
    body = lfsrequest.body_object(_body(), optional=True)
    force, tenant = lfsrequest.force(body), lfsrequest.body_tenant(body)
    return lfs_response(200, deps.lock_service().unlock(caller, name, lock_id, force=force, tenant=tenant))


handler = lambda_entry(app)

init_done(deps.credentials, deps.lfs_service, deps.lock_service, aws.dynamodb().build, aws.s3().build)
