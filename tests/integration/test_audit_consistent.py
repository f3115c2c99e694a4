"""scripts/audit reads one table after another: a commit landing between its reads (here a duplicate's ingest
between the file records' scan and the counters' scan) makes counters and records disagree in what it read.
The audit takes its report again until the counter and usage shards held still while it was taken, so a
consistent store is never reported broken by a write racing the audit."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import requests

from dfd.handlers import ingest, upload
from dfdtools import audit
from tests.integration.conftest import Aws
from tests.support import LambdaContext, api_event, call, sqs_batch

DATA = b"racing the audit\n" * 64


def put(filename: str) -> None:
    """POST /upload and the PUT of DATA; its notification stays on the queue."""
    status, answer = call(upload.handler, api_event("POST", "/upload", body={"filename": filename, "size": len(DATA)}))
    assert status == 201, answer
    assert requests.put(answer["upload_url"], data=DATA, headers=answer["headers"], timeout=10).status_code == 200


def deliver(aws: Aws) -> None:
    """The queue's notifications handed to the ingest."""
    messages = aws.drain()
    assert ingest.handler(sqs_batch(*(m["Body"] for m in messages)), LambdaContext()) == {"batchItemFailures": []}


class CommitDuringScan:
    """A DynamoDB client whose `nth` scan of `table` first runs `commit` (once)."""

    def __init__(self, ddb: Any, table: str, nth: int, commit: Callable[[], object]) -> None:
        self._ddb, self._table, self._nth, self._commit = ddb, table, nth, commit
        self.scans = 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self._ddb, name)

    def get_paginator(self, name: str) -> Any:
        paginator = self._ddb.get_paginator(name)
        outer = self

        class Paginator:
            def paginate(self, **kwargs: Any) -> Any:
                if name == "scan" and kwargs.get("TableName") == outer._table:
                    outer.scans += 1
                    if outer.scans == outer._nth:
                        outer._commit()
                return paginator.paginate(**kwargs)

        return Paginator()


def test_a_commit_between_the_audits_reads_is_not_reported_broken(aws: Aws) -> None:
    put("a.bin")
    deliver(aws)
    put("again.bin")  # its notification waits on the queue: the duplicate's ingest is the racing commit
    # the counters' scans: the audit's look at the shards (1), its report's (2: after the files were read)
    racing = CommitDuringScan(aws.ddb, aws.settings.counters_table, 2, lambda: deliver(aws))

    report = audit.audit(racing, aws.s3, aws.settings)

    assert report.ok, report.text()
    assert racing.scans >= 4  # the report was taken a second time, once the shards held still
    assert aws.audit().ok


def test_a_report_taken_while_the_shards_held_still_stands(aws: Aws) -> None:
    put("a.bin")
    deliver(aws)
    (item,) = aws.ddb.scan(TableName=aws.settings.files_table)["Items"]
    aws.ddb.delete_item(TableName=aws.settings.files_table, Key={"hash": item["hash"]})  # the records lose one
    racing = CommitDuringScan(aws.ddb, aws.settings.counters_table, 0, lambda: None)

    report = audit.audit(racing, aws.s3, aws.settings)

    assert not report.ok
    assert racing.scans == 3  # one report, between two equal looks at the shards
