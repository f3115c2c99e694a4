"""Target 9: throughput limits on AWS, on paper (the model docs/scaling.md explains), backed by the counter
simulation. Every input is a named assumption; `python -m dfdlocal.bench --only 9` prints them."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any

from dfdlocal.bench.counters_sim import TICK_SECONDS, Simulation
from dfdlocal.bench.harness import Row

TARGET = 5000.0  # ingests/s


@dataclass(frozen=True)
class Deployment:
    """The template's defaults, and what AWS gives (documented quotas) or what we assume (marked)."""

    counter_shards: int = 16  # CounterShards
    ingest_concurrency: int = 50  # IngestMaxConcurrency (SQS event source ScalingConfig.MaximumConcurrency)
    batch_size: int = 10  # SQS BatchSize
    record_seconds: float = (
        0.045  # ASSUMED: one small-object ingest on AWS (HEAD/GET 15 + BatchGet 6 + Transact 12 + Delete 15 x 30%)
    )
    conflict_window: float = TICK_SECONDS  # ASSUMED: d, the time two transactions on one item count as concurrent
    max_conflict: float = 0.25  # our bar for "sustainable": at most 1 attempt in 4 cancelled (≈0.33 retries/commit)
    item_wcu: float = 1000.0  # DynamoDB: per partition (and so per item) write capacity per second
    tx_cost: float = 2.0  # DynamoDB: a transactional write costs 2 WCU per KB
    prefix_writes: float = 3500.0  # S3: PUT/COPY/POST/DELETE per second per partitioned prefix (before S3 splits it)
    prefix_reads: float = 5500.0  # S3: GET/HEAD per second per partitioned prefix
    duplicate_share: float = 0.3

    def limits(self) -> dict[str, float]:
        """Ingests per second each part of the system sustains."""
        shards_at_bar = -math.log(1 - self.max_conflict) / self.conflict_window  # λ per item with p = max_conflict
        return {
            "Lambda concurrency x records/s per instance": self.ingest_concurrency / self.record_seconds,
            f"counter contention (p ≤ {self.max_conflict:.0%} per attempt, d = {self.conflict_window * 1000:g} ms)": (
                self.counter_shards * shards_at_bar
            ),
            "counter items' write capacity (1,000 WCU/s per item, 2 WCU per transactional write)": (
                self.counter_shards * self.item_wcu / self.tx_cost
            ),
        }

    def ramp(self) -> dict[str, float]:
        """Limits until S3 splits the uploads/ prefix (it does on its own under sustained load, keys being
        uploads/<random hex>; meanwhile it answers 503 SlowDown, which the SDK retries)."""
        return {
            "S3 writes on one unsplit prefix (PUT + DeleteObject of duplicates)": (
                self.prefix_writes / (1 + self.duplicate_share)
            ),
            "S3 reads on one unsplit prefix (one HEAD or GET per ingest)": self.prefix_reads,
        }

    def sustainable(self) -> tuple[float, str]:
        limits = self.limits()
        binding = min(limits, key=limits.__getitem__)
        return limits[binding], binding


def needed() -> Deployment:
    """The smallest change of the defaults that reaches TARGET with the same assumptions."""
    base = Deployment()
    per_item = -math.log(1 - base.max_conflict) / base.conflict_window
    shards = min(100, math.ceil(1.1 * TARGET / per_item / 4) * 4)  # 10% headroom
    concurrency = math.ceil(TARGET * base.record_seconds / 50) * 50
    return Deployment(counter_shards=shards, ingest_concurrency=concurrency)


def conflict_table(
    rates: tuple[float, ...] = (1000, 2000, 5000), shards: tuple[int, ...] = (1, 16, 64, 100)
) -> list[dict[str, Any]]:
    d = Deployment().conflict_window
    table = []
    for rate in rates:
        for count in shards:
            p = 1 - math.exp(-rate / count * d)
            table.append(
                {
                    "ingests_per_s": rate,
                    "shards": count,
                    "p_conflict": p,
                    "attempts": 1 / (1 - p) if p < 1 else math.inf,
                }
            )
    return table


def scaling(quick: bool) -> list[Row]:
    per = 8 if quick else 16
    runs = {shards: Simulation(shards=shards, ingesters=32, objects_per_ingester=per).run() for shards in (1, 16)}
    single, sharded = runs[1], runs[16]
    default = Deployment()
    value, binding = default.sustainable()
    fixed = needed()
    fixed_value, fixed_binding = fixed.sustainable()
    return [
        Row(
            "9",
            "counter simulation: commits per conflict window, 16 shards",
            sharded.commits_per_tick,
            "tx/tick",
            single.commits_per_tick,
            "one counter item",
            sharded.commits_per_tick / single.commits_per_tick,
            "exact totals, bounded retries",
            sharded.exact and single.exact and sharded.failed_deliveries == 0,
            f"retries/commit {sharded.retries_per_commit:.2f} vs {single.retries_per_commit:.2f}; max attempts "
            f"{sharded.max_attempts} vs {single.max_attempts}; totals exact: {sharded.exact and single.exact}",
            {"sharded": sharded.to_json(), "single": single.to_json()},
        ),
        Row(
            "9",
            "sustainable ingests/s on AWS, template defaults (model)",
            value,
            "ingests/s",
            goal=f"≥ {TARGET:,.0f}",
            met=value >= TARGET,
            note=f"bound by {binding}",
            details={
                "limits": default.limits(),
                "ramp": default.ramp(),
                "deployment": asdict(default),
                "conflicts": conflict_table(),
            },
        ),
        Row(
            "9",
            f"same, CounterShards={fixed.counter_shards}, IngestMaxConcurrency={fixed.ingest_concurrency} (model)",
            fixed_value,
            "ingests/s",
            goal=f"≥ {TARGET:,.0f}",
            met=fixed_value >= TARGET,
            note=f"bound by {fixed_binding}",
            details={"limits": fixed.limits(), "deployment": asdict(fixed)},
        ),
    ]
