"""The last copy and the tenancy call budget, on moto through the handlers:

- the tenant hint (x-amz-meta-dfd-tenant, signed into the presigned PUT) lets the ingest's one BatchGetItem read
  the uploader's tenant reference: a duplicate costs the same calls whichever tenant holds the content;
- the last copy of a content is never deleted: a duplicate of content whose stored object is gone becomes the
  stored copy (and the audit reports a file record without its object);
- a duplicate whose bytes outlive its event record (TTL) is a replay: deleted, never counted again."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from typing import Any

import pytest
import requests

from dfd import deps
from dfd.adapters import aws as dfd_aws
from dfd.core.ids import TENANT_HEADER
from dfd.core.notifications import ObjectRef
from dfd.ingest.service import IngestResult, Outcome
from tests.integration.support import Aws, get, post, sha, upload_as
from tests.support import ALICE, BOB, CAROL, ApiUser


class Calls:
    """AWS calls dfd's own clients make (botocore before-call: one per API call, retries not counted), as
    the bench's row 5 counts them."""

    def __init__(self) -> None:
        self.calls: Counter[str] = Counter()

    def count(self, model: Any, **_: Any) -> None:
        self.calls[model.name] += 1

    @property
    def total(self) -> int:
        return sum(self.calls.values())


@pytest.fixture
def calls(aws: Aws) -> Iterator[Calls]:
    counter = Calls()
    clients = [dfd_aws.dynamodb(), dfd_aws.s3(), dfd_aws.s3_ingest()]
    for client in clients:
        client.meta.events.register("before-call.*.*", counter.count, unique_id="test-calls")
    yield counter
    for client in clients:
        client.meta.events.unregister("before-call.*.*", unique_id="test-calls")


def uploaded(aws: Aws, user: ApiUser, data: bytes, name: str, *, hint: bool = True) -> dict[str, Any]:
    """POST /upload then the client's PUT with every header the 201 lists; `hint` False: the object arrives
    without the tenant metadata (put straight at the upload's key: the signature binds the header, so S3 would
    refuse a presigned PUT that left it out — this is the hint missing, as for objects from older clients)."""
    status, answer = post(user, data, name)
    assert status == 201, answer
    assert answer["headers"][TENANT_HEADER] == user.caller.tenant
    if hint:
        assert requests.put(answer["upload_url"], data=data, headers=answer["headers"], timeout=10).status_code == 200
    else:
        aws.s3.put_object(Bucket=aws.settings.bucket, Key=answer["key"], Body=data)
    aws.drain()
    return answer


def ingest(aws: Aws, key: str) -> IngestResult:
    return deps.ingestor().ingest(ObjectRef(aws.settings.bucket, key))


DATA = b"counted calls" * 200


@pytest.mark.parametrize("hint", [True, False])
@pytest.mark.parametrize(
    ("user", "status", "budget"),
    [(CAROL, "duplicate", 5), (BOB, "stored", 5)],
    ids=["same-tenant duplicate", "cross-tenant duplicate"],
)
def test_aws_calls_per_ingest(aws: Aws, calls: Calls, hint: bool, user: ApiUser, status: str, budget: int) -> None:
    """New content: GetObject + BatchGetItem + TransactWriteItems. A duplicate: + HeadObject of the stored copy
    + DeleteObject. Without the hint a cross-tenant duplicate pays one cancelled TransactWriteItems more."""
    first = uploaded(aws, ALICE, DATA, "first.bin", hint=hint)
    calls.calls.clear()
    assert ingest(aws, first["key"]).outcome == Outcome.STORED
    assert calls.calls == Counter(GetObject=1, BatchGetItem=1, TransactWriteItems=1)
    second = uploaded(aws, user, DATA, "second.bin", hint=hint)
    calls.calls.clear()
    result = ingest(aws, second["key"])
    assert result.outcome == Outcome.DUPLICATE and result.deleted
    assert result.detail["upload_status"] == status
    expected = Counter(GetObject=1, BatchGetItem=1, TransactWriteItems=1, HeadObject=1, DeleteObject=1)
    if not hint and status == "stored":
        expected["TransactWriteItems"] += 1  # assumed held, corrected by the cancellation
        budget += 1
    assert calls.calls == expected and calls.total <= budget
    assert get("metadata", second["upload_id"], user)[1]["status"] == status
    aws.assert_invariants()


def test_a_duplicate_of_lost_content_becomes_the_stored_copy(aws: Aws) -> None:
    data = b"the only copy left" * 64
    first = upload_as(aws, ALICE, data, "first.bin")
    aws.s3.delete_object(Bucket=aws.settings.bucket, Key=first["key"])  # lost out of band
    report = aws.audit()
    assert not report.ok and any(f"stored object {first['key']}" in p for p in report.problems())
    second = upload_as(aws, BOB, data, "second.bin")
    listing = [o["Key"] for o in aws.s3.list_objects_v2(Bucket=aws.settings.bucket).get("Contents", [])]
    assert listing == [second["key"]]  # kept
    assert get("metadata", second["upload_id"], BOB)[1]["status"] == "stored"
    # alice's download serves the surviving bytes under alice's filename
    status, link = get("download", sha(data), ALICE)
    assert status == 200 and link["filename"] == "first.bin"
    assert requests.get(link["download_url"], timeout=10).content == data
    aws.assert_invariants()
    # the next duplicate is deleted as usual
    third = upload_as(aws, CAROL, data, "third.bin")
    listing = [o["Key"] for o in aws.s3.list_objects_v2(Bucket=aws.settings.bucket).get("Contents", [])]
    assert listing == [second["key"]] and get("metadata", third["upload_id"], CAROL)[1]["status"] == "duplicate"
    aws.assert_invariants()


def test_a_duplicate_whose_event_record_expired_is_not_counted_again(aws: Aws) -> None:
    data = b"outlived its event" * 50
    upload_as(aws, ALICE, data, "first.bin")
    second = uploaded(aws, CAROL, data, "second.bin")

    class Crash(Exception):
        pass

    def crash(result: IngestResult) -> None:
        raise Crash

    crashing = deps.ingestor()
    crashing._after_commit = crash
    with pytest.raises(Crash):
        crashing.ingest(ObjectRef(aws.settings.bucket, second["key"]))
    crashing._after_commit = None
    counted = deps.repository().counter_totals()
    # the Events items expire (TTL) while the duplicate's bytes are still there; the upload item carries its event
    events = aws.ddb.scan(TableName=aws.settings.events_table)["Items"]
    for event in events:
        if not event["event_key"]["S"].startswith("claim#"):
            aws.ddb.delete_item(TableName=aws.settings.events_table, Key={"event_key": event["event_key"]})
    result = ingest(aws, second["key"])
    assert result.outcome == Outcome.REPLAY and result.deleted and result.detail["recorded_outcome"] == "duplicate"
    assert deps.repository().counter_totals() == counted
    status, view = get("metadata", second["upload_id"], CAROL)
    assert status == 200 and view["status"] == "duplicate" and view["file"]["upload_count"] == 2
    aws.assert_invariants()
