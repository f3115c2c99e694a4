"""Row 15: events out — the publisher's events/s per stream shard and the latency from a commit to its event on the
local queue, next to baselines measured in the same run (docs/performance.md, "Events out").

Runs in its own process (``python -m dfdbench.rows_events``, one JSON line on stdout) on in-process moto with the
template's tables, bus and the local `dfd-events` queue (dfdlocal.streams), the publisher invoked as the local
stack's stream mapping invokes it.
- events/s: N committed upload records (each one outcome), read from the Uploads stream in batches of 100 and
  published; baseline: the same entries sent by a bare PutEvents loop (10 per call), no stream, no decoding.
- latency: a commit, then the event received from `dfd-events` (the mapping reads an idle shard every 0.1 s,
  as Lambda polls a shard 4 times a second); baseline: an SQS send -> receive round trip.
"""

from __future__ import annotations

import json
import os
import statistics
import sys
import threading
import time
import uuid
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]


def main(argv: list[str] | None = None) -> int:
    count = int((argv or sys.argv[1:] or ["1000"])[0])
    from dfdbench.harness import function_environment

    env = function_environment("")
    os.environ.update(env)
    for name in list(os.environ):  # in-process moto: no endpoint (the bench's own emulator may be named)
        if name.startswith("AWS_ENDPOINT_URL"):
            del os.environ[name]
    import boto3
    from botocore.config import Config
    from moto import mock_aws

    from dfdlocal.emulator import IN_PROCESS_ENDPOINT, create_resources
    from dfdlocal.runtime import Runtime
    from dfdlocal.streams import StreamPoller, patch_moto_streams, route_events
    from dfdlocal.template import TEMPLATE, read_model

    def client(service: str) -> Any:
        config = Config(account_id_endpoint_mode="disabled") if service == "dynamodbstreams" else None
        return boto3.client(service, config=config)  # type: ignore[call-overload]

    patch_moto_streams()
    with mock_aws():
        model = read_model(TEMPLATE, IN_PROCESS_ENDPOINT)
        create_resources(model, client, local_visibility_timeout=30)
        _, queue = route_events(model.event_buses, client)
        from dfd.adapters.dynamo.base import to_item
        from dfd.adapters.eventbridge import entry
        from dfd.events.outcomes import upload_events
        from dfd.uploads import codec as uploads_codec
        from dfd.uploads.ports import PrecheckDuplicate

        ddb, sqs, events = client("dynamodb"), client("sqs"), client("events")
        table = model.tables["UploadsTable"].name
        stamp = "2026-03-01T12:00:00Z"

        def commit() -> None:
            upload = PrecheckDuplicate(uuid.uuid4().hex, "owner", "acme", "ab" * 32, "f.bin", 1024, "text/plain")
            ddb.put_item(TableName=table, Item=to_item(uploads_codec.precheck_upload_item(upload, stamp)))

        for _ in range(count):
            commit()
        runtime = Runtime(model.functions, ROOT)
        source = next(s for s in model.stream_sources if s.table_logical_id == "UploadsTable")
        poller = StreamPoller(source, table, runtime.invoke, client, sleep=lambda _: None)
        poller.open()
        started = time.perf_counter()
        while poller.delivered < count:
            poller.poll_once()
        publisher_rate = count / (time.perf_counter() - started)

        records = ddb.scan(TableName=table)["Items"]
        from dfd.adapters.dynamo.base import from_item

        built = [
            entry(event, os.environ["EVENT_BUS_NAME"])
            for item in records
            for event in upload_events(None, uploads_codec.upload_record(from_item(item)), committed_at=stamp)
        ]
        started = time.perf_counter()
        for start in range(0, len(built), 10):
            events.put_events(Entries=built[start : start + 10])
        raw_rate = len(built) / (time.perf_counter() - started)
        sqs.purge_queue(QueueUrl=queue)

        stop = threading.Event()

        def run() -> None:
            while not stop.is_set():
                if poller.poll_once() == 0:
                    stop.wait(0.1)

        thread = threading.Thread(target=run, daemon=True)
        thread.start()
        latencies, round_trips = [], []
        for _ in range(20):
            began = time.perf_counter()
            commit()
            while not sqs.receive_message(QueueUrl=queue, MaxNumberOfMessages=1, WaitTimeSeconds=0).get("Messages"):
                time.sleep(0.005)
            latencies.append((time.perf_counter() - began) * 1000)
            began = time.perf_counter()
            sqs.send_message(QueueUrl=queue, MessageBody="{}")
            while not sqs.receive_message(QueueUrl=queue, MaxNumberOfMessages=1, WaitTimeSeconds=0).get("Messages"):
                time.sleep(0.005)
            round_trips.append((time.perf_counter() - began) * 1000)
        stop.set()
        thread.join(5)
    print(
        json.dumps(
            {
                "events": count,
                "publisher_events_per_s": publisher_rate,
                "raw_put_events_per_s": raw_rate,
                "latency_p50_ms": statistics.median(latencies),
                "latency_p95_ms": sorted(latencies)[int(len(latencies) * 0.95) - 1],
                "sqs_round_trip_p50_ms": statistics.median(round_trips),
            }
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
