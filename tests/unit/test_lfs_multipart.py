"""The batch's transfer negotiation (dfd.lfs.batch): `basic` for every client as before, `dfd-multipart` for an
object past the single-PUT limit when the client offers it — registered by MultipartService, completed through
the same parts and the same ingest — and the verify of a registration a resumed upload replaced."""

from __future__ import annotations

import base64
import hashlib
import random
from dataclasses import replace
from typing import Any

import pytest

from dfd.core.config import ConfigError
from dfd.core.notifications import ObjectRef
from dfd.core.records import UploadStatus
from dfd.ingest.service import Ingestor
from dfd.lfs.batch import MULTIPART, LfsError, LfsService, basic_max_bytes
from dfd.uploads.service import UploadService
from tests.support import ALICE, BOB
from tests.unit.ingest_world import BUCKET, NOW, World

BASE = "https://api.example"
MIB = 1024 * 1024
GIB = 1024 * MIB
LIMIT = 6 * MIB  # the single-PUT limit of these tests (LfsBasicMaxBytes lowered)
AUTH = "Basic Z2l0OmRmZF9wYXRfeA=="
BOTH = ["basic", MULTIPART]


class Lfs(World):
    def lfs(self) -> LfsService:
        uploads = UploadService(self.settings, self.repo, self.objects, now=lambda: NOW, rng=random.Random(3))
        ingestor = Ingestor(self.settings, self.repo, self.objects, now=lambda: NOW, sleep=self.sleeps.append)
        return LfsService(self.settings, self.repo, self.objects, uploads, ingestor.ingest, basic_max_bytes=LIMIT)

    def batch(self, objects: list[dict[str, Any]], transfers: list[str] | None = None, user: Any = ALICE) -> Any:
        body: dict[str, Any] = {"operation": "upload", "objects": objects}
        if transfers is not None:
            body["transfers"] = transfers
        return self.lfs().batch(user.caller, "game", body, BASE, AUTH)

    def ingest(self, upload_id: str) -> None:
        """The ingest of the upload's S3 event (the poller's, on the local stack)."""
        record = self.repo.get_upload(upload_id)
        assert record is not None
        self.ingestor().ingest(ObjectRef(BUCKET, str(record.s3_key)))

    def send_parts(self, upload_id: str, data: bytes, numbers: list[int] | None = None, user: Any = ALICE) -> None:
        """What the agent does with a multipart action: presign with SHA-256s, PUT each part (to the fake S3)."""
        multipart = self.lfs().multipart
        record = self.repo.get_upload(upload_id)
        assert record is not None
        part_size, count = record.part_size, record.part_count
        wanted = numbers or list(range(1, count + 1))
        chunks = {n: data[(n - 1) * part_size : n * part_size] for n in wanted}
        checksums = {n: base64.b64encode(hashlib.sha256(chunk).digest()).decode() for n, chunk in chunks.items()}
        body = {"parts": [{"part_number": n, "checksum_sha256": checksums[n]} for n in wanted]}
        multipart.presign_parts(user.caller, upload_id, body)
        record = self.repo.get_upload(upload_id)
        assert record is not None and record.s3_upload_id
        for number, chunk in chunks.items():
            self.objects.upload_part(record.s3_upload_id, number, chunk, checksums[number])


@pytest.fixture
def world() -> Lfs:
    return Lfs()


def obj(data: bytes) -> dict[str, Any]:
    return {"oid": hashlib.sha256(data).hexdigest(), "size": len(data)}


def big(size: int = LIMIT + 1, seed: int = 1) -> bytes:
    return random.Random(seed).randbytes(size)


def test_basic_only_an_object_past_the_single_put_limit_is_refused_naming_the_limit_and_the_agent(world: Lfs) -> None:
    for transfers in (None, ["basic"], ["basic", "lfs-standalone-file", "ssh"]):
        answer = world.batch([{"oid": "a" * 64, "size": LIMIT + 1}, {"oid": "b" * 64, "size": LIMIT}], transfers)
        assert answer["transfer"] == "basic"
        refused, fits = answer["objects"]
        assert refused["error"]["code"] == 422
        message = refused["error"]["message"]
        assert f"from 1 to {LIMIT} bytes (the basic transfer's largest" in message
        assert "scripts/lfs-agent install" in message and MULTIPART in message
        assert fits["actions"]["upload"]["href"].startswith("https://fake-s3/")  # basic's presigned PUT
    assert not any(u.get("multipart") for u in world.repo.uploads.values())


def test_offered_an_object_past_the_limit_is_a_multipart_upload_of_the_same_registration(world: Lfs) -> None:
    data = big()
    answer = world.batch([obj(data)], BOTH)
    assert answer["transfer"] == MULTIPART and answer["hash_algo"] == "sha256"
    actions = answer["objects"][0]["actions"]
    upload_id = actions["upload"]["header"]["Upload-Id"]
    record = world.repo.get_upload(upload_id)
    assert record is not None and record.multipart and record.status == UploadStatus.PENDING
    assert record.sha256 == obj(data)["oid"] and record.tenant == "acme"
    assert actions["upload"]["href"] == f"{BASE}/lfs/game"
    assert actions["upload"]["header"] == {
        "Upload-Id": upload_id,
        "Part-Size": str(record.part_size),
        "Part-Count": str(record.part_count),
        "Authorization": AUTH,
    }
    assert actions["verify"]["href"] == f"{BASE}/lfs/game/verify/{upload_id}"
    assert record.part_count * record.part_size >= len(data) > (record.part_count - 1) * record.part_size
    assert world.repo.tenant_usage("acme").pending_bytes == len(data)  # the quota write of every registration


def test_a_multipart_upload_completes_and_verifies_through_the_one_ingest(world: Lfs) -> None:
    data = big(3 * LIMIT)
    answer = world.batch([obj(data)], BOTH)["objects"][0]
    upload_id = answer["actions"]["upload"]["header"]["Upload-Id"]
    world.send_parts(upload_id, data)
    done = world.lfs().multipart.complete(ALICE.caller, upload_id, None)
    assert done == {"upload_id": upload_id, "status": "pending"}
    with pytest.raises(LfsError) as ingesting:  # the verify never hashes a multipart object itself
        world.lfs().verify(ALICE.caller, upload_id, obj(data))
    assert ingesting.value.status == 429 and ingesting.value.headers == {"Retry-After": "5"}
    assert "being ingested" in ingesting.value.message
    record = world.repo.get_upload(upload_id)
    assert record is not None and record.status == UploadStatus.PENDING
    assert not world.repo.files  # nothing ingested
    world.ingest(upload_id)
    world.lfs().verify(ALICE.caller, upload_id, obj(data))
    record = world.repo.get_upload(upload_id)
    assert record is not None and record.status == UploadStatus.STORED and record.hash == obj(data)["oid"]
    again = world.batch([obj(data)], BOTH)  # pushed again: held, nothing to send, nothing written
    assert again == {"transfer": "basic", "objects": [obj(data)], "hash_algo": "sha256"}


def test_bytes_other_than_the_oid_never_verify(world: Lfs) -> None:
    data = big(2 * LIMIT)
    upload_id = world.batch([obj(data)], BOTH)["objects"][0]["actions"]["upload"]["header"]["Upload-Id"]
    world.send_parts(upload_id, big(2 * LIMIT, seed=2))  # the same size, other bytes: the ingest hashes them
    world.lfs().multipart.complete(ALICE.caller, upload_id, None)
    world.ingest(upload_id)
    with pytest.raises(LfsError) as refused:
        world.lfs().verify(ALICE.caller, upload_id, obj(data))
    assert refused.value.status == 422
    assert (
        world.lfs().batch(ALICE.caller, "game", {"operation": "download", "objects": [obj(data)]}, BASE)["objects"][0][
            "error"
        ]["code"]
        == 404
    )


def test_small_objects_beside_stay_basic_puts_and_a_batch_of_small_ones_is_basic(world: Lfs) -> None:
    small, large = b"small", big()
    mixed = world.batch([obj(small), obj(large)], BOTH)
    assert mixed["transfer"] == MULTIPART
    put, parts = (o["actions"]["upload"] for o in mixed["objects"])
    assert put["href"].startswith("https://fake-s3/") and "Upload-Id" not in put["header"]
    assert parts["href"] == f"{BASE}/lfs/game"
    plain = world.batch([{"oid": "e" * 64, "size": 10}], BOTH)
    assert plain["transfer"] == "basic"
    assert set(plain["objects"][0]["actions"]) == {"upload", "verify"}
    assert "Authorization" not in plain["objects"][0]["actions"]["upload"]["header"]


def test_the_multipart_threshold_also_chooses_parts_below_the_limit(world: Lfs) -> None:
    world.settings = replace(world.settings, multipart_threshold=5 * MIB)
    answer = world.batch([{"oid": "f" * 64, "size": 5 * MIB}], BOTH)
    assert answer["transfer"] == MULTIPART
    assert world.batch([{"oid": "f" * 64, "size": 5 * MIB}])["transfer"] == "basic"  # not offered: one PUT


def test_the_deployments_largest_upload_bounds_multipart_too(world: Lfs) -> None:
    world.settings = replace(world.settings, max_upload_bytes=10 * MIB)
    answer = world.batch([{"oid": "a" * 64, "size": 10 * MIB + 1}], BOTH)["objects"][0]
    assert answer["error"]["code"] == 422
    assert f"from 1 to {10 * MIB} bytes (the deployment's largest upload)" in answer["error"]["message"]


def test_a_multipart_push_over_the_quota_is_507_and_registers_nothing(world: Lfs) -> None:
    world.settings = replace(world.settings, tenant_quota_bytes=LIMIT)
    with pytest.raises(LfsError) as refused:
        world.batch([obj(big())], BOTH)
    assert refused.value.status == 507
    assert world.repo.uploads == {}


@pytest.mark.parametrize("transfers", [["tus"], ["lfs-standalone-file", "ssh"], []])
def test_transfers_naming_none_this_server_speaks_are_422_naming_both(world: Lfs, transfers: list[str]) -> None:
    with pytest.raises(LfsError) as refused:
        world.batch([], transfers)
    assert refused.value.status == 422
    assert "basic" in refused.value.message and MULTIPART in refused.value.message


def test_multipart_alone_is_enough_and_downloads_stay_basic(world: Lfs) -> None:
    data = big()
    assert world.batch([obj(data)], [MULTIPART])["transfer"] == MULTIPART
    small = world.batch([obj(b"small")], [MULTIPART])  # only what the client offers: the agent PUTs it
    assert small["transfer"] == MULTIPART
    assert small["objects"][0]["actions"]["upload"]["href"].startswith("https://fake-s3/")
    body = {"operation": "download", "objects": [obj(data)], "transfers": BOTH}
    assert world.lfs().batch(ALICE.caller, "game", body, BASE)["transfer"] == "basic"


def test_the_parts_routes_are_the_owners_only(world: Lfs) -> None:
    upload_id = world.batch([obj(big())], BOTH)["objects"][0]["actions"]["upload"]["header"]["Upload-Id"]
    from dfd.core.errors import NotFound

    with pytest.raises(NotFound):
        world.lfs().multipart.list_parts(BOB.caller, upload_id)  # another tenant: as unknown


def test_a_registration_a_resumed_upload_replaced_verifies_once_the_tenant_holds_the_object(world: Lfs) -> None:
    """The agent, run again after a kill, resumes the first push's upload and aborts the second push's: git-lfs's
    verify of the second then finds the object held (200); before it is held, the same verify is a 422."""
    data = big(2 * LIMIT)
    first = world.batch([obj(data)], BOTH)["objects"][0]["actions"]["upload"]["header"]["Upload-Id"]
    world.send_parts(first, data, [1])  # killed after one part
    second = world.batch([obj(data)], BOTH)["objects"][0]["actions"]["upload"]["header"]["Upload-Id"]
    assert second != first
    with pytest.raises(LfsError) as early:
        world.lfs().verify(ALICE.caller, second, obj(data))
    assert early.value.status == 422
    listed = world.lfs().multipart.list_parts(ALICE.caller, first)
    assert [p["part_number"] for p in listed["parts"]] == [1]
    world.send_parts(first, data, list(range(2, listed["part_count"] + 1)))
    world.lfs().multipart.complete(ALICE.caller, first, None)
    world.ingest(first)
    world.lfs().verify(ALICE.caller, first, obj(data))
    assert world.lfs().multipart.abort(ALICE.caller, second)["status"] == "deleted"
    world.lfs().verify(ALICE.caller, second, obj(data))  # held: 200
    statuses = sorted(str(world.repo.get_upload(u).status) for u in (first, second))  # type: ignore[union-attr]
    assert statuses == ["deleted", "stored"]
    assert world.repo.tenant_usage("acme").pending_bytes == 0


def test_the_single_put_limit_setting(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("LFS_BASIC_MAX_BYTES", raising=False)
    assert basic_max_bytes() == 5 * GIB
    monkeypatch.setenv("LFS_BASIC_MAX_BYTES", str(5 * MIB))
    assert basic_max_bytes() == 5 * MIB
    for wrong in ("abc", str(5 * MIB - 1), str(5 * GIB + 1), "-1"):
        monkeypatch.setenv("LFS_BASIC_MAX_BYTES", wrong)
        with pytest.raises(ConfigError, match="LFS_BASIC_MAX_BYTES"):
            basic_max_bytes()


def test_the_deployed_service_completes_through_the_multipart_routes_service(
    world: Lfs, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Its CompleteMultipartUpload client waits the request's budget (aws.s3_complete); the upload service's own
    multipart service has only the 1 s client of the small calls."""
    from dfd import deps

    routes_service = object()
    monkeypatch.setattr(deps, "settings", lambda: world.settings)
    monkeypatch.setattr(deps, "repository", lambda: world.repo)
    monkeypatch.setattr(deps, "upload_service", lambda: UploadService(world.settings, world.repo, world.objects))
    monkeypatch.setattr(deps, "ingestor", world.ingestor)
    monkeypatch.setattr(deps, "multipart_service", lambda: routes_service)
    monkeypatch.delenv("LFS_BASIC_MAX_BYTES", raising=False)
    deps.lfs_service.cache_clear()
    try:
        assert deps.lfs_service().multipart is routes_service
    finally:
        deps.lfs_service.cache_clear()
