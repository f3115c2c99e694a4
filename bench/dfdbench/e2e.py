"""Target 8: N uploads end to end — POST /upload, presigned PUT, S3 event, queue, ingest — on the local stack
over HTTP, and the same workload pushed straight through the handlers in one process (moto in memory, no
sockets, no queue polling): the difference is the local stack's own overhead.

``python -m dfdbench.e2e --mode stack|inprocess --uploads N [--clients 8]`` prints one JSON line. Each
mode runs in its own process (the stack and moto's in-memory backends are process-wide).

Workload (seeded): sizes 60% 1-64 KiB, 30% 64 KiB-1 MiB, 10% 1-8 MiB; 30% of the uploads repeat the content of
an earlier one. Clients do not send a sha256, so every upload goes through the PUT and the ingest. Latency is
from the PUT's response to the first GET /metadata/{upload_id} showing stored/duplicate (polled every 50 ms on
the stack; read right after the ingest handler returns in-process).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
TMPFS = "/dev/shm"  # noqa: S108 (a directory of our own is made in it, mkdtemp)
POLL_SECONDS = 0.05
FINAL = {"stored", "duplicate"}


@dataclass(frozen=True)
class Upload:
    index: int
    size: int
    seed: int  # content identity: a duplicate shares its original's seed


def workload(count: int, seed: int = 2026) -> list[Upload]:
    rng = random.Random(seed)
    uploads: list[Upload] = []
    for index in range(count):
        if uploads and rng.random() < 0.3:
            original = rng.choice(uploads)
            uploads.append(Upload(index, original.size, original.seed))
            continue
        roll = rng.random()
        if roll < 0.6:
            size = rng.randint(1024, 64 * 1024)
        elif roll < 0.9:
            size = rng.randint(64 * 1024, 1024 * 1024)
        else:
            size = rng.randint(1024 * 1024, 8 * 1024 * 1024)
        uploads.append(Upload(index, size, rng.getrandbits(62)))
    return uploads


def body(upload: Upload) -> bytes:
    from dfdbench.harness import content

    return content(upload.size, upload.seed)


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q / 100 * (len(ordered) - 1))))] if ordered else float("nan")


def summary(
    mode: str, uploads: list[Upload], elapsed: float, latencies: list[float], outcomes: dict[str, int]
) -> dict[str, Any]:
    return {
        "mode": mode,
        "uploads": len(uploads),
        "bytes": sum(u.size for u in uploads),
        "seconds": elapsed,
        "uploads_per_s": len(uploads) / elapsed,
        "p50_ms": percentile(latencies, 50) * 1000,
        "p95_ms": percentile(latencies, 95) * 1000,
        "outcomes": outcomes,
    }


# ---------------------------------------------------------------------- on the local stack, over HTTP
def seed_files(dynamodb_url: str, count: int, threads: int = 4) -> float:
    """``count`` stored contents written as items straight into DynamoDB Local (BatchWriteItem): per content its
    FileMetadata record and its stored upload (Uploads, carrying its event and its key's claim), as an ingest
    leaves them (dfd's codec) — a stack holding ``count`` files without uploading them. Seconds taken."""
    import boto3

    from dfd.adapters.dynamo import codec
    from dfd.core import clock
    from dfd.core.records import UploadStatus
    from dfd.ingest import codec as ingest_codec
    from dfd.ingest.ports import ObjectVersion
    from dfdlocal.names import BUCKET, CREDENTIALS, REGION, TABLES

    keys = {"aws_access_key_id": CREDENTIALS["AWS_ACCESS_KEY_ID"], "aws_secret_access_key": "testing"}
    stamp = clock.iso(clock.now())

    def items(index: int) -> dict[str, dict[str, Any]]:
        upload_id = f"{index:032x}"
        key = f"uploads/{upload_id}"
        digest = f"{index:064x}"
        version = ObjectVersion(f"{BUCKET}/{key}#seed", BUCKET, key, "seed", 1024, digest, upload_id)
        name = f"seed-{index}.bin"
        upload = ingest_codec.ingested_upload_item(
            version, UploadStatus.STORED, stamp, name, "application/octet-stream"
        )
        return {
            TABLES["FilesTable"]: ingest_codec.new_file_item(
                version, name, "application/octet-stream", stamp, incarnation="seeded"
            ),
            TABLES["UploadsTable"]: upload | {"tenant": "seed"},
        }

    def write(start: int) -> None:
        client: Any = boto3.client(
            "dynamodb",
            endpoint_url=dynamodb_url,
            region_name=REGION,
            aws_access_key_id=keys["aws_access_key_id"],
            aws_secret_access_key=keys["aws_secret_access_key"],
        )
        for first in range(start, count, 8 * threads):
            batch: dict[str, list[dict[str, Any]]] = {}
            for index in range(first, min(first + 8, count)):
                for table, item in items(index).items():
                    batch.setdefault(table, []).append({"PutRequest": {"Item": codec.to_item(item)}})
            while batch:
                left = client.batch_write_item(RequestItems=batch).get("UnprocessedItems") or {}
                batch = left

    started = time.perf_counter()
    with ThreadPoolExecutor(threads) as pool:
        list(pool.map(write, [i * 8 for i in range(threads)]))
    return time.perf_counter() - started


def run_stack(uploads: list[Upload], clients: int, seed: int = 0) -> dict[str, Any]:
    from dfdlocal.stack import StackOptions

    # the reconcile's timer off: its sweep would HeadObject every seeded content (their objects were never put)
    os.environ["DFD_RECONCILE_INTERVAL"] = "0"
    # as make run: no batching window (dfdlocal's --batching-window 0), state kept in a data directory (DynamoDB
    # Local's -dbPath, objects, queues, users), here a fresh one on tmpfs where there is one (TMPFS): this disk's
    # fsyncs made seeding 10 times slower (docs/performance.md, target 8)
    data_dir = Path(tempfile.mkdtemp(prefix="dfd-bench-", dir=TMPFS if os.access(TMPFS, os.W_OK) else None))
    options = StackOptions(
        root=ROOT, api_port=0, lambda_port=0, aws_port=0, log_level="ERROR", batching_window=0, data_dir=data_dir
    )
    local = threading.local()
    try:
        return _run_stack(uploads, clients, seed, options, local)
    finally:
        shutil.rmtree(data_dir, ignore_errors=True)


def _run_stack(uploads: list[Upload], clients: int, seed: int, options: Any, local: threading.local) -> dict[str, Any]:
    import requests

    from dfdlocal.stack import LocalStack

    with LocalStack(options) as stack:
        assert stack.dynamodb is not None
        seeded = seed_files(stack.dynamodb.url, seed) if seed else 0.0
        for stream in stack.stream_pollers:  # the seeded history's events: published long ago on a real stack
            assert stream.skip_to_latest(), f"{stream.description} did not skip to the stream's end"
        api = stack.api_url
        assert stack.pool is not None, "template.yaml defines the user pool the API's authorizer trusts"
        signed_in = stack.client("cognito-idp").initiate_auth(
            AuthFlow="USER_PASSWORD_AUTH",
            ClientId=stack.pool.client_id,
            AuthParameters={"USERNAME": "alice", "PASSWORD": stack.pool.password},
        )
        # every API call is alice's (the presigned PUT carries no token: S3 allows one auth mechanism)
        auth = {"Authorization": f"Bearer {signed_in['AuthenticationResult']['AccessToken']}"}

        def one(upload: Upload) -> tuple[float, str]:
            session: requests.Session = getattr(local, "session", None) or requests.Session()
            local.session = session
            answer = session.post(
                f"{api}/upload",
                json={"filename": f"f{upload.index}.bin", "size": upload.size},
                headers=auth,
                timeout=30,
            )
            answer.raise_for_status()
            issued = answer.json()
            put = session.put(issued["upload_url"], data=body(upload), headers=issued["headers"], timeout=60)
            put.raise_for_status()
            sent = time.perf_counter()
            deadline = sent + 120
            while time.perf_counter() < deadline:
                answer = session.get(f"{api}/metadata/{issued['upload_id']}", headers=auth, timeout=30)
                status = answer.json().get("status")
                if status in FINAL:
                    return time.perf_counter() - sent, str(status)
                time.sleep(POLL_SECONDS)
            raise RuntimeError(f"upload {issued['upload_id']} not processed after 120 s")

        started = time.perf_counter()
        with ThreadPoolExecutor(clients) as pool:
            results = list(pool.map(one, uploads))
        elapsed = time.perf_counter() - started
    outcomes: dict[str, int] = {}
    for _, status in results:
        outcomes[status] = outcomes.get(status, 0) + 1
    result = summary("stack", uploads, elapsed, [latency for latency, _ in results], outcomes)
    data_dir = str(options.data_dir)
    return result | {
        "seeded_files": seed,
        "seed_seconds": seeded,
        "data_dir": data_dir,
        "tmpfs": data_dir.startswith(TMPFS),
    }


# ---------------------------------------------------------------------- in-process, handlers called directly
def _client(service: str) -> Any:
    import boto3

    return boto3.client(service)  # type: ignore[call-overload]


def run_inprocess(uploads: list[Upload]) -> dict[str, Any]:
    from dfdbench.harness import QUEUE_VISIBILITY_TIMEOUT
    from dfdlocal.emulator import IN_PROCESS_ENDPOINT, create_resources
    from dfdlocal.names import CREDENTIALS, ENVIRONMENT, REGION
    from dfdlocal.template import TEMPLATE, read_model

    env = {
        **CREDENTIALS,
        **ENVIRONMENT,
        "AWS_DEFAULT_REGION": REGION,
        "POWERTOOLS_SERVICE_NAME": "dfd",
        "POWERTOOLS_METRICS_NAMESPACE": "dfd",
        "POWERTOOLS_LOG_LEVEL": "ERROR",
        "POWERTOOLS_TRACE_DISABLED": "true",
    }
    for name in [n for n in os.environ if n.startswith("AWS_ENDPOINT_URL")]:
        del os.environ[name]
    os.environ.update(env)

    import boto3
    import requests
    from moto import mock_aws

    from dfdbench.rows_api import LambdaContext, api_event
    from dfdlocal.poller import lambda_record

    with mock_aws():
        sqs = boto3.client("sqs")
        model = read_model(TEMPLATE, IN_PROCESS_ENDPOINT)
        resources = create_resources(model, _client, local_visibility_timeout=QUEUE_VISIBILITY_TIMEOUT)
        queue, arn = resources.queues["IngestQueue"].url, resources.queues["IngestQueue"].arn
        sqs.purge_queue(QueueUrl=queue)  # the s3:TestEvent

        from dfd import deps
        from dfd.handlers import ingest, metadata, upload

        deps.reset()
        context: Any = LambdaContext()
        latencies: list[float] = []
        outcomes: dict[str, int] = {}
        started = time.perf_counter()
        for item in uploads:
            answer = upload.handler(
                api_event("POST", "/upload", body={"filename": f"f{item.index}.bin", "size": item.size}), context
            )
            issued = json.loads(answer["body"])
            put = requests.put(issued["upload_url"], data=body(item), headers=issued["headers"], timeout=60)
            put.raise_for_status()
            sent = time.perf_counter()
            messages = sqs.receive_message(QueueUrl=queue, MaxNumberOfMessages=10).get("Messages", [])
            batch = {"Records": [lambda_record(dict(m), arn) for m in messages]}
            assert ingest.handler(batch, context) == {"batchItemFailures": []}
            for message in messages:
                sqs.delete_message(QueueUrl=queue, ReceiptHandle=message["ReceiptHandle"])
            status = json.loads(metadata.handler(api_event("GET", f"/metadata/{issued['upload_id']}"), context)["body"])
            latencies.append(time.perf_counter() - sent)
            outcomes[status["status"]] = outcomes.get(status["status"], 0) + 1
        elapsed = time.perf_counter() - started
    return summary("inprocess", uploads, elapsed, latencies, outcomes)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--mode", choices=("stack", "inprocess"), required=True)
    parser.add_argument("--uploads", type=int, default=300)
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--seed", type=int, default=0, help="stack: files written as items before the run")
    options = parser.parse_args()
    uploads = workload(options.uploads)
    result = run_stack(uploads, options.clients, options.seed) if options.mode == "stack" else run_inprocess(uploads)
    sys.stdout.write(json.dumps(result) + "\n")


if __name__ == "__main__":
    main()
