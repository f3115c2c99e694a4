"""GET /admin/tenants: every tenant's totals (dfd.history.ports.TenantTotals), sorted, one page at a time.

The cursor is opaque to clients and strictly validated, like every token of this API (dfd.queries.tokens): the
base64url of ``{"sort": <the sort>, "order": <asc|desc>, "after": [<the last row's sort value>, <its tenant>]}``,
refused (400 ``invalid_token``) unless it names the request's own sort and order. It is not signed: it only
names a position in a listing its admin may read whole.
"""

from __future__ import annotations

import base64
import binascii
import csv
import io
import json
import re
from typing import TYPE_CHECKING, Any

from dfd.core.errors import BadRequest, Forbidden
from dfd.queries.tokens import MAX_TOKEN_CHARS

if TYPE_CHECKING:
    from collections.abc import Mapping

    from dfd.core.config import Settings
    from dfd.history.ports import TenantTotals, TenantTotalsReads
    from dfd.identity.caller import Caller

SORTS = ("tenant", "files", "bytes", "uploads", "duplicates", "bytes_saved", "used_bytes", "pending_uploads")
ORDERS = ("asc", "desc")
DEFAULT_LIMIT = 50
MAX_LIMIT = 1000
_LIMIT_RE = re.compile(r"[0-9]{1,4}")
MAX_TENANT_CHARS = 256
CSV_COLUMNS = (
    "tenant",
    "files",
    "bytes",
    "uploads",
    "duplicates",
    "bytes_saved",
    "pending_uploads",
    "used_bytes",
    "quota_bytes",
    "quota_used",
)


def _sort(raw: str | None) -> str:
    if raw is None:
        return "tenant"
    if raw not in SORTS:
        raise BadRequest(f"sort must be one of {', '.join(SORTS)}", code="invalid_sort")
    return raw


def _order(raw: str | None, sort: str) -> str:
    if raw is None:
        return "asc" if sort == "tenant" else "desc"
    if raw not in ORDERS:
        raise BadRequest(f"order must be one of {', '.join(ORDERS)}", code="invalid_order")
    return raw


def _limit(raw: str | None) -> int:
    if raw is None:
        return DEFAULT_LIMIT
    if not _LIMIT_RE.fullmatch(raw) or not 1 <= int(raw) <= MAX_LIMIT:
        raise BadRequest(f"limit must be an integer from 1 to {MAX_LIMIT}", code="invalid_limit")
    return int(raw)


def encode_cursor(sort: str, order: str, value: int | str, tenant: str) -> str:
    payload = json.dumps({"sort": sort, "order": order, "after": [value, tenant]}, separators=(",", ":"))
    return base64.urlsafe_b64encode(payload.encode()).decode().rstrip("=")


def decode_cursor(token: str, sort: str, order: str) -> tuple[int | str, str]:
    """The position a cursor names (the last row's sort value and tenant); 400 for anything this API did not
    issue for this sort and order."""
    invalid = BadRequest("cursor is not a cursor this API issued for this sort and order", code="invalid_token")
    if len(token) > MAX_TOKEN_CHARS:
        raise invalid
    try:
        raw = base64.b64decode(token + "=" * (-len(token) % 4), altchars=b"-_", validate=True)
        key = json.loads(raw)
    except (binascii.Error, ValueError):  # UnicodeDecodeError and JSONDecodeError are ValueErrors
        raise invalid from None
    if not isinstance(key, dict) or set(key) != {"sort", "order", "after"}:
        raise invalid
    after = key["after"]
    if key["sort"] != sort or key["order"] != order or not isinstance(after, list) or len(after) != 2:
        raise invalid
    value, tenant = after
    if not isinstance(tenant, str) or not 1 <= len(tenant) <= MAX_TENANT_CHARS:
        raise invalid
    if sort == "tenant":
        if value != tenant:
            raise invalid
    elif not isinstance(value, int) or isinstance(value, bool):
        raise invalid
    return value, tenant


def _row(totals: TenantTotals, quota: int) -> dict[str, Any]:
    return {
        "tenant": totals.tenant,
        "files": totals.files,
        "bytes": totals.bytes,
        "uploads": totals.uploads,
        "duplicates": totals.duplicates,
        "bytes_saved": totals.bytes_saved,
        "pending_uploads": totals.pending_uploads,
        "used_bytes": totals.used_bytes,
        "quota_bytes": quota or None,
        "quota_used": round(totals.used_bytes / quota, 6) if quota else None,
    }


def tenants_csv(body: Mapping[str, Any]) -> str:
    """One page of GET /admin/tenants as CSV, one row per tenant (empty: no quota)."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\r\n")
    writer.writerow(CSV_COLUMNS)
    for row in body["items"]:
        writer.writerow(["" if row[name] is None else row[name] for name in CSV_COLUMNS])
    return out.getvalue()


class Tenants:
    def __init__(self, settings: Settings, repo: TenantTotalsReads) -> None:
        self._s = settings
        self._repo = repo

    def page(
        self,
        caller: Caller,
        raw_sort: str | None,
        raw_order: str | None,
        raw_limit: str | None,
        raw_cursor: str | None,
    ) -> dict[str, Any]:
        if not caller.is_admin:
            raise Forbidden("admins only")
        sort = _sort(raw_sort)
        order = _order(raw_order, sort)
        limit = _limit(raw_limit)
        after = decode_cursor(raw_cursor, sort, order) if raw_cursor else None
        everyone = self._repo.tenant_totals()

        def position(totals: TenantTotals) -> tuple[Any, str]:
            return getattr(totals, sort), totals.tenant

        rows = sorted(everyone, key=position, reverse=order == "desc")
        if after is not None:
            rows = [t for t in rows if (position(t) < after if order == "desc" else position(t) > after)]
        page, more = rows[:limit], len(rows) > limit
        cursor = encode_cursor(sort, order, *position(page[-1])) if more and page else None
        return {
            "items": [_row(totals, self._s.tenant_quota_bytes) for totals in page],
            "count": len(page),
            "total_tenants": len(everyone),
            "sort": sort,
            "order": order,
            "next": cursor,
        }
