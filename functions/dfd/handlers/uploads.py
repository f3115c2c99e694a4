"""UploadsFunction: the caller's uploads. GET /uploads → the caller's own uploads, newest first, paged (an opaque
token checked against the caller); DELETE /uploads/{id} → 204 (dfd.deletes.service): the owner's or an admin's;
repeating it answers 204 again and changes nothing."""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools.event_handler.api_gateway import Response

from dfd import deps
from dfd.adapters import aws
from dfd.core.config import settings
from dfd.core.http import json_response, lambda_entry, make_app, path_id, query_values
from dfd.core.observability import logger
from dfd.handlers import init_done
from dfd.identity.caller import current_caller

settings()
app = make_app()


@app.get("/uploads")
def list_uploads() -> Any:
    caller = current_caller(app)
    limit, token = query_values(app, "limit", "last_evaluated_key")
    page = deps.queries().my_uploads(limit, token, caller)
    return json_response(200, page)


@app.delete("/uploads/<id>")
def delete_upload(id: str) -> Any:
    query_values(app)
    caller = current_caller(app)
    result = deps.delete_service().delete(caller, path_id(app, id))
    logger.info(
        "upload deleted",
        extra={
            "upload_id": result.upload_id,
            "outcome": result.outcome,
            "attempts": result.attempts,
            "admin": caller.is_admin,
        },
    )
    return Response(status_code=204, body="", headers={"Cache-Control": "no-store"})


handler = lambda_entry(app)

init_done(deps.delete_service, deps.queries, aws.dynamodb().build, aws.s3().build)
