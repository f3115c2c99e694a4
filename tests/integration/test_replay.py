"""At-least-once delivery turned into exactly-once effects: replays, duplicates in a batch, crashes, races."""

from __future__ import annotations

import hashlib
from typing import Any

import boto3
import pytest
from botocore.exceptions import ClientError

from dfd import deps
from dfd.core.errors import InvalidEvent, ServiceUnavailable, TransactionRetryable
from dfd.core.notifications import ObjectRef
from dfd.core.retry import Backoff
from dfd.handlers import ingest
from dfd.ingest.service import IngestResult, Outcome
from dfdtools.replay import state
from dfdtools.tools import Target
from tests.integration.support import Aws, put, uploaded
from tests.support import LambdaContext, eventbridge, minimal_record, s3_notification, sqs_batch


def invoke(event: dict[str, Any]) -> dict[str, Any]:
    result: dict[str, Any] = ingest.handler(event, LambdaContext())
    return result


def outcomes(result: dict[str, Any]) -> list[str]:
    return [r["outcome"] for r in result["results"]]


def test_every_event_shape_ingests_and_replays_change_nothing(aws: Aws) -> None:
    bucket = aws.settings.bucket
    first = uploaded(aws, b"alpha" * 100, "a.bin")
    second = uploaded(aws, b"alpha" * 100, "b.bin")  # duplicate content
    third = uploaded(aws, b"gamma" * 100, "c.bin")
    shapes = {
        "s3": lambda key: s3_notification(bucket, key),
        "minimal": lambda key: minimal_record(bucket, key),
        "eventbridge": lambda key: eventbridge(bucket, key),
    }
    assert outcomes(invoke(shapes["s3"](first["key"]))) == ["stored"]
    assert outcomes(invoke(shapes["minimal"](second["key"]))) == ["duplicate"]
    assert outcomes(invoke(shapes["eventbridge"](third["key"]))) == ["stored"]
    aws.assert_invariants()
    before = aws.snapshot()
    for _ in range(10):
        for make in shapes.values():
            for answer in (first, second, third):
                for outcome in outcomes(invoke(make(answer["key"]))):
                    assert outcome in {"replay", "gone"}
        batch = sqs_batch(*(s3_notification(bucket, a["key"]) for a in (first, second, third)))
        assert invoke(batch) == {"batchItemFailures": []}
    assert aws.snapshot() == before
    aws.assert_invariants()


def test_same_batch_twice_in_one_sqs_event(aws: Aws) -> None:
    bucket = aws.settings.bucket
    answers = [uploaded(aws, b"x" * 64, "x1"), uploaded(aws, b"x" * 64, "x2"), uploaded(aws, b"y" * 64, "y")]
    bodies = [s3_notification(bucket, a["key"]) for a in answers]
    assert invoke(sqs_batch(*bodies, *bodies)) == {"batchItemFailures": []}
    before = aws.snapshot()
    totals = deps.repository().counter_totals()
    assert totals["total_files"] == 2 and totals["duplicates_avoided"] == 1 and totals["total_uploads"] == 3
    assert invoke(sqs_batch(*bodies, *bodies)) == {"batchItemFailures": []}
    assert aws.snapshot() == before
    aws.assert_invariants()


def test_ignored_events_touch_nothing(aws: Aws) -> None:
    bucket = aws.settings.bucket
    aws.s3.put_object(Bucket=bucket, Key="elsewhere/file.txt", Body=b"not ours")
    aws.s3.put_object(Bucket=bucket, Key="uploads/folder/", Body=b"")  # a console "folder"
    assert outcomes(invoke(s3_notification(bucket, "uploads/folder/"))) == ["ignored"]
    aws.drain()
    aws.assert_invariants()
    before = aws.snapshot()
    test_event = {"Service": "Amazon S3", "Event": "s3:TestEvent", "Bucket": bucket}
    assert invoke(sqs_batch(test_event)) == {"batchItemFailures": []}
    assert outcomes(invoke(s3_notification(bucket, "elsewhere/file.txt"))) == ["ignored"]
    assert outcomes(invoke(s3_notification("another-bucket", "uploads/x"))) == ["ignored"]
    assert outcomes(invoke(s3_notification(bucket, "uploads/never-uploaded"))) == ["gone"]
    removal = s3_notification(bucket, "uploads/x")
    removal["Records"][0]["eventName"] = "ObjectRemoved:Delete"
    assert outcomes(invoke(removal)) == []
    assert aws.snapshot() == before


@pytest.mark.parametrize("key", ["uploads/my file.txt", "uploads/c++ notes+v2.md", "uploads/résumé 日本語 ✓.pdf"])
def test_keys_with_spaces_plus_and_unicode(aws: Aws, key: str) -> None:
    bucket = aws.settings.bucket
    data = key.encode() * 10
    aws.s3.put_object(Bucket=bucket, Key=key, Body=data)
    messages = aws.drain()  # moto's own notification for the direct put
    assert messages
    assert invoke(sqs_batch(*(m["Body"] for m in messages))) == {"batchItemFailures": []}
    file = deps.repository().get_file(hashlib.sha256(data).hexdigest())
    assert file is not None and file.s3_key == key and file.filename == key.rsplit("/", 1)[-1]
    assert outcomes(invoke(s3_notification(bucket, key))) == ["replay"]  # real S3 encoding: '+' for spaces
    aws.assert_invariants()


def test_malformed_records_are_batch_failures_and_touch_nothing(aws: Aws) -> None:
    good = uploaded(aws, b"good content", "good.txt")
    before_counts = deps.repository().counter_totals()
    batch = sqs_batch(
        "not json at all",
        {"Records": [{"s3": {"bucket": {"name": aws.settings.bucket}}}]},
        {"unexpected": True},
        "",
        s3_notification(aws.settings.bucket, good["key"]),
    )
    result = invoke(batch)
    failed = {f["itemIdentifier"] for f in result["batchItemFailures"]}
    ids = [r["messageId"] for r in batch["Records"]]
    assert failed == set(ids[:4])
    totals = deps.repository().counter_totals()
    assert totals["total_files"] == before_counts["total_files"] + 1
    with pytest.raises(InvalidEvent):
        invoke({"Records": [{"s3": {"object": {"key": "uploads/x"}}}]})
    with pytest.raises(InvalidEvent):
        invoke({"hello": "world"})
    with pytest.raises(InvalidEvent):  # not encodable as UTF-8
        invoke({"Records": [{"s3": {"bucket": {"name": aws.settings.bucket}, "object": {"key": "uploads/\ud800"}}}]})
    nameless = sqs_batch(s3_notification(aws.settings.bucket, good["key"]))
    del nameless["Records"][0]["messageId"]
    with pytest.raises(InvalidEvent):  # no id to report a failure with: the batch as a whole is malformed
        invoke(nameless)
    twins = sqs_batch(s3_notification(aws.settings.bucket, good["key"]), "not json at all")
    twins["Records"][1]["messageId"] = twins["Records"][0]["messageId"]
    with pytest.raises(InvalidEvent, match="appears twice"):  # a failure reported by that id would name both
        invoke(twins)
    assert deps.repository().counter_totals() == totals
    aws.assert_invariants()


def test_late_replay_of_the_canonical_object_deletes_nothing(aws: Aws) -> None:
    data = b"canonical" * 100
    bucket = aws.settings.bucket
    # put straight into the bucket: its event record is an Events item (an upload's is carried by its upload item,
    # which does not expire)
    answer = {"key": "uploads/direct/canonical.bin"}
    aws.s3.put_object(Bucket=bucket, Key=answer["key"], Body=data)
    assert outcomes(invoke(minimal_record(bucket, answer["key"]))) == ["stored"]
    # the event record expires (TTL) — then the original event is replayed by hand
    for item in aws.ddb.scan(TableName=aws.settings.events_table)["Items"]:
        if not item["event_key"]["S"].startswith("claim#"):
            aws.ddb.delete_item(TableName=aws.settings.events_table, Key={"event_key": item["event_key"]})
    counters = deps.repository().counter_totals()
    assert outcomes(invoke(minimal_record(bucket, answer["key"]))) == ["canonical"]  # re-records the event
    before = aws.snapshot()
    for _ in range(3):
        assert outcomes(invoke(minimal_record(bucket, answer["key"]))) == ["replay"]
    assert aws.snapshot() == before
    assert deps.repository().counter_totals() == counters
    aws.assert_invariants()


def test_crash_between_commit_and_delete_is_finished_by_redelivery(aws: Aws) -> None:
    data = b"crashy" * 100
    first = uploaded(aws, data, "first")
    second = uploaded(aws, data, "second")
    bucket = aws.settings.bucket
    assert outcomes(invoke(minimal_record(bucket, first["key"]))) == ["stored"]

    class Crash(Exception):
        pass

    def crash(result: IngestResult) -> None:
        raise Crash("function died after the commit")

    crashing = deps.ingestor()
    crashing._after_commit = crash
    with pytest.raises(Crash):
        crashing.ingest(ObjectRef(bucket, second["key"]))
    crashing._after_commit = None
    # committed: counted once, but the duplicate bytes are still there
    report = aws.audit()
    assert not report.ok and any("duplicate whose bytes remain" in p for p in report.problems())
    counted = deps.repository().counter_totals()
    assert counted["duplicates_avoided"] == 1
    # the queue redelivers the message: the replay finishes the delete and counts nothing
    result = invoke(sqs_batch(s3_notification(bucket, second["key"])))
    assert result == {"batchItemFailures": []}
    assert deps.repository().counter_totals() == counted
    aws.assert_invariants()


def race_after_read(monkeypatch: pytest.MonkeyPatch, other: ObjectRef) -> None:
    """Let another delivery commit `other` right after our ingest's read and before its commit."""
    repo = deps.repository()
    real_state = repo.ingest_state

    def state_then_race(event_key: str, digest: str, upload_id: str | None, tenant_hint: str | None = None) -> Any:
        state = real_state(event_key, digest, upload_id, tenant_hint)
        monkeypatch.setattr(repo, "ingest_state", real_state)
        assert deps.ingestor().ingest(other).outcome == Outcome.STORED
        return state

    monkeypatch.setattr(repo, "ingest_state", state_then_race)


def test_lost_race_is_handled_as_duplicate(aws: Aws, monkeypatch: pytest.MonkeyPatch) -> None:
    """Another function stores the same content between our read and our commit."""
    data = b"racy" * 100
    winner = uploaded(aws, data, "winner")
    loser = uploaded(aws, data, "loser")
    bucket = aws.settings.bucket
    race_after_read(monkeypatch, ObjectRef(bucket, winner["key"]))
    result = deps.ingestor().ingest(ObjectRef(bucket, loser["key"]))
    assert result.outcome == Outcome.DUPLICATE and result.deleted and result.attempts == 2
    totals = deps.repository().counter_totals()
    assert totals["total_files"] == 1 and totals["duplicates_avoided"] == 1
    aws.assert_invariants()


def test_concurrent_delivery_of_the_same_event_counts_once(aws: Aws, monkeypatch: pytest.MonkeyPatch) -> None:
    """Two deliveries of one event race: the second commit is cancelled on the event record → replay."""
    answer = uploaded(aws, b"twice" * 100)
    ref = ObjectRef(aws.settings.bucket, answer["key"])
    race_after_read(monkeypatch, ref)
    result = deps.ingestor().ingest(ref)
    assert result.outcome == Outcome.REPLAY
    totals = deps.repository().counter_totals()
    assert totals["total_files"] == 1 and totals["total_uploads"] == 1
    aws.assert_invariants()


def _cancelled(*reasons: str) -> ClientError:
    return ClientError(
        {
            "Error": {"Code": "TransactionCanceledException", "Message": "cancelled"},
            "CancellationReasons": [{"Code": reason} for reason in reasons],
        },
        "TransactWriteItems",
    )


def test_conflicts_are_retried_with_backoff(aws: Aws, monkeypatch: pytest.MonkeyPatch) -> None:
    """TransactionConflict cancellations on the commit: retried after a pause (dfd.core.retry), committed once, counted
    once."""
    answer = uploaded(aws, b"contended" * 100)
    client = deps.repository()._db
    real = client.transact_write_items
    failures = [_cancelled("None", "TransactionConflict"), _cancelled("TransactionConflict", "None")]

    def flaky(**kwargs: Any) -> Any:
        if failures:
            raise failures.pop(0)
        return real(**kwargs)

    monkeypatch.setattr(client, "transact_write_items", flaky)
    sleeps: list[float] = []
    ingestor = deps.ingestor()
    monkeypatch.setattr(ingestor, "_backoff", Backoff(sleeps.append))
    result = ingestor.ingest(ObjectRef(aws.settings.bucket, answer["key"]))
    assert result.outcome == Outcome.STORED and result.attempts == 3
    assert len(sleeps) == 2 and all(0 < s <= Backoff.LONGEST for s in sleeps)
    totals = deps.repository().counter_totals()
    assert totals["total_files"] == 1 and totals["total_uploads"] == 1
    aws.assert_invariants()


@pytest.mark.parametrize(
    "failure",
    [
        ClientError({"Error": {"Code": "ThrottlingException", "Message": "slow down"}}, "TransactWriteItems"),
        _cancelled("None", "ThrottlingError"),
    ],
    ids=["throttled call", "throttled item"],
)
def test_throttling_botocore_gave_up_on_is_not_retried_by_the_loop(
    aws: Aws, monkeypatch: pytest.MonkeyPatch, failure: ClientError
) -> None:
    """What botocore retried and gave up on (a throttled call), or never retries (a cancellation for a throttled
    item): one attempt, 503 — the record's redelivery is the retry (dfd.core.retry), and it commits once."""
    answer = uploaded(aws, b"throttled" * 100)
    client = deps.repository()._db
    real = client.transact_write_items
    calls: list[int] = []

    def throttled(**kwargs: Any) -> Any:
        calls.append(1)
        if len(calls) == 1:
            raise failure
        return real(**kwargs)

    monkeypatch.setattr(client, "transact_write_items", throttled)
    ingestor = deps.ingestor()
    with pytest.raises(ServiceUnavailable) as raised:
        ingestor.ingest(ObjectRef(aws.settings.bucket, answer["key"]))
    assert not isinstance(raised.value, TransactionRetryable) and len(calls) == 1
    assert ingestor.ingest(ObjectRef(aws.settings.bucket, answer["key"])).outcome == Outcome.STORED
    totals = deps.repository().counter_totals()
    assert totals["total_files"] == 1 and totals["total_uploads"] == 1
    aws.assert_invariants()


def test_stored_object_overwritten_in_place_is_never_deleted(aws: Aws) -> None:
    """A direct put overwrites a stored object (bypassing the API's If-None-Match): the ingest must not
    delete what remains at that key nor count it; the audit reports the damage the overwrite did."""
    bucket = aws.settings.bucket
    notes, other = "uploads/direct/notes.txt", "uploads/other.txt"
    for key, body in ((notes, b"version one\n"), (other, b"version two\n")):
        aws.s3.put_object(Bucket=bucket, Key=key, Body=body)
        assert invoke(sqs_batch(*(m["Body"] for m in aws.drain()))) == {"batchItemFailures": []}
    counters = deps.repository().counter_totals()
    for body in (b"version two\n", b"brand new content\n"):  # a duplicate of other.txt, then new content
        aws.s3.put_object(Bucket=bucket, Key=notes, Body=body)
        aws.drain()
        result = invoke(minimal_record(bucket, notes))["results"][0]
        assert result["outcome"] == "conflict" and result["deleted"] is False
        assert result["stored_hash"] == hashlib.sha256(b"version one\n").hexdigest()
        assert outcomes(invoke(minimal_record(bucket, notes))) == ["replay"]
    keys = {o["Key"] for o in aws.s3.list_objects_v2(Bucket=bucket)["Contents"]}
    assert keys == {notes, other}
    assert deps.repository().counter_totals() == counters
    assert deps.repository().get_file(hashlib.sha256(b"brand new content\n").hexdigest()) is None
    now_there = hashlib.sha256(b"brand new content\n").hexdigest()
    recorded = hashlib.sha256(b"version one\n").hexdigest()
    assert aws.audit().problems() == [
        "1. one FileMetadata item per content; its object exists and hashes to its key: "
        f"{notes} hashes to {now_there}, its record says {recorded} (invariant 6)"
    ]


def test_second_put_with_the_same_url_after_a_duplicate_was_deleted(aws: Aws) -> None:
    """The duplicate's bytes are deleted, so If-None-Match lets the still-valid URL PUT again: that version is
    not an upload of its own — deleted, never counted, and the upload keeps its outcome."""
    bucket = aws.settings.bucket
    aws.s3.put_object(Bucket=bucket, Key="uploads/direct/orig.txt", Body=b"AAAA")
    invoke(sqs_batch(*(m["Body"] for m in aws.drain())))
    answer = uploaded(aws, b"AAAA", "mine.txt")
    assert outcomes(invoke(minimal_record(bucket, answer["key"]))) == ["duplicate"]
    counters = deps.repository().counter_totals()
    assert put(answer, b"BBBB").status_code == 200  # same size, no checksum signed: S3 accepts it
    aws.drain()
    result = invoke(minimal_record(bucket, answer["key"]))["results"][0]
    assert result["outcome"] == "rejected" and result["deleted"] is True
    assert outcomes(invoke(minimal_record(bucket, answer["key"]))) == ["gone"]
    assert deps.repository().counter_totals() == counters
    upload = deps.repository().get_upload(answer["upload_id"])
    # physically a duplicate of the direct put, new for alice's tenant: her upload is (and stays) stored
    assert upload is not None and upload.status == "stored"
    aws.assert_invariants()


def test_multipart_checksum_is_not_taken_for_the_content_hash(aws: Aws) -> None:
    """A multipart upload's SHA-256 checksum is a checksum of part checksums: the content is hashed instead,
    on both read strategies (the checksum hint in the key chooses HEAD-first)."""
    bucket = aws.settings.bucket
    parts = [b"a" * (5 * 1024 * 1024), b"b" * 100]
    for key in ("uploads/multipart.bin", "uploads/" + "0" * 31 + "1"):
        started = aws.s3.create_multipart_upload(Bucket=bucket, Key=key, ChecksumAlgorithm="SHA256")
        done = []
        for number, body in enumerate(parts, 1):
            part = aws.s3.upload_part(
                Bucket=bucket,
                Key=key,
                UploadId=started["UploadId"],
                PartNumber=number,
                Body=body + key.encode(),
                ChecksumAlgorithm="SHA256",
            )
            done.append({"PartNumber": number, "ETag": part["ETag"], "ChecksumSHA256": part["ChecksumSHA256"]})
        aws.s3.complete_multipart_upload(
            Bucket=bucket, Key=key, UploadId=started["UploadId"], MultipartUpload={"Parts": done}
        )
        aws.drain()
        result = invoke(minimal_record(bucket, key))["results"][0]
        assert result["outcome"] == "stored"
        assert result["hash"] == hashlib.sha256(b"".join(p + key.encode() for p in parts)).hexdigest()
    aws.assert_invariants()


def test_replay_tool_state_counts_the_counters_not_reconciles_audit_records(aws: Aws) -> None:
    """scripts/replay compares state before and after; a reconcile sweep writing its audit record into the
    counters table meanwhile is not a change the replay made (CI saw exactly that flake)."""
    where = Target(aws.settings, boto3.Session(region_name=aws.ddb.meta.region_name), None)
    answer = uploaded(aws, b"delta" * 100, "d.bin")
    invoke(s3_notification(aws.settings.bucket, answer["key"]))
    before = state(where)
    assert before["counter.total_files"] == 1 and before["files"] == 1 and before["objects"] == 1
    audit_record = {"counter_id": {"S": "audit#2026-11-23T00:00:00Z"}, "before_files": {"N": "18"}}
    aws.ddb.put_item(TableName=aws.settings.counters_table, Item=audit_record | {"after_bytes": {"N": "9"}})
    assert state(where) == before
    invoke(s3_notification(aws.settings.bucket, uploaded(aws, b"delta" * 100, "e.bin")["key"]))
    after = state(where)
    assert after["counter.duplicates_avoided"] == before["counter.duplicates_avoided"] + 1
