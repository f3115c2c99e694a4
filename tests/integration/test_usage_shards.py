"""A tenant's usage is spread over usage shards when no limit is set (no hot item for a tenant that uploads at
full speed), summed by GET /me and the audit; once a limit is set, registrations are checked on the gate against
the limit less what the other shards hold, so usage written before still counts, exactly."""

from __future__ import annotations

from typing import Any

import pytest

from dfd import deps
from dfd.adapters.dynamo import codec
from dfd.core import codec as core_codec
from dfd.handlers import me, upload
from tests.integration.conftest import Aws
from tests.support import ALICE, api_event, call


def post(size: int) -> tuple[int, dict[str, Any]]:
    return call(upload.handler, api_event("POST", "/upload", body={"filename": "s.bin", "size": size}, user=ALICE))


def me_usage() -> dict[str, int]:
    status, answer = call(me.handler, api_event("GET", "/me", user=ALICE))
    assert status == 200, answer
    return dict(answer["usage"])


def usage_items(aws: Aws) -> dict[str, dict[str, Any]]:
    """acme's usage shards, by sort key: the items of its collection in the tenant view's table that are no
    reference."""
    query = {"KeyConditionExpression": "tenant = :t", "ExpressionAttributeValues": {":t": {"S": "acme"}}}
    items = aws.ddb.query(TableName=aws.settings.tenant_files_table, **query)["Items"]
    return {item["hash"]["S"]: item for item in items if core_codec.is_usage(codec.from_item(item))}


def test_unlimited_usage_spreads_over_shards_and_a_later_limit_counts_all_of_it(
    aws: Aws, monkeypatch: pytest.MonkeyPatch
) -> None:
    for _ in range(12):
        assert post(100)[0] == 201
    shards = usage_items(aws)
    assert len(shards) > 1  # 12 writes on 100 shards: all on one has a chance of 1e-22
    assert all(core_codec.usage_shard({"tenant": "acme", "hash": sort}) for sort in shards)
    assert me_usage() == {"pending_count": 12, "pending_bytes": 1200, "stored_bytes": 0, "used_bytes": 1200}
    aws.assert_invariants()  # the audit sums the shards per tenant

    monkeypatch.setenv("TENANT_QUOTA_BYTES", "1500")
    monkeypatch.setenv("TENANT_PENDING_LIMIT", "14")
    deps.reset()
    assert post(300)[0] == 201  # 1,500: exactly the limit
    status, refused = post(1)
    assert status == 403
    assert refused["error"]["details"] == {"limit": 1500, "usage": 1500, "kind": "bytes"}
    assert usage_items(aws).keys() == shards.keys() | {"u#000"}  # with a limit: the gate only

    monkeypatch.setenv("TENANT_QUOTA_BYTES", "0")
    deps.reset()
    assert post(1)[0] == 201  # 14 pending now: the pending limit, counted over every shard
    status, refused = post(1)
    assert status == 403 and refused["error"]["details"] == {"limit": 14, "usage": 14, "kind": "pending"}
    assert me_usage() == {"pending_count": 14, "pending_bytes": 1501, "stored_bytes": 0, "used_bytes": 1501}
    aws.assert_invariants()
