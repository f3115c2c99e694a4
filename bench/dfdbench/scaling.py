"""Target 9: throughput limits on AWS, on paper (the model docs/scaling.md explains), backed by the counter
simulation. The deployment's numbers are read from template.yaml's defaults and the ingest handler; every
other input is a documented AWS quota, a measurement, or a named assumption. `bench/run --only 9`."""

from __future__ import annotations

import ast
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

from dfd.core import usage
from dfdbench.counters_sim import REGISTER_ATTEMPTS, TICK_SECONDS, Simulation
from dfdbench.harness import Row
from dfdlocal.template import load_template

TARGET = 5000.0  # ingests/s
REGISTER_TARGET = 1000.0  # POST /upload/s of the same tenant meanwhile
ROOT = Path(__file__).resolve().parents[2]


def template_defaults() -> dict[str, int]:
    """What a deployment with the template's defaults runs with."""
    template = load_template(ROOT / "template.yaml")
    parameters = template["Parameters"]
    (event,) = template["Resources"]["IngestFunction"]["Properties"]["Events"].values()
    return {
        "counter_shards": int(parameters["CounterShards"]["Default"]),
        "ingest_concurrency": int(parameters["IngestMaxConcurrency"]["Default"]),
        "batch_size": int(event["Properties"].get("BatchSize", 10)),
        "record_workers": _constant(ROOT / "functions" / "dfd" / "handlers" / "ingest.py", "RECORD_WORKERS"),
    }


def _constant(path: Path, name: str) -> int:
    """A module-level integer constant, read without importing the module (a handler's import is its init)."""
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == name for t in node.targets):
            return int(ast.literal_eval(node.value))
    raise LookupError(f"{name} not found in {path}")


@dataclass(frozen=True)
class Deployment:
    """One configuration, what AWS gives (documented quotas) and what we assume (marked)."""

    counter_shards: int  # CounterShards
    ingest_concurrency: int  # IngestMaxConcurrency (SQS event source ScalingConfig.MaximumConcurrency)
    batch_size: int  # SQS BatchSize
    record_workers: int  # records of a batch in flight at once in one invocation (1 = one after another)
    # ASSUMED: one small-object ingest on AWS (HEAD/GET 15 + BatchGet 6 + Transact 12 + Delete 15 x 30% ms)
    record_seconds: float = 0.045
    # ASSUMED: records run concurrently, a batch lasts as long as its slowest record: ~2x the typical one
    batch_tail: float = 2.0
    # MEASURED here 6-7.6 ms of CPU per small-object record through the handler (botocore serializing, signing
    # and parsing ~3.6 calls, logging, metrics) on one x86 core; ASSUMED x1.5 on Lambda's arm64 vCPU
    record_cpu_seconds: float = 0.009
    conflict_window: float = TICK_SECONDS  # ASSUMED: d, how long a transaction holds the counter item it writes
    max_conflict: float = 0.25  # our bar for "sustainable": at most 1 attempt in 4 cancelled (0.33 retries/commit)
    item_wcu: float = 1000.0  # DynamoDB: per partition (an item, once split for heat) write units per second
    tx_cost: float = 2.0  # DynamoDB: a transactional write costs 2 write units per KB
    table_wru: float = 40000.0  # DynamoDB: default per-table on-demand throughput quota (write request units/s)
    # writes one upload makes to its busiest table: Uploads (POST /upload's put and the ingest's update of the one
    # item carrying the upload, its event and its key's claim); an object put straight into the bucket: IngestEvents
    # (its event and its key's claim)
    busiest_table_items: int = 2
    new_table_wru: float = 4000.0  # DynamoDB: what a new on-demand table sustains at once
    prefix_writes: float = 3500.0  # S3: PUT/COPY/POST/DELETE per second per partitioned prefix (before S3 splits it)
    prefix_reads: float = 5500.0  # S3: GET/HEAD per second per partitioned prefix
    duplicate_share: float = 0.3

    def per_instance(self) -> float:
        """Records per second one IngestFunction instance moves: I/O-bound (records in flight / batch time) or
        CPU-bound (one vCPU at 1769 MB; botocore's work runs under the GIL), whichever is lower."""
        in_flight = max(1, min(self.record_workers, self.batch_size))
        io = 1 / self.record_seconds if in_flight == 1 else in_flight / (self.record_seconds * self.batch_tail)
        return min(io, 1 / self.record_cpu_seconds)

    def limits(self) -> dict[str, float]:
        """Ingests per second each part of the system sustains."""
        d = self.conflict_window * 1000
        return {
            f"Lambda: {self.ingest_concurrency} instances x {self.per_instance():.0f} records/s each": (
                self.ingest_concurrency * self.per_instance()
            ),
            f"counter contention: {self.counter_shards} shards x p/d (p ≤ {self.max_conflict:.0%}, d = {d:g} ms)": (
                self.counter_shards * self.max_conflict / self.conflict_window
            ),
            "counter items' write capacity (1,000 WCU/s per item, 2 per transactional write)": (
                self.counter_shards * self.item_wcu / self.tx_cost
            ),
            "Uploads' default on-demand quota (40,000 WRU/s; registration + ingest: 4 WRU per upload)": (
                self.table_wru / (self.tx_cost * self.busiest_table_items)
            ),
        }

    def ramp(self) -> dict[str, float]:
        """Limits until S3 splits the uploads/ prefix and DynamoDB's new tables have scaled out (both happen on
        their own under sustained load; meanwhile S3 answers 503 SlowDown and DynamoDB throttles, both retried)."""
        return {
            "S3 writes on one unsplit prefix (PUT + DeleteObject of duplicates)": (
                self.prefix_writes / (1 + self.duplicate_share)
            ),
            "S3 reads on one unsplit prefix (one HEAD or GET per ingest)": self.prefix_reads,
            "a new on-demand Uploads table (4,000 WRU/s at once, then 2x the previous peak per 30 min)": (
                self.new_table_wru / (self.tx_cost * self.busiest_table_items)
            ),
        }

    def sustainable(self) -> tuple[float, str]:
        limits = self.limits()
        binding = min(limits, key=limits.__getitem__)
        return limits[binding], binding


def defaults() -> Deployment:
    return Deployment(**template_defaults())


PREVIOUS = {"counter_shards": 16, "ingest_concurrency": 50, "batch_size": 10, "record_workers": 1}


def conflict_table(
    rates: tuple[float, ...] = (1000, 2000, 5000), shards: tuple[int, ...] = (1, 16, 64, 100)
) -> list[dict[str, Any]]:
    """p per attempt = the share of time a shard is held = (commits/s per shard) x d; attempts = 1/(1-p).
    p ≥ 1: the shards cannot carry the rate at all (one commit per d each), whatever the retries."""
    d = TICK_SECONDS
    table = []
    for rate in rates:
        for count in shards:
            p = rate / count * d
            table.append(
                {
                    "ingests_per_s": rate,
                    "shards": count,
                    "p_conflict": round(min(p, 1.0), 4),
                    "attempts": round(1 / (1 - p), 3) if p < 1 else None,
                    "saturated": p >= 1,
                }
            )
    return table


def scaling(quick: bool) -> list[Row]:
    per = 8 if quick else 16
    runs = {shards: Simulation(shards=shards, ingesters=32, objects_per_ingester=per).run() for shards in (1, 16)}
    single, sharded = runs[1], runs[16]
    default = defaults()
    # the default shards under a little over 5,000 ingests/s: 300 ingesters (reads of 4-12 ticks) offer ~27 commits
    # per tick (5 ms)
    at_target = Simulation(shards=default.counter_shards, ingesters=300, objects_per_ingester=8 if quick else 16).run()
    # one tenant at full speed: every ingest is that tenant's upload (its usage moves in the commit) and 64 clients
    # register its new uploads meanwhile (POST /upload's transaction), with no limit set (the template's default:
    # usage spread over its shards); beside it, the same tenant with a limit set (every usage write on one item)
    tenant = Simulation(
        shards=default.counter_shards, ingesters=370, objects_per_ingester=4 if quick else 8,
        tenant="acme", registrars=64, registrations_per_registrar=8 if quick else 16,
    ).run()  # fmt: skip
    gate = Simulation(
        shards=default.counter_shards, ingesters=32, objects_per_ingester=4 if quick else 8,
        tenant="acme", registrars=8, registrations_per_registrar=4 if quick else 8, limited=True,
    ).run()  # fmt: skip
    value, binding = default.sustainable()
    previous = replace(default, **PREVIOUS)
    previous_value, previous_binding = previous.sustainable()
    tick_rate = 1 / TICK_SECONDS
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
            f"counter simulation at ~{TARGET:,.0f} ingests/s, {default.counter_shards} shards (template default)",
            at_target.steady_commits_per_tick * tick_rate,
            "ingests/s",
            goal=f"≥ {TARGET:,.0f}, exact, bounded retries",
            met=(
                at_target.steady_commits_per_tick * tick_rate >= TARGET
                and at_target.exact
                and at_target.failed_deliveries == 0
            ),
            note=f"{at_target.steady_commits_per_tick:.1f} commits per {TICK_SECONDS * 1000:g} ms tick; "
            f"{at_target.conflict_share:.0%} of attempts cancelled; max attempts {at_target.max_attempts}; "
            f"totals exact: {at_target.exact}",
            details={"simulation": at_target.to_json()},
        ),
        Row(
            "9",
            f"one tenant at ~{TARGET:,.0f} ingests/s + ~{REGISTER_TARGET:,.0f} POST /upload/s, template defaults "
            f"({usage.USAGE_SHARDS} usage shards)",
            tenant.steady_commits_per_tick * tick_rate,
            "ingests/s",
            gate.steady_commits_per_tick * tick_rate,
            "the same tenant on one usage item (a limit set)",
            tenant.steady_commits_per_tick / max(gate.steady_commits_per_tick, 1e-9),
            f"≥ {TARGET:,.0f} ingests/s and ≥ {REGISTER_TARGET:,.0f} uploads/s, exact, bounded retries",
            (
                tenant.steady_commits_per_tick * tick_rate >= TARGET
                and tenant.steady_registrations_per_tick * tick_rate >= REGISTER_TARGET
                and tenant.exact
                and tenant.failed_deliveries == 0
                and tenant.failed_registrations == 0
            ),
            f"{tenant.steady_registrations_per_tick * tick_rate:,.0f} POST /upload/s; "
            f"{tenant.conflict_share:.0%} of ingest attempts cancelled; max attempts {tenant.max_attempts} "
            f"(ingest), {tenant.max_register_attempts} (upload); totals and usage exact: {tenant.exact}; "
            f"one item: {gate.steady_registrations_per_tick * tick_rate:,.0f} POST /upload/s, "
            f"{gate.conflict_share:.0%} cancelled, {gate.failed_registrations} uploads refused after "
            f"{REGISTER_ATTEMPTS} attempts",
            {"tenant": tenant.to_json(), "one_usage_item": gate.to_json()},
        ),
        Row(
            "9",
            "sustainable ingests/s on AWS, template defaults (model)",
            value,
            "ingests/s",
            goal=f"≥ {TARGET:,.0f}",
            met=round(value, 6) >= TARGET,
            note=f"CounterShards={default.counter_shards}, IngestMaxConcurrency={default.ingest_concurrency}, "
            f"{default.record_workers} records in flight per instance; bound by {binding}",
            details={
                "limits": default.limits(),
                "ramp": default.ramp(),
                "deployment": asdict(default),
                "conflicts": conflict_table(),
            },
        ),
        Row(
            "9",
            "for comparison: 16 shards, 50 instances, records one after another (model)",
            previous_value,
            "ingests/s",
            goal="info",
            met=None,
            note=f"bound by {previous_binding}",
            details={"limits": previous.limits(), "deployment": asdict(previous)},
        ),
    ]
