"""The precheck bound's write (dfd.uploads.ports.PrecheckBound): one Update of the tenant's precheck item in the
counters table (`precheck#<tenant>`: apart from its usage shards, so prechecks never contend with registrations on the
usage gate; no COUNTER_FIELDS, so stats and the audits' sums ignore it), in the precheck duplicate's
transaction. Either the window is the item's and not full (+1), or the item counts another window (or none) and
this one starts at 1; a failed condition returns the item (PrecheckLimited) and the service decides which it
was."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from dfd.adapters.dynamo import codec

if TYPE_CHECKING:
    from dfd.uploads.ports import PrecheckBound


def precheck_bound_update(table: str, tenant: str, bound: PrecheckBound) -> dict[str, Any]:
    """The item's key, attribute names and values: dfd.adapters.dynamo.codec.precheck_update."""
    if bound.fresh:
        expression, condition = "SET #w = :w, #n = :one", "attribute_not_exists(#w) OR #w <> :w"
        values: dict[str, Any] = {":w": bound.window, ":one": 1}
    else:
        expression, condition = "SET #n = #n + :one", "#w = :w AND #n < :limit"
        values = {":w": bound.window, ":one": 1, ":limit": bound.limit}
    return {"Update": {"TableName": table, **codec.precheck_update(tenant, expression, condition, values)}}
