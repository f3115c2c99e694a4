"""GET /me: the caller, its tenant, its admin flag and the tenant's quota usage."""

from __future__ import annotations

from typing import Any

from dfd import deps
from dfd.adapters import aws
from dfd.core.config import settings
from dfd.core.http import json_response, lambda_entry, make_app, query_values
from dfd.handlers import init_done
from dfd.identity.caller import current_caller
from dfd.queries.me import me

settings()
app = make_app()


@app.get("/me")
def get_me() -> Any:
    query_values(app)
    return json_response(200, me(current_caller(app), deps.repository(), settings()))


handler = lambda_entry(app)

init_done(deps.repository, aws.dynamodb().build)
