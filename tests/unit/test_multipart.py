"""dfd.uploads.multipart on the in-memory ports: part-size math, validation, ownership, resume, complete, abort."""

from __future__ import annotations

import base64
import hashlib
from datetime import UTC, datetime
from typing import Any

import pytest

from dfd.core.config import GIB, MIB, TIB, Settings
from dfd.core.errors import BadRequest, Conflict, Forbidden, NotFound, ValidationFailed
from dfd.identity.caller import Caller
from dfd.uploads.multipart import MAX_PARTS, MultipartService, part_layout, part_length
from dfd.uploads.service import UploadService, parse_request
from tests.unit.callers import ADMIN, ALICE, BOB, CAROL, settings
from tests.unit.fakes import FakeObjectStore, FakeRepository

NOW = datetime(2026, 3, 1, 12, 0, 0, tzinfo=UTC)
SIZE = 12 * MIB + 123  # 3 parts of 5 MiB: 5, 5, 2 MiB + 123


@pytest.fixture
def world() -> tuple[MultipartService, FakeRepository, FakeObjectStore]:
    s = settings()
    repo, objects = FakeRepository(s), FakeObjectStore()
    return MultipartService(s, repo, objects, now=lambda: NOW), repo, objects


def create(service: MultipartService, caller: Caller = ALICE, size: int = SIZE) -> str:
    body = service.create(caller, filename="big.bin", size=size, content_type="application/octet-stream", sha256=None)
    return str(body["upload_id"])


def b64sha(data: bytes) -> str:
    return base64.b64encode(hashlib.sha256(data).digest()).decode()


@pytest.mark.parametrize(
    ("size", "minimum", "part_size", "count"),
    [
        (5 * MIB, 5 * MIB, 5 * MIB, 1),
        (SIZE, 5 * MIB, 5 * MIB, 3),
        (64 * MIB, 8 * MIB, 8 * MIB, 8),
        (64 * MIB + 1, 8 * MIB, 8 * MIB, 9),
        (100 * GIB, 8 * MIB, 11 * MIB, 9310),  # ⌈100 GiB / 10,000⌉ = 10.24 MiB → 11 MiB
        (5 * TIB, 8 * MIB, 525 * MIB, 9987),
        (10_000 * 5 * GIB, 8 * MIB, 5 * GIB, 10_000),  # S3's largest object (48.8 TiB): 10,000 parts of 5 GiB
    ],
)
def test_part_layout(size: int, minimum: int, part_size: int, count: int) -> None:
    assert part_layout(size, minimum) == (part_size, count)
    assert count <= MAX_PARTS and part_size % MIB == 0 and part_size <= 5 * GIB
    assert sum(part_length(size, part_size, n) for n in range(1, count + 1)) == size
    assert 0 < part_length(size, part_size, count) <= part_size


def test_upload_service_delegates_and_single_puts_say_so() -> None:
    s = settings()
    repo, objects = FakeRepository(s), FakeObjectStore()
    uploads = UploadService(s, repo, objects, now=lambda: NOW)
    single = uploads.create(parse_request({"filename": "a", "size": MIB}, s.max_upload_bytes), ALICE)
    assert single.status == 201 and single.body["multipart"] is False and "upload_url" in single.body
    asked = parse_request({"filename": "a", "size": 6 * MIB, "multipart": True}, s.max_upload_bytes)
    answer = uploads.create(asked, ALICE)
    assert answer.body["multipart"] is True and answer.body["part_count"] == 2 and "upload_url" not in answer.body
    record = repo.uploads[answer.body["upload_id"]]
    assert record["owner"] == ALICE.owner and record["tenant"] == "acme" and "s3_upload_id" not in record
    by_size = uploads.create(parse_request({"filename": "a", "size": 10 * MIB}, s.max_upload_bytes), ALICE)
    assert by_size.body["multipart"] is True
    huge = parse_request({"filename": "a", "size": 6 * GIB}, 5 * TIB)
    assert uploads.is_multipart(huge)
    with pytest.raises(ValidationFailed):
        parse_request({"filename": "a", "size": 5 * MIB - 1, "multipart": True}, s.max_upload_bytes)
    with pytest.raises(ValidationFailed):
        parse_request({"filename": "a", "size": 6 * MIB, "multipart": "yes"}, s.max_upload_bytes)


def test_client_part_size() -> None:
    s = settings()
    uploads = UploadService(s, FakeRepository(s), FakeObjectStore(), now=lambda: NOW)
    asked = parse_request({"filename": "a", "size": 20 * MIB + 1, "multipart": True, "part_size": 6 * MIB}, GIB)
    answer = uploads.create(asked, ALICE)
    assert (answer.body["part_size"], answer.body["part_count"]) == (6 * MIB, 4)
    # the server's layout when none is given; unaligned sizes are fine (S3 has no alignment rule)
    by_threshold = uploads.create(
        parse_request({"filename": "a", "size": 12 * MIB, "part_size": 7 * MIB + 3}, GIB), ALICE
    )
    assert (by_threshold.body["part_size"], by_threshold.body["part_count"]) == (7 * MIB + 3, 2)
    # null, like the request's other optional fields, is the server's layout (docs/openapi.yaml says so)
    assert parse_request({"filename": "a", "size": 12 * MIB, "part_size": None}, GIB).part_size is None


@pytest.mark.parametrize(
    ("part_size", "size", "message"),
    [
        ("8388608", 20 * MIB, "integer"),
        (True, 20 * MIB, "integer"),
        (5 * MIB - 1, 20 * MIB, "between"),
        (5 * GIB + 1, 20 * GIB, "between"),
        (5 * MIB, 5 * MIB * MAX_PARTS + 1, "more than 10000 parts; use at least 5242881"),
    ],
)
def test_client_part_size_refused(part_size: Any, size: int, message: str) -> None:
    with pytest.raises(ValidationFailed, match=message) as refused:
        parse_request({"filename": "a", "size": size, "part_size": part_size}, 5 * TIB)
    assert refused.value.details is not None and refused.value.details["field"] == "part_size"


def test_settings_bounds() -> None:
    with pytest.raises(Exception, match="MULTIPART_MIN_PART_BYTES"):
        settings(multipart_min_part=4 * MIB)
    assert (
        Settings.from_env(
            {
                "DDB_TABLE": "f",
                "DDB_COUNTERS_TABLE": "c",
                "UPLOADS_TABLE": "u",
                "EVENTS_TABLE": "e",
                "TENANT_FILES_TABLE": "t",
                "S3_BUCKET": "b",
                "MULTIPART_THRESHOLD_BYTES": str(5 * MIB),
                "MAX_UPLOAD_BYTES": str(5 * TIB),
            }
        ).multipart_threshold
        == 5 * MIB
    )


@pytest.mark.parametrize(
    "body",
    [
        None,
        [],
        {"parts": []},
        {"parts": [{"part_number": 0}]},
        {"parts": [{"part_number": 4}]},
        {"parts": [{"part_number": True}]},
        {"parts": [{"part_number": 1}, {"part_number": 1}]},
        {"parts": [{"part_number": 1, "checksum_sha256": "not base64!"}]},
        {"parts": [{"part_number": 1, "checksum_sha256": base64.b64encode(b"x" * 31).decode()}]},
        {"parts": [{"part_number": 1, "extra": 1}]},
        {"parts": [{"part_number": 1}], "extra": 1},
        {"parts": [{"part_number": 1}] * 101},
    ],
)
def test_bad_parts_requests_are_400(world: Any, body: Any) -> None:
    service, _, objects = world
    upload_id = create(service)
    with pytest.raises(ValidationFailed):
        service.presign_parts(ALICE, upload_id, body)
    assert not objects.multiparts  # nothing created for a refused request


def test_ownership(world: Any) -> None:
    service, _, _ = world
    upload_id = create(service)
    with pytest.raises(NotFound):
        service.list_parts(BOB, upload_id)
    with pytest.raises(Forbidden) as refused:
        service.presign_parts(CAROL, upload_id, {"parts": [{"part_number": 1}]})
    assert refused.value.code == "not_owner"
    with pytest.raises(NotFound):
        service.complete(BOB, "0" * 32, None)
    with pytest.raises(BadRequest) as malformed:
        service.complete(ALICE, "not-an-id", None)
    assert malformed.value.code == "invalid_id"
    assert service.list_parts(ADMIN, upload_id)["parts"] == []


def test_single_put_upload_is_not_multipart(world: Any) -> None:
    service, repo, objects = world
    uploads = UploadService(service._s, repo, objects, now=lambda: NOW)
    single = uploads.create(parse_request({"filename": "a", "size": MIB}, MIB * 100), ALICE)
    with pytest.raises(Conflict) as refused:
        service.complete(ALICE, single.body["upload_id"], None)
    assert refused.value.code == "not_multipart"


def test_parts_resume_complete_and_complete_again(world: Any) -> None:
    service, repo, objects = world
    upload_id = create(service)
    data = bytes(range(256)) * (SIZE // 256) + b"x" * (SIZE % 256)
    chunks = [data[i : i + 5 * MIB] for i in range(0, SIZE, 5 * MIB)]
    answer = service.presign_parts(ALICE, upload_id, {"parts": [{"part_number": 1}, {"part_number": 3}]})
    assert [p["headers"]["content-length"] for p in answer["parts"]] == [str(5 * MIB), str(2 * MIB + 123)]
    s3_upload_id = repo.uploads[upload_id]["s3_upload_id"]
    assert objects.multiparts[s3_upload_id]["checksum"] is False
    objects.upload_part(s3_upload_id, 1, chunks[0])
    objects.upload_part(s3_upload_id, 3, chunks[2][:-1])  # one byte short
    listed = service.list_parts(ALICE, upload_id)
    assert [(p["part_number"], p["size"]) for p in listed["parts"]] == [(1, 5 * MIB), (3, 2 * MIB + 122)]
    assert listed["part_count"] == 3 and listed["status"] == "pending"
    with pytest.raises(Conflict) as incomplete:
        service.complete(ALICE, upload_id, None)
    assert incomplete.value.code == "incomplete"
    assert incomplete.value.details == {"missing": [2], "wrong_size": [3]}
    # checksums given later are not signed: the upload was created without them
    later = service.presign_parts(ALICE, upload_id, {"parts": [{"part_number": 2, "checksum_sha256": b64sha(b"")}]})
    assert "x-amz-checksum-sha256" not in later["parts"][0]["headers"]
    objects.upload_part(s3_upload_id, 2, chunks[1])
    objects.upload_part(s3_upload_id, 3, chunks[2])
    with pytest.raises(Conflict) as mismatch:
        service.complete(ALICE, upload_id, {"parts": [{"part_number": 1, "etag": '"nope"'}]})
    assert mismatch.value.code == "etag_mismatch"
    assert service.complete(ALICE, upload_id, None) == {"upload_id": upload_id, "status": "pending"}
    assert objects.objects[("b", repo.uploads[upload_id]["s3_key"])].data == data
    assert repo.uploads[upload_id]["completed_at"]
    assert service.complete(ALICE, upload_id, None) == {"upload_id": upload_id, "status": "pending"}
    # a lost answer: the record does not know, S3 has no such upload any more, the object exists
    del repo.uploads[upload_id]["completed_at"]
    assert service.complete(ALICE, upload_id, None) == {"upload_id": upload_id, "status": "pending"}
    with pytest.raises(Conflict) as after:
        service.presign_parts(ALICE, upload_id, {"parts": [{"part_number": 1}]})
    assert after.value.code == "not_pending" and after.value.details == {"status": "completed"}
    repo.uploads[upload_id]["status"] = "stored"
    assert service.complete(ALICE, upload_id, None) == {"upload_id": upload_id, "status": "stored"}
    with pytest.raises(Conflict) as processed:
        service.list_parts(ALICE, upload_id)
    assert processed.value.code == "not_pending" and processed.value.details == {"status": "stored"}


def test_checksummed_upload_requires_every_checksum(world: Any) -> None:
    service, repo, objects = world
    upload_id = create(service)
    checksum = b64sha(b"part one")
    answer = service.presign_parts(ALICE, upload_id, {"parts": [{"part_number": 1, "checksum_sha256": checksum}]})
    assert answer["parts"][0]["headers"]["x-amz-checksum-sha256"] == checksum
    assert objects.multiparts[repo.uploads[upload_id]["s3_upload_id"]]["checksum"] is True
    with pytest.raises(ValidationFailed) as refused:
        service.presign_parts(ALICE, upload_id, {"parts": [{"part_number": 2}]})
    assert refused.value.code == "checksum_required" and refused.value.details == {"parts": [2]}


def test_concurrent_first_calls_keep_one_s3_upload(world: Any) -> None:
    service, repo, objects = world
    upload_id = create(service)
    record = repo.get_upload(upload_id)
    assert record is not None
    first = service._ensure_s3_upload(record, checksums=False)
    second = service._ensure_s3_upload(record, checksums=True)  # read before the first attached
    assert second.s3_upload_id == first.s3_upload_id and len(objects.aborted) == 1
    assert list(objects.multiparts) == [first.s3_upload_id]


def test_abort(world: Any) -> None:
    service, repo, objects = world
    upload_id = create(service)
    service.presign_parts(ALICE, upload_id, {"parts": [{"part_number": 1}]})
    with pytest.raises(Forbidden):
        service.abort(CAROL, upload_id)
    assert service.abort(ALICE, upload_id) == {"upload_id": upload_id, "status": "deleted"}
    assert not objects.multiparts and repo.uploads[upload_id]["status"] == "deleted"
    # its bytes held against the tenant's quota are released with the status (docs/design/choices.md, "Quotas")
    assert "quota_bytes" not in repo.uploads[upload_id] and repo.tenant_usage("acme").pending_count == 0
    assert repo.tenant_usage("acme").used_bytes == 0
    with pytest.raises(Conflict) as again:
        service.abort(ALICE, upload_id)
    assert again.value.code == "not_pending"
    with pytest.raises(Conflict):
        service.complete(ALICE, upload_id, None)


def test_the_fake_store_refuses_a_part_below_its_minimum_but_the_last() -> None:
    """S3's EntityTooSmall (tests/unit/test_s3store.py shows the adapter's on moto): a part under the minimum that
    is not the last; the same at a lowered minimum, as the simulation configures it."""
    from dfd.core.errors import PartsRejected
    from dfd.core.objects import PartInfo

    for minimum in (5 * MIB, 64):
        objects = FakeObjectStore(min_part=minimum)
        s3_upload_id = objects.create_multipart("b", "k", content_type="x/y", checksum=False)
        sizes = (minimum - 1, minimum)
        etags = [objects.upload_part(s3_upload_id, n, b"x" * size) for n, size in enumerate(sizes, 1)]
        parts = [PartInfo(n, etag, size, None) for n, (etag, size) in enumerate(zip(etags, sizes, strict=True), 1)]
        with pytest.raises(PartsRejected) as refused:
            objects.complete_multipart("b", "k", s3_upload_id, parts, size=sum(sizes))
        assert refused.value.details == {"s3_code": "EntityTooSmall"} and ("b", "k") not in objects.objects
        etag = objects.upload_part(s3_upload_id, 1, b"x" * minimum)  # the same part at the minimum: accepted
        parts[0] = PartInfo(1, etag, minimum, None)
        objects.complete_multipart("b", "k", s3_upload_id, parts, size=2 * minimum)
        assert len(objects.objects[("b", "k")].data) == 2 * minimum


def test_a_lowered_store_minimum_lays_out_parts_of_that_size() -> None:
    """The simulation's store takes parts of 64 bytes: the service lays them out to the byte, refuses fewer bytes
    than one part; the default (S3's 5 MiB) still refuses an upload under 5 MiB."""
    s = settings()
    repo, objects = FakeRepository(s), FakeObjectStore(min_part=64)
    small = MultipartService(s, repo, objects, now=lambda: NOW, s3_min_part=64, min_part=64)
    body = small.create(ALICE, filename="f", size=130, content_type="application/octet-stream", sha256=None)
    assert (body["part_size"], body["part_count"]) == (64, 3)
    with pytest.raises(ValidationFailed):
        small.create(ALICE, filename="f", size=63, content_type="application/octet-stream", sha256=None)
    with pytest.raises(ValidationFailed):
        MultipartService(s, repo, objects, now=lambda: NOW).create(
            ALICE, filename="f", size=5 * MIB - 1, content_type="application/octet-stream", sha256=None
        )
    assert part_layout(130, 64, 64) == (64, 3) and part_layout(130, 64) == (MIB, 1)


def test_max_upload_bytes_reaches_s3_s_largest_object_and_no_further() -> None:
    from dfd.core.config import S3_MAX_OBJECT, ConfigError

    base = {"DDB_TABLE": "f", "DDB_COUNTERS_TABLE": "c", "UPLOADS_TABLE": "u", "EVENTS_TABLE": "e"}
    base |= {"TENANT_FILES_TABLE": "t", "S3_BUCKET": "b"}
    assert S3_MAX_OBJECT == 53_687_091_200_000  # 48.8 TiB
    assert Settings.from_env(base | {"MAX_UPLOAD_BYTES": str(S3_MAX_OBJECT)}).max_upload_bytes == S3_MAX_OBJECT
    with pytest.raises(ConfigError):
        Settings.from_env(base | {"MAX_UPLOAD_BYTES": str(S3_MAX_OBJECT + 1)})
    # POST /upload of the largest object: multipart, 10,000 parts of 5 GiB
    request = parse_request({"filename": "vm.img", "size": S3_MAX_OBJECT}, S3_MAX_OBJECT)
    assert part_layout(request.size, 8 * MIB) == (5 * GIB, MAX_PARTS)
