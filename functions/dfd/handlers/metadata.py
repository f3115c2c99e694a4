"""GET /metadata/{id}: a stored file (64-hex id) or an upload's status (upload id)."""

from __future__ import annotations

from typing import Any

from dfd import deps
from dfd.adapters import aws
from dfd.core.config import settings
from dfd.core.http import json_response, lambda_entry, make_app, path_id, query_values
from dfd.handlers import init_done
from dfd.identity.caller import current_caller

settings()
app = make_app()


@app.get("/metadata/<id>")
def get_metadata(id: str) -> Any:
    query_values(app)
    caller = current_caller(app)
    return json_response(200, deps.queries().metadata(path_id(app, id), caller))


handler = lambda_entry(app)

init_done(deps.queries, aws.dynamodb().build)
