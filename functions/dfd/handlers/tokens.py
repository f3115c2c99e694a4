"""TokensFunction: the caller's personal access tokens (dfd.identity.pats), and prefix-scoped S3 credentials.

POST /me/tokens → 201 {"id", "name", "token", "expires_at"} (the secret, shown once); GET /me/tokens → the
caller's tokens, never a secret; DELETE /me/tokens/{id} → 204, the token refused from then on. These routes are
behind the HTTP API's JWT authorizer.

POST /me/s3-credentials → 201, the credential_process document of temporary S3 credentials for the caller's own
prefix (dfd.identity.s3credentials). It accepts a personal access token as /lfs does (a command on a laptop holds
one, not a one-hour access token), so the route has no authorizer: the function checks the ``Authorization``
header itself, before anything else, with the authorizer's checks (dfd.identity.credentials); a refusal is 401.
"""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools.event_handler.api_gateway import Response

from dfd import deps
from dfd.adapters import aws
from dfd.core.config import settings
from dfd.core.http import json_body, json_response, lambda_entry, make_app, path_id, query_values
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


@app.post("/me/s3-credentials")
def create_s3_credentials() -> Any:
    event = app.current_event
    caller = deps.credentials().caller(event.headers.get("authorization"))
    query_values(app)
    body = json_body(app) if event.body else {}  # the body is optional: {} asks for the defaults
    issued = deps.s3_credentials().issue(caller, body)
    logger.info(
        "s3 credentials issued",
        extra={
            "owner": caller.owner,
            "tenant": caller.tenant,
            "prefix": issued["prefix"],
            "expires": issued["Expiration"],
        },
    )
    return json_response(201, issued)


handler = lambda_entry(app)

init_done(deps.pat_service, aws.dynamodb().build)
