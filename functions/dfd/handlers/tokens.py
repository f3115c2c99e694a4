"""TokensFunction: the caller's personal access tokens (dfd.identity.pats), behind the HTTP API's JWT authorizer.

POST /me/tokens → 201 {"id", "name", "token", "expires_at"} (the secret, shown once); GET /me/tokens → the
caller's tokens, never a secret; DELETE /me/tokens/{id} → 204, the token refused from then on.
"""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools.event_handler.api_gateway import Response

from dfd import deps
from dfd.adapters import aws
from dfd.core.config import settings
from dfd.core.http import json_body, json_response, lambda_entry, make_app, path_id
from dfd.core.observability import logger
from dfd.handlers import init_done
from dfd.identity.caller import current_caller

settings()
deps.lfs_settings()
app = make_app()


@app.post("/me/tokens")
def create_token() -> Any:
    caller = current_caller(app)
    created = deps.pat_service().create(caller, json_body(app))
    logger.info("personal access token created", extra={"token_id": created["id"], "owner": caller.owner})
    return json_response(201, created)


@app.get("/me/tokens")
def list_tokens() -> Any:
    return json_response(200, deps.pat_service().list(current_caller(app)))


@app.delete("/me/tokens/<id>")
def delete_token(id: str) -> Any:
    caller = current_caller(app)
    token_id = path_id(app, id)
    deps.pat_service().revoke(caller, token_id)
    logger.info("personal access token revoked", extra={"token_id": token_id, "owner": caller.owner})
    return Response(status_code=204, body="", headers={"Cache-Control": "no-store"})


handler = lambda_entry(app)

init_done(deps.pat_service, aws.dynamodb().build)
