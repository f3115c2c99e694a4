"""Sharded counters converge exactly under TransactionConflict cancellations; one counter item thrashes.

The simulation (dfdbench.counters_sim) drives the real Ingestor — its plan, its retry loop, its
jittered backoff — with fakes for S3 and DynamoDB on a clock of ticks (one tick = the window in which two
transactions on one item conflict). Assertions are on counts and retries, never on time.
"""

from __future__ import annotations

import pytest

from dfd.ingest.service import MAX_ATTEMPTS
from dfdbench.counters_sim import SimResult, Simulation


@pytest.fixture(scope="module")
def runs() -> dict[int, SimResult]:
    return {shards: Simulation(shards=shards, ingesters=32, objects_per_ingester=16).run() for shards in (1, 16)}


def test_sharded_counters_commit_within_bounded_retries_and_exact_totals(runs: dict[int, SimResult]) -> None:
    sharded = runs[16]
    assert sharded.committed == sharded.objects == 512
    assert sharded.exact, (sharded.totals, sharded.expected)
    assert sharded.failed_deliveries == 0
    assert sharded.max_attempts <= MAX_ATTEMPTS // 2
    assert sharded.retries_per_commit < 0.25


def test_one_counter_item_thrashes_but_never_miscounts(runs: dict[int, SimResult]) -> None:
    single, sharded = runs[1], runs[16]
    assert single.exact, (single.totals, single.expected)  # retries never double count
    assert single.conflicts > 5 * sharded.conflicts
    assert single.retries_per_commit > 0.5
    assert single.max_attempts >= MAX_ATTEMPTS - 1  # one conflict more and the delivery fails
    assert single.ticks > 4 * sharded.ticks  # one commit per tick at most: the load backs up


def test_the_simulation_is_deterministic() -> None:
    first = Simulation(shards=4, ingesters=8, objects_per_ingester=4, seed=3).run()
    second = Simulation(shards=4, ingesters=8, objects_per_ingester=4, seed=3).run()
    assert first.to_json() == second.to_json() and first.exact


def test_one_tenant_on_usage_shards_stays_exact_and_spreads_and_on_one_item_conflicts_more() -> None:
    # the tenant's usage moves in every ingest commit and every registration (the real register_upload)
    spread = Simulation(
        shards=16, ingesters=32, objects_per_ingester=4, tenant="acme", registrars=8, registrations_per_registrar=4
    ).run()
    assert spread.exact, (spread.totals, spread.expected)
    assert spread.registered == 32 and spread.failed_registrations == 0 and spread.failed_deliveries == 0
    assert spread.totals["usage_used_bytes"] == 32 * 1000 and spread.usage_items > 16
    gate = Simulation(
        shards=16, ingesters=32, objects_per_ingester=4, tenant="acme", registrars=8, registrations_per_registrar=4,
        limited=True,
    ).run()  # fmt: skip
    assert gate.exact, (gate.totals, gate.expected)  # a refused registration counts nothing
    assert gate.usage_items == 1
    assert gate.conflict_share > 2 * spread.conflict_share
