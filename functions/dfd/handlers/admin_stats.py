"""GET /admin/stats: the global counters, summed over the shards in ONE BatchGetItem. GET /admin/stats/history:
the counters' snapshots over a range (dfd.history.service). GET /admin/tenants: every tenant's totals, sorted and
paged (dfd.history.tenants). The last two answer JSON or, with `Accept: text/csv`, CSV."""

from __future__ import annotations

from typing import Any

from dfd import deps
from dfd.adapters import aws
from dfd.core import clock
from dfd.core.config import settings
from dfd.core.http import csv_response, json_response, lambda_entry, make_app, query_values, wants_csv
from dfd.handlers import init_done
from dfd.history.service import history_csv
from dfd.history.tenants import tenants_csv
from dfd.identity.caller import current_caller

settings()
app = make_app()


@app.get("/admin/stats")
def get_stats() -> Any:
    query_values(app)
    return json_response(200, deps.queries().stats(current_caller(app)))


@app.get("/admin/stats/history")
def get_history() -> Any:
    raw_from, raw_to, raw_step = query_values(app, "from", "to", "step")
    body = deps.history().series(current_caller(app), raw_from, raw_to, raw_step, clock.now())
    return csv_response(history_csv(body)) if wants_csv(app) else json_response(200, body)


@app.get("/admin/tenants")
def get_tenants() -> Any:
    raw_sort, raw_order, raw_limit, raw_cursor = query_values(app, "sort", "order", "limit", "cursor")
    body = deps.tenants().page(current_caller(app), raw_sort, raw_order, raw_limit, raw_cursor)
    return csv_response(tenants_csv(body)) if wants_csv(app) else json_response(200, body)


handler = lambda_entry(app)

init_done(deps.queries, deps.history, deps.tenants, aws.dynamodb().build)
