"""Re-deliver S3 events — to the ingest queue or straight to the Lambda invoke API — N times, optionally
concurrently, then print what changed. For an idempotent ingest the answer is: nothing.

  scripts/replay --prefix uploads/ -n 10 --via both --concurrency 8
  scripts/replay --key uploads/0f3c... --via lambda
  scripts/replay --file events/s3-put.json
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import requests

from dfd.core.notifications import notification
from dfd.core.records import COUNTER_FIELDS
from dfdtools.tools import (
    LOCAL_LAMBDA,
    LOCAL_QUEUE,
    Target,
    add_target_args,
    interruptible,
    reports_unreachable,
    target,
)


def events_from_file(path: Path) -> list[dict[str, Any]]:
    data = json.loads(path.read_text())
    if isinstance(data, list):
        return [d for d in data if isinstance(d, dict)]
    if isinstance(data, dict) and isinstance(data.get("Records"), list) and data["Records"]:
        records = data["Records"]
        if all(r.get("eventSource") == "aws:sqs" for r in records):
            return [json.loads(r["body"]) for r in records]
    return [data]


def state(where: Target) -> dict[str, int]:
    """What a replay must not change: counters, record counts, stored objects."""
    s = where.settings
    ddb, s3 = where.client("dynamodb"), where.client("s3")

    def count(table: str) -> int:
        total = 0
        for page in ddb.get_paginator("scan").paginate(TableName=table, Select="COUNT", ConsistentRead=True):
            total += int(page["Count"])
        return total

    # only the counters proper: the table also holds reconcile's audit records, which a sweep running
    # during the replay legitimately writes
    totals = {f"counter.{name}": 0 for name in COUNTER_FIELDS}
    for page in ddb.get_paginator("scan").paginate(TableName=s.counters_table, ConsistentRead=True):
        for item in page["Items"]:
            for name in COUNTER_FIELDS:
                if "N" in item.get(name, {}):
                    totals[f"counter.{name}"] += int(item[name]["N"])
    objects = sum(
        page.get("KeyCount", 0)
        for page in s3.get_paginator("list_objects_v2").paginate(Bucket=s.bucket, Prefix=s.upload_prefix)
    )
    return totals | {
        "files": count(s.files_table),
        "event_records": count(s.events_table),
        "uploads": count(s.uploads_table),
        "objects": objects,
    }


def wait_for_queue(sqs: Any, url: str, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    names = ["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"]
    while time.monotonic() < deadline:
        attrs = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=names)["Attributes"]
        if all(int(attrs.get(n, "0")) == 0 for n in names):
            return True
        time.sleep(0.25)
    return False


@interruptible
@reports_unreachable
def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="scripts/replay", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    add_target_args(parser)
    source = parser.add_argument_group("what to replay (any mix)")
    source.add_argument("--key", action="append", default=[], help="object key (repeatable)")
    source.add_argument("--prefix", help="every object under this prefix")
    source.add_argument("--file", type=Path, action="append", default=[], help="JSON file of S3/SQS/EventBridge events")
    parser.add_argument("--via", choices=["queue", "lambda", "both"], default="queue")
    parser.add_argument("-n", "--times", type=int, default=1, help="deliver each event N times (default 1)")
    parser.add_argument("--concurrency", type=int, default=1, help="deliveries in flight at once")
    parser.add_argument("--queue-url", help="ingest queue URL (default: the local stack's)")
    parser.add_argument("--lambda-url", default=LOCAL_LAMBDA, help="Lambda invoke API (default: make run's)")
    parser.add_argument("--function-name", help="ingest function (default: the stack's, or the local stack's)")
    parser.add_argument("--settle", type=float, default=60.0, help="seconds to wait for the queue to drain")
    args = parser.parse_args(argv)
    if args.times < 1 or not 1 <= args.concurrency <= 64:
        parser.error("--times must be >= 1 and --concurrency 1..64")
    where = target(args)
    bucket = where.settings.bucket
    events = [notification(bucket, key) for key in args.key]
    if args.prefix:
        s3 = where.client("s3")
        for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=args.prefix):
            events += [notification(bucket, obj["Key"]) for obj in page.get("Contents", [])]
    for path in args.file:
        events += events_from_file(path)
    if not events:
        parser.error("nothing to replay: give --key, --prefix or --file")

    sqs = where.client("sqs")
    queue_url = (
        args.queue_url or where.outputs.get("IngestQueueUrl") or sqs.get_queue_url(QueueName=LOCAL_QUEUE)["QueueUrl"]
    )
    function_name = args.function_name or where.outputs.get("IngestFunctionName") or "IngestFunction"
    lam = where.client("lambda") if args.aws else None
    before = state(where)

    def deliver(event: dict[str, Any], via: str) -> str:
        if via == "queue":
            sqs.send_message(QueueUrl=queue_url, MessageBody=json.dumps(event))
            return "queued"
        if lam is not None:
            answer = lam.invoke(FunctionName=function_name, Payload=json.dumps(event).encode())
            return "error" if answer.get("FunctionError") else "ok"
        url = f"{args.lambda_url}/2015-03-31/functions/{function_name}/invocations"
        response = requests.post(url, json=event, timeout=300)
        return "error" if response.headers.get("X-Amz-Function-Error") or response.status_code >= 400 else "ok"

    vias = ["queue", "lambda"] if args.via == "both" else [args.via]
    jobs = [(event, via) for _ in range(args.times) for event in events for via in vias]
    with ThreadPoolExecutor(max_workers=args.concurrency) as pool:
        outcomes = list(pool.map(lambda job: deliver(*job), jobs))
    print(f"delivered {len(jobs)} events ({len(events)} distinct x {args.times} x {'+'.join(vias)})")
    for outcome in sorted(set(outcomes)):
        print(f"  {outcome}: {outcomes.count(outcome)}")
    if "queue" in vias and not wait_for_queue(sqs, queue_url, args.settle):
        print(f"warning: the ingest queue did not drain within {args.settle:.0f}s", file=sys.stderr)
    after = state(where)
    changed = {k: (before.get(k, 0), after.get(k, 0)) for k in sorted(before | after) if before.get(k) != after.get(k)}
    if not changed:
        print("nothing changed: counters, records and stored objects are exactly as before")
        return 0 if "error" not in outcomes else 1
    print("CHANGED:")
    for name, (old, new) in changed.items():
        print(f"  {name}: {old} -> {new}")
    return 1


if __name__ == "__main__":
    sys.exit(main())
