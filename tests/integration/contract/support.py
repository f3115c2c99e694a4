"""The contract suites' shared values and steps: uploads, object versions, commits, the reconcile's paging."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from dfd.adapters.dynamo import Repository as DynamoRepository
from dfd.core.config import Settings
from dfd.core.conflicts import (
    CommitRefused,
)
from dfd.core.ids import event_key
from dfd.core.records import UploadRecord
from dfd.ingest.ports import ObjectVersion, TenantShare
from dfd.uploads.ports import NewUpload
from tests.unit.fakes import FakeRepository

# what a contract runs against: the fake or the adapter (on moto or DynamoDB Local)
Repository = FakeRepository | DynamoRepository

BUCKET = "dfd-files-local"
QUOTA = 1000
PENDING_LIMIT = 3
DIGEST = "a" * 64
OTHER = "b" * 64


def _now() -> datetime:
    return datetime(2026, 3, 1, 12, 0, 0, tzinfo=UTC)


def _limits(settings: Settings) -> Settings:
    return dataclasses.replace(settings, tenant_quota_bytes=QUOTA, tenant_pending_limit=PENDING_LIMIT)


def new_upload(n: int, size: int = 100, tenant: str = "acme", owner: str = "alice") -> NewUpload:
    upload_id = f"{n:032x}"
    now = _now()
    return NewUpload(
        upload_id,
        f"f{n}.bin",
        size,
        "text/plain",
        None,
        f"uploads/{upload_id}",
        BUCKET,
        now + timedelta(hours=1),
        owner,
        tenant,
    )


def version(n: int, digest: str = DIGEST, size: int = 100, upload_id: str | None = None) -> ObjectVersion:
    # an object at an upload key has that upload's id (ingest: dfd.core.ids.upload_id_from_key); one with none was put
    # straight into the bucket, at another key
    key = f"uploads/{n:032x}" if upload_id is not None else f"uploads/direct/{n}.bin"
    return ObjectVersion(event_key(BUCKET, key, f"etag{n}"), BUCKET, key, f'"etag{n}"', size, digest, upload_id)


def registered(repo: Repository, n: int, size: int = 100, tenant: str = "acme") -> tuple[UploadRecord, ObjectVersion]:
    upload = new_upload(n, size, tenant)
    repo.register_upload(upload, _now())
    record = repo.get_upload(upload.upload_id)
    assert record is not None
    return record, version(n, size=size, upload_id=upload.upload_id)


def commit(repo: Repository, kind: str, v: ObjectVersion, share: TenantShare | None, shard: int = 0) -> None:
    call = repo.commit_stored if kind == "stored" else repo.commit_duplicate
    call(v, filename="f.bin", content_type="text/plain", counter_shard=shard, now=_now(), tenant=share)


def refused(kind: type[CommitRefused], call: Any) -> CommitRefused:
    with pytest.raises(CommitRefused) as raised:
        call()
    assert type(raised.value) is kind, f"{type(raised.value).__name__} raised, {kind.__name__} expected"
    return raised.value


def repo_settings(repo: Repository) -> Settings:
    settings = getattr(repo, "settings", None) or repo._s
    assert isinstance(settings, Settings)
    return settings


def due(page: Any, repo: Repository, now: datetime, limit: int = 1) -> list[Any]:
    """Every item of a sparse index due by `now`, over all its shards, read `limit` at a time."""
    found: list[Any] = []
    for shard in range(repo_settings(repo).pending_shards):
        cursor = None
        while True:
            items, cursor = page(shard, now, limit, cursor)
            found += items
            if cursor is None:
                break
    return found
