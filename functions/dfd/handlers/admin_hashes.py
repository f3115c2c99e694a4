"""GET /admin/hashes?limit=&last_evaluated_key=: one page of stored files and an opaque next token."""

from __future__ import annotations

from typing import Any

from dfd import deps
from dfd.adapters import aws
from dfd.core.config import settings
from dfd.core.http import json_response, lambda_entry, make_app, query_values
from dfd.handlers import init_done
from dfd.identity.caller import current_caller

settings()
app = make_app()


@app.get("/admin/hashes")
def list_hashes() -> Any:
    caller = current_caller(app)
    limit, token = query_values(app, "limit", "last_evaluated_key")
    page = deps.queries().hashes(limit, token, caller)
    return json_response(200, page)


handler = lambda_entry(app)

init_done(deps.queries, aws.dynamodb().build)
