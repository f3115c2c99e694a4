"""Usage shards: their ids, where writes go, and the sum (dfd.usage)."""

from __future__ import annotations

import random

import pytest

from dfd.adapters.dynamo import codec
from dfd.config import Settings
from dfd.records import TenantUsage
from dfd.usage import USAGE_SHARDS, every_shard, gate, limited, total, write_shard

BASE = {
    "files_table": "f", "counters_table": "c", "uploads_table": "u", "events_table": "e",
    "tenant_files_table": "t", "bucket": "b",
}  # fmt: skip


def test_ids_round_trip_and_the_gate_is_the_plain_usage_item() -> None:
    assert codec.usage_key(gate("acme")) == {"counter_id": "usage#acme"}
    keys = [codec.usage_key(shard) for shard in every_shard("user:abc-1")]
    assert len({key["counter_id"] for key in keys}) == USAGE_SHARDS
    assert keys[7] == {"counter_id": "usage#user:abc-1#007"}
    assert [codec.usage_shard(key) for key in keys] == every_shard("user:abc-1")


@pytest.mark.parametrize(
    "other", ["shard#003", "audit#x", "usage#", "usage#acme#x", "usage#acme#000", "usage#a#7", "usage#a#200"]
)
def test_other_counter_items_are_no_usage_shard(other: str) -> None:
    assert codec.usage_shard({"counter_id": other}) is None


def test_writes_spread_without_a_limit_and_go_to_the_gate_with_one() -> None:
    rng = random.Random(1)
    free = Settings(**BASE)
    assert not limited(free)
    assert len({write_shard("acme", free, rng).index for _ in range(400)}) > USAGE_SHARDS // 2
    for capped in (Settings(**BASE, tenant_quota_bytes=10), Settings(**BASE, tenant_pending_limit=2)):
        assert limited(capped)
        assert {write_shard("acme", capped, rng) for _ in range(50)} == {gate("acme")}


def test_total_sums_every_field_and_reads_absent_items_as_zero() -> None:
    items = [{"pending_count": 1, "pending_bytes": 5, "used_bytes": 5}, None, {"stored_bytes": 7, "used_bytes": 7}]
    usages = [codec.tenant_usage(item) for item in items]
    assert total(usages) == TenantUsage(pending_count=1, pending_bytes=5, stored_bytes=7, used_bytes=12)
