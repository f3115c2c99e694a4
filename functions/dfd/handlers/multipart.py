"""UploadPartsFunction: the multipart routes of an upload (dfd.uploads.multipart), the upload owner's only.

POST /uploads/{id}/parts → presigned UploadPart URLs; GET /uploads/{id}/parts → the parts S3 holds;
POST /uploads/{id}/complete → 202 once S3 assembled the object (the ingest follows its ObjectCreated event).
"""

from __future__ import annotations

import json
from typing import Any

from dfd import deps
from dfd.adapters import aws
from dfd.core.config import settings
from dfd.core.errors import BadRequest
from dfd.core.http import json_body, json_response, lambda_entry, make_app, path_id, query_values
from dfd.core.observability import logger
from dfd.handlers import init_done
from dfd.identity.caller import current_caller
from dfd.uploads.multipart import COMPLETING, RETRY_AFTER_SECONDS

settings()
app = make_app()


@app.post("/uploads/<id>/parts")
def presign_parts(id: str) -> Any:
    query_values(app)
    caller = current_caller(app)
    answer = deps.multipart_service().presign_parts(caller, path_id(app, id), json_body(app))
    logger.info("parts presigned", extra={"upload_id": path_id(app, id), "parts": len(answer["parts"])})
    return json_response(200, answer)


@app.get("/uploads/<id>/parts")
def list_parts(id: str) -> Any:
    query_values(app)
    return json_response(200, deps.multipart_service().list_parts(current_caller(app), path_id(app, id)))


@app.post("/uploads/<id>/complete")
def complete(id: str) -> Any:
    query_values(app)
    caller = current_caller(app)
    answer = deps.multipart_service().complete(caller, path_id(app, id), _optional_body())
    logger.info("multipart completed", extra={"upload_id": path_id(app, id), "status": answer["status"]})
    response = json_response(202, answer)
    if answer["status"] == COMPLETING:  # S3 is still assembling: the client repeats the same POST after this
        response.headers["Retry-After"] = str(RETRY_AFTER_SECONDS)
    return response


def _optional_body() -> Any:
    """The JSON body when there is one (complete's body is optional)."""
    try:
        raw = app.current_event.decoded_body
    except (ValueError, UnicodeDecodeError):
        raise BadRequest("request body is not valid UTF-8", code="invalid_json") from None
    if not raw or not raw.strip():
        return None
    try:
        return json.loads(raw)
    except (ValueError, RecursionError):
        return json_body(app)  # the same 400 as every route


handler = lambda_entry(app)

init_done(deps.multipart_service, aws.dynamodb().build, aws.s3().build)
