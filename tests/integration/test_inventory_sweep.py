"""The lost-copy sweep on moto with the real S3 adapter: it lists the inventory reports' prefix, reads the newest
report (manifest and gzipped CSV, as S3 Inventory writes them) and asks S3 only about what the report does not list;
without a report (the local stack has no S3 Inventory) it asks about every content."""

from __future__ import annotations

import csv
import gzip
import io
import json
from dataclasses import replace
from datetime import timedelta
from typing import Any

from dfd import deps
from dfd.adapters.s3 import ObjectStore
from dfd.core import clock
from dfd.core.records import FileRecord
from dfd.handlers import upload
from dfd.reconcile.service import Reconciler
from tests.integration.support import Aws, deliver, put
from tests.support import ALICE, api_event, call
from tests.unit.fakes import FakeIngestQueue, run_reconcile


def stored(aws: Aws, data: bytes) -> dict[str, Any]:
    status, answer = call(upload.handler, api_event("POST", "/upload", body={"filename": "i.bin", "size": len(data)},
                                                     user=ALICE))  # fmt: skip
    assert status == 201 and put(answer, data).status_code == 200
    assert deliver(aws) == {"batchItemFailures": []}
    return answer


def write_report(aws: Aws, prefix: str, listed: list[tuple[str, str]]) -> None:
    bucket, created = aws.settings.bucket, clock.now() + timedelta(minutes=1)
    rows = io.StringIO()
    for key, etag in listed:
        csv.writer(rows, quoting=csv.QUOTE_ALL).writerow([bucket, key, "1", etag.strip('"')])
    data_key = f"{prefix}data/0.csv.gz"
    aws.s3.put_object(Bucket=bucket, Key=data_key, Body=gzip.compress(rows.getvalue().encode()))
    manifest = {
        "creationTimestamp": str(int(created.timestamp() * 1000)),
        "fileFormat": "CSV",
        "fileSchema": "Bucket, Key, Size, ETag",
        "files": [{"key": data_key, "size": 1, "MD5checksum": "-"}],
    }
    folder = created.strftime("%Y-%m-%dT%H-%MZ")
    aws.s3.put_object(Bucket=bucket, Key=f"{prefix}{folder}/manifest.json", Body=json.dumps(manifest).encode())


def sweep(aws: Aws, prefix: str) -> tuple[dict[str, Any], list[str]]:
    """One sweep two hours on, with the inventory under `prefix`: its summary and the keys it sent HeadObject."""
    heads: list[str] = []
    s3 = aws.s3

    def seen(params: dict[str, Any], **_: Any) -> None:
        heads.append(params["Key"])

    s3.meta.events.register("provide-client-params.s3.HeadObject", seen)
    try:
        reconciler = Reconciler(
            replace(aws.settings, inventory_prefix=prefix), deps.repository(), ObjectStore(s3), FakeIngestQueue()
        )
        summary = run_reconcile(reconciler, now=clock.iso(clock.now() + timedelta(hours=2)))
    finally:
        s3.meta.events.unregister("provide-client-params.s3.HeadObject", seen)
    return summary, heads


def records(aws: Aws) -> dict[str, FileRecord]:
    from dfd.adapters.dynamo import codec
    from dfd.ingest import codec as ingest_codec

    items = aws.ddb.scan(TableName=aws.settings.files_table, ConsistentRead=True)["Items"]
    return {str(record.s3_key): record for record in (ingest_codec.file_record(codec.from_item(i)) for i in items)}


def test_the_report_spares_the_listed_copies_and_finds_the_lost_one(aws: Aws) -> None:
    prefix = f"inventory/{aws.settings.bucket}/uploads-daily/"
    kept, gone = stored(aws, b"kept bytes"), stored(aws, b"gone bytes")
    etag = aws.s3.head_object(Bucket=aws.settings.bucket, Key=kept["key"])["ETag"]
    aws.s3.delete_object(Bucket=aws.settings.bucket, Key=gone["key"])
    write_report(aws, prefix, [(kept["key"], etag)])
    summary, heads = sweep(aws, prefix)
    assert heads == [gone["key"]]
    assert records(aws)[gone["key"]].lost and not records(aws)[kept["key"]].lost
    assert summary["drift"] == {"files": 0, "bytes": 0}


def test_without_a_report_every_content_is_asked(aws: Aws) -> None:
    kept, gone = stored(aws, b"kept bytes"), stored(aws, b"gone bytes")
    aws.s3.delete_object(Bucket=aws.settings.bucket, Key=gone["key"])
    _, heads = sweep(aws, f"inventory/{aws.settings.bucket}/uploads-daily/")
    assert sorted(heads) == sorted([kept["key"], gone["key"]])
    assert records(aws)[gone["key"]].lost
