"""GET /admin/stats: the global counters, summed over the shards in ONE BatchGetItem."""

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


@app.get("/admin/stats")
def get_stats() -> Any:
    query_values(app)
    return json_response(200, deps.queries().stats(current_caller(app)))


handler = lambda_entry(app)

init_done(deps.queries, aws.dynamodb().build)
