"""The hashing states' contract (dfd.ingest.ports.HashingStore; dfd.adapters.dynamo.hashing): the first state is
put once, a later one only from the bytes it started at and never after the digest; against the fake, moto and
DynamoDB Local."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator

import boto3
import pytest

from dfd.adapters.dynamo.hashing import DynamoHashingStore
from dfd.ingest.ports import HashingShown, HashProgress
from dfd.ingest.sha256state import INITIAL, Sha256
from tests.integration.contract.support import BUCKET, _now
from tests.unit.fakes.hashing import FakeHashingStore

Store = FakeHashingStore | DynamoHashingStore
EVENT = f"{BUCKET}/uploads/{1:032x}#v1"


@pytest.fixture(params=["fake", "dynamo", "dynamodb-local"])
def store(request: pytest.FixtureRequest) -> Iterator[Store]:
    if request.param == "fake":
        yield FakeHashingStore()
        return
    if request.param == "dynamodb-local":
        client, settings = request.getfixturevalue("local_dynamodb")
        yield DynamoHashingStore(client, settings.events_table, settings.event_ttl_days)
        return
    aws = request.getfixturevalue("aws")
    yield DynamoHashingStore(boto3.client("dynamodb"), aws.settings.events_table, aws.settings.event_ttl_days)


def _first(version_id: str | None = "v1") -> HashProgress:
    return HashProgress(
        EVENT,
        BUCKET,
        f"uploads/{1:032x}",
        '"etag-1"',
        version_id,
        1000,
        INITIAL,
        content_type="video/mp4" if version_id else None,
        tenant_hint="acme" if version_id else None,
    )


def _after(data: bytes) -> HashProgress:
    h = Sha256()
    h.update(data)
    return dataclasses.replace(_first(), state=h.state(), segments=1)


def test_the_first_state_is_put_once(store: Store) -> None:
    assert store.get_hashing(EVENT) is None
    first = store.start_hashing(_first(), _now())
    assert (first.state, first.hashed, first.segments, first.digest) == (INITIAL, 0, 0, None)
    assert store.advance_hashing(_after(b"x" * 128), 0, _now())
    again = store.start_hashing(_first(), _now())  # a replayed begin finds the state moved on, and keeps it
    assert again.state == _after(b"x" * 128).state and again.hashed == 128 and again.segments == 1
    assert (again.bucket, again.key, again.etag, again.version_id, again.size) == (
        BUCKET,
        f"uploads/{1:032x}",
        '"etag-1"',
        "v1",
        1000,
    )
    assert (again.content_type, again.tenant_hint) == ("video/mp4", "acme")


def test_a_state_moves_on_only_from_the_bytes_it_started_at(store: Store) -> None:
    store.start_hashing(_first(None), _now())
    bare = store.get_hashing(EVENT)  # no version id, content type or hint: none is stored
    assert bare is not None and (bare.version_id, bare.content_type, bare.tenant_hint) == (None, None, None)
    assert not store.advance_hashing(_after(b"x" * 64), 64, _now())  # it is at 0, not 64
    assert store.advance_hashing(_after(b"x" * 64), 0, _now())
    assert not store.advance_hashing(_after(b"y" * 64), 0, _now())  # a second run of the same segment
    found = store.get_hashing(EVENT)
    assert found == dataclasses.replace(_after(b"x" * 64), updated_at="2026-03-01T12:00:00Z")


def test_nothing_moves_a_state_past_its_digest(store: Store) -> None:
    store.start_hashing(_first(), _now())
    done = dataclasses.replace(_first(), digest="d" * 64, segments=1)
    assert store.advance_hashing(done, 0, _now())
    found = store.get_hashing(EVENT)
    assert found is not None and found.digest == "d" * 64 and found.hashed == 1000
    assert not store.advance_hashing(_after(b"x" * 64), 0, _now())
    assert not store.advance_hashing(done, 0, _now())


def test_a_version_s_state_is_not_another_s(store: Store) -> None:
    store.start_hashing(_first(), _now())
    other = dataclasses.replace(_first(), event_key=EVENT.replace("#v1", "#v2"), version_id="v2")
    assert not store.advance_hashing(other, 0, _now())  # no state for v2 was begun
    assert store.get_hashing(other.event_key) is None


def test_the_key_s_progress_follows_each_state_that_lands(store: Store) -> None:
    assert store.hashing_of_key(BUCKET, f"uploads/{1:032x}") is None
    store.start_hashing(_first(), _now())
    assert store.hashing_of_key(BUCKET, f"uploads/{1:032x}") == HashingShown(EVENT, 0, 1000, "2026-03-01T12:00:00Z")
    store.advance_hashing(_after(b"x" * 128), 0, _now())
    assert not store.advance_hashing(_after(b"y" * 64), 0, _now())  # refused: the progress stays
    assert store.hashing_of_key(BUCKET, f"uploads/{1:032x}") == HashingShown(EVENT, 128, 1000, "2026-03-01T12:00:00Z")
    store.advance_hashing(dataclasses.replace(_first(), digest="d" * 64), 128, _now())
    assert store.hashing_of_key(BUCKET, f"uploads/{1:032x}") == HashingShown(EVENT, 1000, 1000, "2026-03-01T12:00:00Z")
    assert store.hashing_of_key(BUCKET, f"uploads/{2:032x}") is None


def test_a_restart_counts_one_run_at_a_time(store: Store) -> None:
    first = store.start_hashing(_first(), _now())
    assert first.run == 0
    assert store.next_run(first, _now()) and not store.next_run(first, _now())  # a second restart of run 0
    assert store.get_hashing(EVENT).run == 1  # type: ignore[union-attr]
    assert store.advance_hashing(dataclasses.replace(_after(b"x" * 64), run=1), 0, _now())
    found = store.get_hashing(EVENT)
    assert found is not None and (found.run, found.hashed) == (1, 64)
    done = dataclasses.replace(found, digest="d" * 64)
    assert store.advance_hashing(done, 64, _now())
    assert not store.next_run(done, _now())  # nothing restarts once every byte is hashed


def test_the_crc64nvme_beside_the_state_is_kept_exactly(store: Store) -> None:
    store.start_hashing(_first(), _now())
    # 64-bit values: past a double's 53 bits, and the largest (DynamoDB keeps them as the item's strings)
    for stored, running, at in ((0xFFFFFFFFFFFFFFFF, 0x8000000000000001, 0), (0xAE8B14860A799888, 0, 64)):
        moved = dataclasses.replace(_after(b"x" * (at + 64)), stored_crc64nvme=stored, crc64nvme=running)
        assert store.advance_hashing(moved, at, _now())
        found = store.get_hashing(EVENT)
        assert found is not None and (found.stored_crc64nvme, found.crc64nvme) == (stored, running)
    done = dataclasses.replace(found, digest="d" * 64, crc64nvme=0xAE8B14860A799889)
    assert store.advance_hashing(done, 128, _now())
    finished = store.get_hashing(EVENT)
    assert finished is not None and finished.crc64nvme_mismatch  # the digest kept with what it was compared to
