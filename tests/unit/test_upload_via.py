"""How an upload's object came in (UploadRecord.via, dfd.core.records.UploadVia), on the fakes: each path that
creates an upload record names its own, the item keeps it through the ingest, the API's views show it and the
upload's events carry it; an item written before dfd kept it reads as its attributes prove (dfd.uploads.codec)."""

from __future__ import annotations

import json
import random
from datetime import timedelta
from typing import Any

import pytest

from dfd.adapters.eventbridge import entry
from dfd.adapters.publisher import publish
from dfd.core.config import MIB
from dfd.core.records import UploadRecord, UploadVia
from dfd.events.outcomes import upload_events
from dfd.identity.s3access import prefix_for
from dfd.ingest.service import Ingestor, Outcome
from dfd.lfs.batch import LfsService
from dfd.queries.views import listed_upload_view, upload_view
from dfd.uploads import codec as uploads_codec
from dfd.uploads.ports import NewUpload
from dfd.uploads.service import UploadRequest, UploadService
from tests.support import ALICE, BOB
from tests.unit.feed import TABLES, FakeStream, RecordingSink
from tests.unit.ingest_world import BUCKET, NOW, World, expect, sha

AT = "2026-03-01T12:00:00.000Z"


@pytest.fixture
def world() -> World:
    return World()


def record(world: World, upload_id: str) -> UploadRecord:
    found = world.repo.get_upload(upload_id)
    assert found is not None
    return found


def upload_id_of(key: str) -> str:
    return key.rsplit("/", 1)[1]


def shown(upload: UploadRecord) -> tuple[Any, Any]:
    """`via` as GET /metadata/{id} and GET /uploads show it."""
    return upload_view(upload, None).get("via"), listed_upload_view(upload).get("via")


def published_via(old: UploadRecord | None, new: UploadRecord) -> Any:
    """`via` in the detail of the one event a change of the upload publishes."""
    (event,) = upload_events(old, new, committed_at=AT)
    return json.loads(entry(event, "bus")["Detail"])["via"]


def published(stream: FakeStream) -> list[tuple[str, Any]]:
    """What the publisher puts on the bus for the items changed since the last call, as the tables' stream delivers
    them (item images, decoded by the codec): (detail type, `via` of its detail) per Upload event."""
    sink = RecordingSink()
    assert not publish(stream.drain(), TABLES, sink).failed
    details = [(e.detail_type.value, json.loads(entry(e, "bus")["Detail"])) for e in sink.taken]
    return [(kind, detail["via"]) for kind, detail in details if kind.startswith("Upload ")]


# ---------------------------------------------------------------------------------------- each path names its own
def test_a_presigned_put_is_presigned_from_registration_to_its_events(world: World) -> None:
    stream = FakeStream(world.repo)
    key = world.upload(b"a browser upload")
    pending = record(world, upload_id_of(key))
    assert pending.via == UploadVia.PRESIGNED and shown(pending) == ("presigned", "presigned")
    assert published(stream) == []  # registering is no outcome
    expect(world.ingest(key), Outcome.STORED)
    stored = record(world, upload_id_of(key))
    assert stored.via == UploadVia.PRESIGNED  # the ingest's commit keeps it
    assert published(stream) == [("Upload Stored", "presigned")]
    duplicate = world.upload(b"a browser upload", "again.txt", user=BOB)  # another tenant: sent, deduplicated
    expect(world.ingest(duplicate), Outcome.DUPLICATE)
    assert published(stream) == [("Upload Deduplicated", "presigned")]


def test_a_multipart_upload_is_multipart(world: World) -> None:
    request = UploadRequest("big.bin", 6 * MIB, "application/octet-stream", None, multipart=True)
    answer = world.service().create(request, ALICE.caller)
    assert answer.status == 201 and answer.body["multipart"] is True
    pending = record(world, answer.body["upload_id"])
    assert pending.via == UploadVia.MULTIPART and shown(pending) == ("multipart", "multipart")


def test_a_git_lfs_push_is_lfs(world: World) -> None:
    uploads = UploadService(world.settings, world.repo, world.objects, now=lambda: NOW, rng=random.Random(3))
    ingest = Ingestor(world.settings, world.repo, world.objects, now=lambda: NOW, sleep=world.sleeps.append).ingest
    lfs = LfsService(world.settings, world.repo, world.objects, uploads, ingest, max_objects=5)
    data = b"an lfs object"
    body = {"operation": "upload", "objects": [{"oid": sha(data), "size": len(data)}]}
    actions = lfs.batch(ALICE.caller, "game", body, "https://api.example")["objects"][0]["actions"]
    upload_id = actions["verify"]["href"].rsplit("/", 1)[1]
    assert record(world, upload_id).via == UploadVia.LFS


def test_the_precheck_answer_is_precheck(world: World) -> None:
    data = b"held by the tenant"
    stream = FakeStream(world.repo)
    expect(world.ingest(world.upload(data)), Outcome.STORED)
    assert published(stream) == [("Upload Stored", "presigned")]
    answer = world.service().create(UploadRequest("again.txt", len(data), "text/plain", sha(data)), ALICE.caller)
    assert answer.status == 409
    duplicate = record(world, answer.body["upload_id"])
    assert duplicate.via == UploadVia.PRECHECK and shown(duplicate) == ("precheck", "precheck")
    assert published(stream) == [("Upload Deduplicated", "precheck")]


def test_an_object_written_with_s3_credentials_is_s3_and_published_so(world: World) -> None:
    stream = FakeStream(world.repo)
    key = prefix_for(ALICE.caller.tenant, ALICE.caller.owner) + "dir/a.txt"
    world.objects.put(BUCKET, key, b"from aws s3 cp", content_type="text/plain")
    moved = world.ingest(key)
    expect(moved, Outcome.MOVED)
    assert moved.upload_id is not None
    pending = record(world, moved.upload_id)
    assert pending.via == UploadVia.S3 and shown(pending) == ("s3", "s3")
    expect(world.ingest(f"uploads/{moved.upload_id}"), Outcome.STORED)
    assert record(world, moved.upload_id).via == UploadVia.S3
    assert published(stream) == [("Upload Stored", "s3")]
    empty = prefix_for(ALICE.caller.tenant, ALICE.caller.owner) + "empty.txt"
    world.objects.put(BUCKET, empty, b"", content_type="text/plain")
    refused = world.ingest(empty)
    expect(refused, Outcome.REJECTED)
    assert refused.upload_id is not None and record(world, refused.upload_id).via == UploadVia.S3
    assert published(stream) == [("Upload Rejected", "s3")]


def test_an_object_put_straight_into_the_bucket_is_bucket(world: World) -> None:
    stream = FakeStream(world.repo)
    upload_id = "b" * 31 + "0"
    world.objects.put(BUCKET, f"uploads/{upload_id}", b"put by an admin's tool", content_type="text/plain")
    expect(world.ingest(f"uploads/{upload_id}"), Outcome.STORED)
    stored = record(world, upload_id)
    assert stored.owner is None and stored.via == UploadVia.BUCKET
    assert world.repo.uploads[upload_id]["via"] == "bucket"  # written by the commit that created the item
    assert upload_view(stored, None)["via"] == "bucket"
    assert published(stream) == [("Upload Stored", "bucket")]


# ---------------------------------------------------------------------------------------- the item
@pytest.mark.parametrize("via", list(UploadVia))
def test_the_codec_keeps_each_value(via: UploadVia) -> None:
    upload = NewUpload(
        "c" * 32, "f.bin", 10, "text/plain", None, "uploads/" + "c" * 32, BUCKET, NOW + timedelta(hours=1),
        owner="o", tenant="t", via=via,
    )  # fmt: skip
    item = uploads_codec.pending_upload_item(upload, NOW, reconcile_after=NOW, pending_shard="p#0", ttl=1)
    assert item["via"] == via.value
    assert uploads_codec.upload_record(item).via == via
    rejected = uploads_codec.rejected_upload_item(upload, "too_large", NOW, ttl=1)
    assert uploads_codec.upload_record(rejected).via == via


def _legacy(**attributes: Any) -> dict[str, Any]:
    """An upload item as written before `via` was kept."""
    base = {"upload_id": "d" * 32, "status": "stored", "owner": "o", "tenant": "t", "s3_key": "uploads/" + "d" * 32}
    return {**base, **attributes}


@pytest.mark.parametrize(
    ("item", "via"),
    [
        (_legacy(owner=None, tenant=None), UploadVia.BUCKET),  # no owner: only a direct put's commit makes one
        (_legacy(multipart=True, part_size=5 * MIB, part_count=2), UploadVia.MULTIPART),
        (_legacy(s3_key=None, status="duplicate"), UploadVia.PRECHECK),  # no object key: the precheck's answer
        (_legacy(), None),  # a presigned PUT of POST /upload or /lfs, or a drop-zone object: the item cannot say
        (_legacy(multipart=True, via="multipart"), UploadVia.MULTIPART),  # written: read as is
        (_legacy(owner=None, via="bucket"), UploadVia.BUCKET),
    ],
)
def test_an_item_without_via_reads_as_its_attributes_prove(item: dict[str, Any], via: UploadVia | None) -> None:
    upload = uploads_codec.upload_record(item)
    assert upload.via == via
    if via is None:  # not recorded: the API leaves it out, the events say null
        assert "via" not in upload_view(upload, None) and "via" not in listed_upload_view(upload)
        pending = uploads_codec.upload_record({**item, "status": "pending"})
        assert published_via(pending, upload) is None


def test_a_legacy_pending_upload_keeps_no_via_through_its_ingest(world: World) -> None:
    """The commit names `bucket` only on an item it creates: a registered upload written before `via` was kept
    stays unrecorded (None), never a direct put."""
    key = world.upload(b"registered before via")
    upload_id = upload_id_of(key)
    del world.repo.uploads[upload_id]["via"]
    expect(world.ingest(key), Outcome.STORED)
    assert "via" not in world.repo.uploads[upload_id] and record(world, upload_id).via is None
