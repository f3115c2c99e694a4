"""``bench/run`` — dfd's benchmark suite: every target of docs/performance.md as rows of one table, each
figure next to a baseline measured in the same run (absolute times on a shared machine are not comparable
across runs; ratios are).

  bench/run                           all rows (a few minutes on 2 cores)
  bench/run --only 1,3,5 --quick      some rows, fewer repetitions
  bench/run --json out.json --markdown table.md --svg docs/throughput.svg
  bench/run --only 7 --update docs/bench.json   the rows of target 7 replaced in the published run, the others kept

Rows: 1 streaming hash throughput · 2 flat memory · 3 verified-checksum fast path · 4 parallel ranged reads
behind a bandwidth-capped link · 5 AWS calls and DynamoDB capacity per ingest · 6 stats/hashes cost · 7 cold
start per function · 8 end to end on the local stack vs in-process · 9 scaling model + counter simulation ·
10 multipart upload, parts in parallel vs one PUT (capped link) · 11 resume after an interruption at ~50 % ·
12 flat memory ingesting a multipart object · 13 a Git LFS push of N objects of which the tenant holds K, requests
and bytes against a plain LFS store · 16 the cost of one reconcile sweep per million contents · 17 each path's
dollars per million, every billed request counted · 18 the AWS CLI with prefix credentials (`aws s3 cp` of 1 GiB,
`aws s3 sync` of 1,000 small files) against scripts/upload, start to all stored · 19 segmented hashing against the
inline path on the same object, and the segment path's requests and dollars for 1 TiB and 48.8 TiB.
Nothing here is a timed assertion: the exit status is 0 unless a row could not run.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

from dfdbench import report
from dfdbench.harness import Bench, Options, Row

# run order: row 6 fills a table (moto slows with size); 8, 10, 11, 14 and 18 start their own local stack
# row 8: the files a stack holds for its second run (written as items), and its fixed baseline: the stack on moto's
# DynamoDB with a 1 s batching window (docs/performance.md, target 8)
SEEDED_FILES = 50_000
BEFORE_DDB_LOCAL = 2.5  # uploads/s
ALL = ("9", "5", "17", "3", "1", "4", "2", "12", "19", "6", "7", "8", "10", "11", "13", "14", "15", "16", "18")
NAMES = {
    "1": "streaming hash throughput",
    "2": "flat memory",
    "3": "verified-checksum fast path",
    "4": "parallel ranged reads (capped link)",
    "5": "AWS calls and capacity per ingest",
    "6": "stats and hashes cost",
    "7": "cold start",
    "8": "end to end, local stack vs in-process",
    "9": "scaling model and counter simulation",
    "10": "multipart upload, 4 parts in flight vs one PUT (capped link)",
    "11": "multipart resume after an interruption at ~50 %",
    "12": "flat memory, multipart object ingest",
    "13": "upload page (Uppy + @dfd/uppy): drop to stored vs the raw transfer",
    "14": "Git LFS push of N objects, K held by the tenant, vs a plain LFS store",
    "15": "events out: publisher events/s per shard, commit-to-event latency",
    "16": "reconcile: one daily sweep's cost per 1 M contents (transitions, GB-s, AWS calls) vs the ASL-only run",
    "17": "cost: dollars per million of each path, every billed request counted (prices-2026-11.json)",
    "18": "S3 tools: aws s3 cp of 1 GiB and aws s3 sync of 1,000 files vs scripts/upload, start to all stored",
    "19": "segmented hashing vs inline (same object, same run); the segment path's cost for 1 TiB and 48.8 TiB",
}


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="bench/run", description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", default=",".join(sorted(ALL)), help="comma-separated rows (1-19)")
    parser.add_argument("--quick", action="store_true", help="fewer sizes and repetitions")
    parser.add_argument("--json", type=Path, help="write the rows (and the plot's points) as JSON")
    parser.add_argument(
        "--update", type=Path, help="replace the rows of the targets run (and their plot points) in this JSON file"
    )
    parser.add_argument("--markdown", type=Path, help="write the table as Markdown")
    parser.add_argument("--svg", type=Path, help="write the throughput-vs-size plot (rows 1 and 4)")
    parser.add_argument("--uploads", type=int, default=300, help="row 8: uploads (default 300)")
    parser.add_argument("--clients", type=int, default=8, help="row 8: concurrent clients on the stack")
    parser.add_argument(
        "--bandwidth", type=float, default=40e6, help="rows 2, 4, 10-12: bytes/s per capped connection (default 40e6)"
    )
    parser.add_argument("--latency-ms", type=float, default=0.0, help="row 4/2: added per request on the capped link")
    parser.add_argument("--cold-runs", type=int, default=5, help="row 7: fresh interpreters per function")
    parser.add_argument("--list", action="store_true", help="list the rows and exit")
    parser.add_argument("-v", "--verbose", action="store_true")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.list:
        for key in sorted(NAMES, key=int):
            print(f"{key}  {NAMES[key]}")
        return 0
    wanted = {part.strip() for part in args.only.split(",") if part.strip()}
    unknown = wanted - set(ALL)
    if unknown:
        print(f"bench/run: unknown rows {sorted(unknown)} (1-19)", file=sys.stderr)
        return 2
    options = Options(
        quick=args.quick,
        uploads=args.uploads,
        bandwidth=args.bandwidth,
        latency_ms=args.latency_ms,
        cold_runs=args.cold_runs,
        verbose=args.verbose,
    )
    rows: list[Row] = []
    points: list[dict[str, Any]] = []
    failures = 0
    started = time.perf_counter()
    bench: Bench | None = None
    proxy: Any = None
    try:
        for target in [t for t in ALL if t in wanted]:
            print(f"[{time.perf_counter() - started:6.1f}s] row {target}: {NAMES[target]} …", flush=True)
            try:
                if target in ("9", "8", "10", "11", "13", "14", "15", "16", "18"):
                    produced = _standalone(target, options, args.clients)
                else:
                    if bench is None:
                        bench = Bench(options)
                    if target in ("2", "4", "12") and proxy is None:
                        from dfdbench.proxy import ThrottlingProxy

                        proxy = ThrottlingProxy(bench.emulator.port, options.bandwidth, options.latency_ms)
                    produced = _with_bench(target, bench, proxy, points)
            except Exception as error:  # a row that cannot run is reported, the others still run
                failures += 1
                traceback.print_exc()
                produced = [
                    Row(target, f"{NAMES[target]}: did not run", None, "", note=f"{type(error).__name__}: {error}")
                ]
            rows.extend(produced)
            for row in produced:
                print("   " + report.table([row]).splitlines()[-1], flush=True)
    finally:
        if proxy is not None:
            proxy.stop()
        if bench is not None:
            bench.close()
    rows.sort(key=lambda row: report.order(row.target))
    elapsed = time.perf_counter() - started
    text = report.table(rows)
    print()
    print(text)
    print(f"\n{len(rows)} rows in {elapsed:.0f} s; {sum(r.met is True for r in rows)} met, "
          f"{sum(r.met is False for r in rows)} missed")  # fmt: skip
    if args.markdown:
        args.markdown.write_text(text + "\n")
    if args.svg and points and not args.update:
        args.svg.write_text(report.svg(points))
    if args.json:
        document = {
            "machine": report.machine(),
            "options": vars(options),
            "seconds": elapsed,
            "rows": [row.to_json() for row in rows],
            "throughput_points": points,
        }
        args.json.write_text(json.dumps(document, indent=2, default=str) + "\n")
    if args.update:
        run = {
            "only": sorted(wanted, key=int),
            "seconds": elapsed,
            "machine": report.machine(),
            "options": vars(options),
        }
        published = json.loads(args.update.read_text(encoding="utf-8"))
        updated = report.merge(published, [row.to_json() for row in rows], points, run)
        args.update.write_text(json.dumps(updated, indent=2, default=str) + "\n")
    if args.svg and args.update and points:
        args.svg.write_text(report.svg(updated["throughput_points"]))
    return 1 if failures else 0


def _with_bench(target: str, bench: Bench, proxy: Any, points: list[dict[str, Any]]) -> list[Row]:
    from dfdbench import rows_api, rows_cold, rows_cost, rows_io, rows_multipart, rows_segments

    ceiling = getattr(bench, "_ceiling", None)
    if ceiling is None and target in ("1", "4"):
        ceiling = bench._ceiling = rows_io.hash_ceiling()  # type: ignore[attr-defined]
    handlers: dict[str, Callable[[], list[Row]]] = {
        "1": lambda: _collect(rows_io.streaming(bench, ceiling or 0.0), points),
        "2": lambda: rows_io.memory(bench, proxy),
        "3": lambda: rows_io.fast_path(bench),
        "4": lambda: rows_io.parallel(bench, proxy, ceiling or 0.0, points),
        "5": lambda: rows_api.calls(bench),
        "6": lambda: rows_api.stats(bench),
        "7": lambda: rows_cold.cold_start(bench),
        "12": lambda: rows_multipart.multipart_memory(bench, proxy),
        "17": lambda: rows_cost.rows(bench),
        "19": lambda: rows_segments.rows(bench),
    }
    return handlers[target]()


def _collect(rows: list[Row], points: list[dict[str, Any]]) -> list[Row]:
    for row in rows:
        points.extend(row.details.pop("sweep", []))
    return rows


def _standalone(target: str, options: Options, clients: int) -> list[Row]:
    if target == "9":
        from dfdbench.scaling import scaling

        return scaling(options.quick)
    if target == "13":
        from dfdbench import uppy_bench

        return uppy_bench.row(options)
    if target == "15":
        return _events_rows(options)
    if target == "16":
        from dfdbench import rows_reconcile

        return rows_reconcile.rows(options)
    if target == "14":
        from dfdbench.rows_lfs import lfs_push

        return lfs_push(options)
    if target == "18":
        from dfdbench.rows_s3tools import s3_tools

        return s3_tools(options)
    if target in ("10", "11"):
        from dfdbench import rows_multipart

        return rows_multipart.parallel_upload(options) if target == "10" else rows_multipart.resume_upload(options)
    uploads = options.uploads if not options.quick else min(options.uploads, 100)
    seed = SEEDED_FILES if not options.quick else SEEDED_FILES // 10
    results = {}
    for name, mode, extra in (
        ("stack", "stack", []),
        ("stack_seeded", "stack", ["--seed", str(seed)]),
        ("inprocess", "inprocess", []),
    ):
        done = subprocess.run(
            [
                sys.executable,
                "-m",
                "dfdbench.e2e",
                "--mode",
                mode,
                "--uploads",
                str(uploads),
                "--clients",
                str(clients),
                *extra,
            ],
            capture_output=True,
            text=True,
            timeout=1800,
            check=False,
        )
        if done.returncode != 0:
            raise RuntimeError(f"e2e {name} failed: {done.stderr[-3000:]}")
        # its summary: the last line that is one (a function's metrics line may come after it)
        results[name] = next(json.loads(line) for line in reversed(done.stdout.splitlines()) if '"mode"' in line)
    stack, seeded, inproc = results["stack"], results["stack_seeded"], results["inprocess"]
    workload = f"{uploads} uploads, 30% duplicates, {stack['bytes'] / 1e6:.0f} MB"
    flat = stack["uploads_per_s"] / seeded["uploads_per_s"]
    return [
        Row(
            "8",
            f"end to end on the local stack ({workload}, {clients} clients)",
            stack["uploads_per_s"],
            "uploads/s",
            BEFORE_DDB_LOCAL,
            "the figure on moto's DynamoDB (batching window 1 s): fixed, not measured in this run",
            stack["uploads_per_s"] / BEFORE_DDB_LOCAL,
            "≥ 5x",
            stack["uploads_per_s"] >= 5 * BEFORE_DDB_LOCAL,
            f"PUT→final p50 {stack['p50_ms']:.0f} ms, p95 {stack['p95_ms']:.0f} ms; state in a data directory "
            f"({'tmpfs' if stack.get('tmpfs') else 'disk'}), as make run; handlers in-process, sequential "
            f"(moto): {inproc['uploads_per_s']:.1f} uploads/s, p50 {inproc['p50_ms']:.0f} ms; outcomes "
            f"{stack['outcomes']}",
            results,
        ),
        Row(
            "8",
            f"end to end on a stack holding {seed:,} files vs an empty one ({workload}, {clients} clients)",
            seeded["uploads_per_s"],
            "uploads/s",
            stack["uploads_per_s"],
            "the same run on an empty stack",
            flat,
            "≤ 1.3x slower",
            flat <= 1.3,
            f"seeded as items in {seeded['seed_seconds']:.0f} s; p50 {seeded['p50_ms']:.0f} ms vs "
            f"{stack['p50_ms']:.0f} ms",
            {},
        ),
    ]


def _events_rows(options: Options) -> list[Row]:
    count = 300 if options.quick else 1000
    done = subprocess.run(
        [sys.executable, "-m", "dfdbench.rows_events", str(count)],
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )
    if done.returncode != 0:
        raise RuntimeError(f"rows_events failed: {done.stderr[-3000:]}")
    found = json.loads(done.stdout.strip().splitlines()[-1])
    publisher, raw = found["publisher_events_per_s"], found["raw_put_events_per_s"]
    latency, round_trip = found["latency_p50_ms"], found["sqs_round_trip_p50_ms"]
    return [
        Row(
            "15",
            f"publisher, one stream shard ({found['events']} outcomes, batches of 100, on moto)",
            publisher,
            "events/s",
            raw,
            "bare PutEvents loop, 10 entries a call",
            publisher / raw,
            "report",
            None,
            "both bound by moto's PutEvents; the ratio is the publisher's own cost (decode, derive, report)",
            found,
        ),
        Row(
            "15",
            "commit -> event on the local dfd-events queue, p50",
            latency,
            "ms",
            round_trip,
            "SQS send -> receive round trip",
            latency / round_trip,
            "report",
            None,
            f"p95 {found['latency_p95_ms']:.0f} ms; the mapping reads an idle shard every 100 ms (Lambda: 250 ms)",
            found,
        ),
    ]


if __name__ == "__main__":
    sys.exit(main())
