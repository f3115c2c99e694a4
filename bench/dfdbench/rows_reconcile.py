"""Row 16: the cost of one full reconcile run (a sweep) per million contents, next to the cost of the previous
definition (every rule in ASL, a Map iteration per object and per file record) — docs/performance.md, "Reconcile".

Runs in its own process (``python -m dfdbench.rows_reconcile N...``, one JSON line on stdout) on in-process moto
with the template's tables, bucket and queue: N healthy contents (a stored object, its file record, claim and event
record, counted on the shards) and the bucket's S3 Inventory report listing them (as S3 writes it daily: the
lost-copy check reads it instead of a HeadObject per content), then one sweep run of the real rules
(dfd.reconcile.service: every page of every phase, as ReconcileFunction runs them), measuring per size:
- pages (Lambda invocations) and their wall time, from which GB-seconds at the function's MemorySize;
- AWS calls by operation, and the DynamoDB capacity the emulator reports;
- state transitions: the definition's path per page (Route, the phase's task, Budget?), per run (Begin, Skipped?,
  Route, Finish) and per continuation (ContinueAsNew, Continued, Begin, Skipped?) — what Standard workflows bill.
The row fits each figure linearly in N (per-content slope + per-run constant), extrapolates to 1,000,000 contents
and prices it (PRICES below). The previous definition's figure is its path per content, read from its states (12
transitions: 5 per listed object, 7 per file record) plus its ListObjectsV2 per record and its per-file UpdateItem.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

MILLION = 1_000_000
MEMORY_GB = 512 / 1024  # ReconcileFunction's MemorySize
# us-east-1 list prices, from the bench's one dated price file (dfdbench.cost.PRICES): Step Functions Standard per
# transition; Lambda arm64 per GB-s and per request; S3 per request (GET/HEAD class, LIST/PUT/DELETE class);
# DynamoDB on-demand per read and write request unit; SQS per request
_PRICE_FILE = json.loads((Path(__file__).with_name("prices-2026-11.json")).read_text())
PRICES = {
    "transition": _PRICE_FILE["step_functions"]["standard_transition"],
    "gb_second": _PRICE_FILE["lambda"]["gb_second_arm64"],
    "invocation": _PRICE_FILE["lambda"]["request"],
    "s3_get": _PRICE_FILE["s3"]["tier2_request"],
    "s3_list": _PRICE_FILE["s3"]["tier1_request"],
    "rru": _PRICE_FILE["dynamodb"]["read_request_unit"],
    "wru": _PRICE_FILE["dynamodb"]["write_request_unit"],
    "sqs": _PRICE_FILE["sqs"]["request"],
    "inventory": _PRICE_FILE["s3"]["inventory_object_listed"],
}
S3_LIST_CLASS = {"ListObjectsV2", "DeleteObject", "PutObject", "AbortMultipartUpload"}
# the previous definition, per healthy content in a sweep (its states on the common path): the orphan Map's
# IsFolder, GetEvent, Ingested, LeftoverBytes, ObjectSkipped and the files Map's AddFile, FileMarked,
# FindStoredObject, StoredListed, FirstStored, StoredIsTheRecords, FileChecked; per page of 100 (listing or scan)
# 7 more; a continuation (4) every 600 items
OLD_PER_CONTENT = 12 + 2 * 7 / 100 + 2 * 4 / 600


def transitions(pages: int, budget: int) -> int:
    continuations = max(0, (pages - 1) // budget)
    return 4 + 3 * pages + 4 * continuations


def measure(count: int) -> dict[str, Any]:
    """Populate `count` contents, run one sweep: its pages, seconds, calls and capacity."""
    import boto3
    from moto import mock_aws

    from dfd import deps
    from dfd.adapters.dynamo import Repository, codec
    from dfd.adapters.queue import SqsIngestQueue
    from dfd.adapters.s3 import ObjectStore
    from dfd.core import clock
    from dfd.core.config import Settings
    from dfd.core.ids import event_key, upload_id_from_key, version_token
    from dfd.core.records import UploadStatus
    from dfd.ingest import codec as ingest_codec
    from dfd.ingest.ports import ObjectVersion
    from dfd.reconcile.service import DEFAULT_BUDGET, Reconciler
    from dfdbench.harness import CallCounter
    from dfdlocal.emulator import IN_PROCESS_ENDPOINT, create_resources
    from dfdlocal.template import TEMPLATE, read_model

    with mock_aws():
        model = read_model(TEMPLATE, IN_PROCESS_ENDPOINT)
        client: Any = boto3.client
        resources = create_resources(model, client, local_visibility_timeout=30)
        deps.reset()
        settings = Settings.from_env()
        ddb: Any = boto3.client("dynamodb")
        s3: Any = boto3.client("s3")
        sqs: Any = boto3.client("sqs")
        now = clock.now()
        stamp = clock.iso(now)
        items: dict[str, list[dict[str, Any]]] = {
            settings.files_table: [],
            settings.events_table: [],
            settings.uploads_table: [],
        }
        total = 0
        for i in range(count):
            data = b"content %d " % i * 8
            key = f"{settings.upload_prefix}{i:032x}"
            etag = s3.put_object(Bucket=settings.bucket, Key=key, Body=data)["ETag"]
            digest = hashlib.sha256(data).hexdigest()
            version = ObjectVersion(
                event_key(settings.bucket, key, version_token(None, etag)),
                settings.bucket,
                key,
                etag,
                len(data),
                digest,
                upload_id_from_key(settings.upload_prefix, key),
            )
            items[settings.files_table].append(
                ingest_codec.new_file_item(version, "f.bin", "text/plain", stamp, incarnation="seeded")
            )
            # as the ingest leaves an object at an upload key: its upload item carries its event and its key's claim
            stored = UploadStatus.STORED
            items[settings.uploads_table].append(
                ingest_codec.ingested_upload_item(version, stored, stamp, "f.bin", "text/plain")
            )
            total += len(data)
        for table, found in items.items():
            for start in range(0, len(found), 25):
                batch = [{"PutRequest": {"Item": codec.to_item(item)}} for item in found[start : start + 25]]
                ddb.batch_write_item(RequestItems={table: batch})
        ddb.update_item(
            TableName=settings.counters_table,
            Key={"counter_id": {"S": settings.shard_ids[0]}},
            UpdateExpression="ADD total_files :n, total_bytes_stored :b, total_uploads :n",
            ExpressionAttributeValues={":n": {"N": str(count)}, ":b": {"N": str(total)}},
        )
        settings = replace(settings, inventory_prefix=f"inventory/{settings.bucket}/uploads-daily/")
        write_inventory(s3, settings.bucket, settings.inventory_prefix, settings.upload_prefix)
        counter = CallCounter()
        for client in (ddb, s3, sqs):
            counter.attach(client)
        queue = SqsIngestQueue(sqs, resources.queues["IngestQueue"].url)
        reconciler = Reconciler(settings, Repository(ddb, settings), ObjectStore(s3), queue)
        pages, busy = 0, 0.0
        started = time.perf_counter()
        state = reconciler.begin({"sweep": True})
        while state["pos"]["phase"] != "done":
            page_started = time.perf_counter()
            state = reconciler.page(state["pos"]["phase"], state, lambda *_: None)
            busy += time.perf_counter() - page_started
            pages += 1
        summary = reconciler.finish(state)
        elapsed = time.perf_counter() - started
        assert summary["orphans"] == 0 and summary["drift"] == {"files": 0, "bytes": 0}, summary
        calls = dict(counter.calls)
        return {
            "contents": count,
            "pages": pages,
            "invocations": pages + 2,  # begin, the pages, finish
            "seconds": elapsed,
            "page_seconds": busy,
            "transitions": transitions(pages, DEFAULT_BUDGET),
            "calls": calls,
            "capacity": dict(counter.capacity),
            "item_calls": sum(n for k, n in calls.items() if k not in PER_PAGE_CALLS),
            "s3_get": sum(n for k, n in calls.items() if k.startswith("s3:") and k[3:] not in S3_LIST_CLASS),
            "rru": counter.capacity.get("BatchGetItem", 0.0),
            "sqs": sum(n for k, n in calls.items() if k.startswith("sqs:")),
            "shards": settings.pending_shards,
            "budget": DEFAULT_BUDGET,
        }


def write_inventory(s3: Any, bucket: str, prefix: str, listed_prefix: str) -> None:
    """The S3 Inventory report of `listed_prefix` as S3 writes it (a manifest and one gzipped CSV data file of
    Bucket, Key, Size, ETag), taken now."""
    import csv
    import gzip
    import io

    from dfd.core import clock

    rows = io.StringIO()
    writer = csv.writer(rows, quoting=csv.QUOTE_ALL)
    for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=listed_prefix):
        for obj in page.get("Contents", []):
            writer.writerow([bucket, obj["Key"], obj["Size"], obj["ETag"].strip('"')])
    created = clock.now()
    data_key = f"{prefix}data/{created.timestamp():.0f}.csv.gz"
    s3.put_object(Bucket=bucket, Key=data_key, Body=gzip.compress(rows.getvalue().encode()))
    manifest = {
        "sourceBucket": bucket,
        "creationTimestamp": str(int(created.timestamp() * 1000)),
        "fileFormat": "CSV",
        "fileSchema": "Bucket, Key, Size, ETag",
        "files": [{"key": data_key}],
    }
    folder = created.strftime("%Y-%m-%dT%H-%MZ")
    s3.put_object(Bucket=bucket, Key=f"{prefix}{folder}/manifest.json", Body=json.dumps(manifest).encode())


def cost(per_million: dict[str, float]) -> dict[str, float]:
    """Dollars of one run from its extrapolated figures (S3's: its requests and the inventory's listing)."""
    return {
        "step_functions": per_million["transitions"] * PRICES["transition"],
        "lambda": per_million["gb_seconds"] * PRICES["gb_second"] + per_million["invocations"] * PRICES["invocation"],
        "s3": per_million["s3_get"] * PRICES["s3_get"]
        + per_million["s3_list"] * PRICES["s3_list"]
        + per_million.get("inventory_objects", 0.0) * PRICES["inventory"],
        "dynamodb": per_million["rru"] * PRICES["rru"] + per_million["wru"] * PRICES["wru"],
        "sqs": per_million["sqs"] * PRICES["sqs"],
    }


# calls made once per page (the lease's renewal; a sharded index's Query; a listing; a Scan page), priced from the
# pages of the model below rather than fitted: the samples' sizes all fit one orphan and one files page
PER_PAGE_CALLS = {"dynamodb:UpdateItem", "dynamodb:Query", "s3:ListObjectsV2", "dynamodb:Scan"}
SCAN_ITEM_BYTES = (
    420  # a file record as FileMetadata holds it (ingest_codec.new_file_item, 64-hex hash), for Scan's RRU
)


def pages_at(contents: int, shards: int) -> int:
    """Pages of one sweep: each sharded index's shards (one page each when nothing is due: a healthy sweep),
    the listing's and the Scan's pages (dfd.reconcile.service.PAGE)."""
    from dfd.reconcile.service import PAGE

    return 3 * shards + -(-contents // PAGE["orphans"]) + -(-contents // PAGE["files"])


def per_content(samples: list[dict[str, Any]]) -> dict[str, float]:
    """Least-squares slope of each per-item figure against the contents."""
    xs = [float(s["contents"]) for s in samples]
    mean_x = sum(xs) / len(xs)
    spread = sum((x - mean_x) ** 2 for x in xs) or 1.0
    names = ("page_seconds", "item_calls", "s3_get", "rru", "sqs")
    out: dict[str, float] = {}
    for name in names:
        ys = [float(s[name]) for s in samples]
        mean_y = sum(ys) / len(ys)
        out[name] = sum((x - mean_x) * (y - mean_y) for x, y in zip(xs, ys, strict=True)) / spread
    return out


def extrapolate(samples: list[dict[str, Any]], shards: int, budget: int, to: int = MILLION) -> dict[str, float]:
    """One sweep at `to` contents: per-item figures from the fitted slopes, per-page ones from the model's pages."""
    slope = per_content(samples)
    pages = pages_at(to, shards)
    from dfd.reconcile.service import PAGE

    sharded = 3 * shards
    return {
        "pages": pages,
        "invocations": pages + 2,
        "transitions": transitions(pages, budget),
        "gb_seconds": slope["page_seconds"] * to * MEMORY_GB,
        "aws_calls": slope["item_calls"] * to + pages + sharded + -(-to // PAGE["orphans"]) + -(-to // PAGE["files"]),
        "s3_get": slope["s3_get"] * to,
        "s3_list": -(-to // PAGE["orphans"]),
        "rru": slope["rru"] * to + to * SCAN_ITEM_BYTES / 4096 * 0.5 + sharded,
        "wru": pages + 2,  # the lease: taken, renewed by every page, released
        "sqs": slope["sqs"] * to,
        "inventory_objects": to,  # S3 Inventory lists every object of the upload prefix once a day
    }


def old_definition_cost(to: int = MILLION) -> dict[str, float]:
    """The previous definition's sweep at `to` healthy contents (its path per content, see the module)."""
    return {
        "step_functions": to * OLD_PER_CONTENT * PRICES["transition"],
        # ListObjectsV2 per file record (its lost-copy check) and the listing's pages of 100
        "s3": (to + to / 100) * PRICES["s3_list"],
        # GetItem per object (consistent: 1 RRU), UpdateItem per file into the audit's scratch item (1 WRU)
        "dynamodb": to * PRICES["rru"] + to * PRICES["wru"],
    }


def rows(options: Any) -> list[Any]:
    """The row: this definition's cost per daily sweep at 1 M contents against the previous definition's."""
    import subprocess

    from dfdbench.harness import Row

    sizes = ["200", "400"] if options.quick else ["250", "500", "1000"]
    root = Path(__file__).resolve().parents[2]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(str(root / d) for d in ("bench", "scripts", "functions"))}
    done = subprocess.run(
        [sys.executable, "-m", "dfdbench.rows_reconcile", *sizes],
        capture_output=True,
        text=True,
        check=True,
        env=env,
        cwd=root,
    )
    samples = json.loads(done.stdout.strip().splitlines()[-1])["samples"]
    million = extrapolate(samples, samples[0]["shards"], samples[0]["budget"])
    dollars = cost(million)
    total = sum(dollars.values())
    old = old_definition_cost()
    old_total = sum(old.values())
    parts = ", ".join(f"{name} ${value:.3f}" for name, value in dollars.items())
    measured = "; ".join(
        f"{s['contents']}: {s['pages']} pages, {s['page_seconds']:.1f} s, {sum(s['calls'].values())} calls"
        for s in samples
    )
    note = (
        f"{million['transitions']:,.0f} transitions, {million['gb_seconds']:,.0f} GB-s, {million['invocations']:,.0f} "
        f"invocations, {million['aws_calls']:,.0f} AWS calls ({million['s3_get']:,.0f} HeadObject or GetObject); "
        f"{parts}; "
        f"all in ASL: {OLD_PER_CONTENT:.2f} transitions per content (${old['step_functions']:,.0f}) + "
        f"${old['s3'] + old['dynamodb']:.2f} S3/DynamoDB; measured on moto at {measured}"
    )
    return [
        Row(
            "16",
            "one daily sweep at 1 M contents (extrapolated), rules in a Lambda vs all in ASL",
            total,
            "$",
            baseline=old_total,
            baseline_name="every rule in ASL, on the same path",
            ratio=total / old_total,
            goal="≤ $1 per run",
            met=total <= 1.0,
            note=note,
            details={"samples": samples, "per_million": million, "dollars": dollars, "previous": old},
        )
    ]


def main(argv: list[str] | None = None) -> int:
    sizes = [int(arg) for arg in (argv or sys.argv[1:] or ["250", "500", "1000"])]
    from dfdbench.harness import function_environment

    os.environ.update(function_environment(""))
    for name in list(os.environ):  # in-process moto: no endpoint
        if name.startswith("AWS_ENDPOINT_URL"):
            del os.environ[name]
    samples = [measure(size) for size in sizes]
    print(json.dumps({"samples": samples}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
