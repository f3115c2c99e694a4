"""The drop zone's copy items' contract (dfd.ingest.ports.CopyStore; dfd.adapters.dynamo.copies): the first item is
put once; an update lands only on the multipart upload it read and never after the copy ended; a restart counts one
run; against the fake, moto and DynamoDB Local."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator

import boto3
import pytest

from dfd.adapters.dynamo.copies import DynamoCopyStore
from dfd.ingest.ports import CopyProgress
from tests.integration.contract.support import BUCKET, _now
from tests.unit.fakes.copies import FakeCopyStore

Store = FakeCopyStore | DynamoCopyStore
EVENT = f"{BUCKET}/s3/acme/owner/big.bin#etag-1"


@pytest.fixture(params=["fake", "dynamo", "dynamodb-local"])
def store(request: pytest.FixtureRequest) -> Iterator[Store]:
    if request.param == "fake":
        yield FakeCopyStore()
        return
    if request.param == "dynamodb-local":
        client, settings = request.getfixturevalue("local_dynamodb")
        yield DynamoCopyStore(client, settings.events_table, settings.event_ttl_days)
        return
    aws = request.getfixturevalue("aws")
    yield DynamoCopyStore(boto3.client("dynamodb"), aws.settings.events_table, aws.settings.event_ttl_days)


def _first() -> CopyProgress:
    return CopyProgress(
        EVENT, BUCKET, "s3/acme/owner/big.bin", '"etag-1"', 10_000, f"uploads/{1:032x}", "video/mp4", "acme", 4096
    )


def test_the_first_item_is_put_once(store: Store) -> None:
    assert store.get_copy(EVENT) is None
    first = store.start_copy(_first(), _now())
    assert (first.upload_id, first.uploads, first.copied, first.ended, first.run) == (None, 0, 0, None, 0)
    assert store.update_copy(dataclasses.replace(first, upload_id="mpu-1", uploads=1), None, _now())
    again = store.start_copy(_first(), _now())  # a replayed begin finds the upload there, and keeps it
    assert (again.upload_id, again.uploads) == ("mpu-1", 1)
    assert dataclasses.replace(again, updated_at=None, upload_id=None, uploads=0) == _first()


def test_an_update_lands_only_on_the_upload_it_read(store: Store) -> None:
    first = store.start_copy(_first(), _now())
    assert store.update_copy(dataclasses.replace(first, upload_id="mpu-1", uploads=1), None, _now())
    # a second delivery's upload, created meanwhile: refused (it aborts its own)
    assert not store.update_copy(dataclasses.replace(first, upload_id="mpu-2", uploads=1), None, _now())
    found = store.get_copy(EVENT)
    assert found is not None and found.upload_id == "mpu-1"
    assert store.update_copy(dataclasses.replace(found, copied=8192, steps=1), "mpu-1", _now())
    assert not store.update_copy(dataclasses.replace(found, copied=1), "mpu-0", _now())
    found = store.get_copy(EVENT)
    assert found is not None and (found.copied, found.steps) == (8192, 1)
    # the lifecycle rule aborted mpu-1: the next upload replaces it
    assert store.update_copy(dataclasses.replace(found, upload_id="mpu-3", uploads=2, copied=0), "mpu-1", _now())
    found = store.get_copy(EVENT)
    assert found is not None and (found.upload_id, found.uploads, found.copied, found.steps) == ("mpu-3", 2, 0, 1)


def test_an_ended_copy_changes_no_more(store: Store) -> None:
    first = store.start_copy(_first(), _now())
    started = dataclasses.replace(first, upload_id="mpu-1", uploads=1)
    assert store.update_copy(started, None, _now())
    assert store.update_copy(dataclasses.replace(started, ended="done", copied=10_000), "mpu-1", _now())
    assert not store.update_copy(dataclasses.replace(started, ended="superseded"), "mpu-1", _now())
    assert not store.next_copy_run(started, _now())
    found = store.get_copy(EVENT)
    assert found is not None and (found.ended, found.copied) == ("done", 10_000)


def test_a_restart_counts_one_run(store: Store) -> None:
    first = store.start_copy(_first(), _now())
    assert store.next_copy_run(first, _now())
    assert not store.next_copy_run(first, _now())  # a second re-drive read run 0 too
    found = store.get_copy(EVENT)
    assert found is not None and found.run == 1
    assert store.update_copy(dataclasses.replace(found, upload_id="mpu-1", run=0), None, _now())
    found = store.get_copy(EVENT)
    assert found is not None and found.run == 1  # an update leaves the run as counted
