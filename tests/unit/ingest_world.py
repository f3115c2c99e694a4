"""The ingest domain's world for unit tests: fakes of the ports, the clock, the upload and ingest services."""

from __future__ import annotations

import hashlib
import random
from dataclasses import dataclass, field
from datetime import UTC, datetime

from dfd.core.config import Settings
from dfd.core.notifications import ObjectRef
from dfd.deletes.service import DeleteService
from dfd.ingest.service import Ingestor, IngestResult, Outcome
from dfd.uploads.multipart import MultipartService
from dfd.uploads.service import UploadRequest, UploadService
from tests.support import ALICE, ApiUser
from tests.unit.fakes import FakeObjectStore, FakeRepository

NOW = datetime(2026, 3, 1, 12, 0, 0, tzinfo=UTC)
BUCKET = "bucket"


@dataclass
class World:
    settings: Settings = field(
        default_factory=lambda: Settings(
            files_table="f",
            counters_table="c",
            uploads_table="u",
            events_table="e",
            tenant_files_table="t",
            bucket=BUCKET,
            counter_shards=4,
        )
    )
    repo: FakeRepository = field(init=False)
    objects: FakeObjectStore = field(default_factory=FakeObjectStore)
    sleeps: list[float] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.repo = FakeRepository(self.settings)

    def ingestor(self, **kwargs: object) -> Ingestor:
        return Ingestor(
            self.settings,
            self.repo,
            self.objects,
            now=lambda: NOW,
            sleep=self.sleeps.append,
            rng=random.Random(7),
            **kwargs,  # type: ignore[arg-type]
        )

    def service(self) -> UploadService:
        return UploadService(self.settings, self.repo, self.objects, now=lambda: NOW, rng=random.Random(3))

    def deletes(self) -> DeleteService:
        multipart = MultipartService(self.settings, self.repo, self.objects, now=lambda: NOW)
        return DeleteService(self.settings, self.repo, multipart, now=lambda: NOW, sleep=self.sleeps.append)

    def upload(
        self, data: bytes, name: str = "a.txt", *, checksum: bool = False, user: ApiUser = ALICE, hint: bool = True
    ) -> str:
        """POST /upload as `user`, then the client's PUT: the object's key."""
        sha = hashlib.sha256(data).hexdigest() if checksum else None
        answer = self.service().create(UploadRequest(name, len(data), "text/plain", sha), user.caller)
        assert answer.status == 201, answer
        key = str(answer.body["key"])
        # the client sends every header the 201 lists: x-amz-meta-* become the object's metadata
        headers: dict[str, str] = answer.body["headers"]
        metadata = {
            name[len("x-amz-meta-") :]: value for name, value in headers.items() if name.startswith("x-amz-meta-")
        }
        if not hint:
            metadata = {}
        self.objects.put(BUCKET, key, data, checksum=checksum, content_type="text/plain", metadata=metadata)
        return key

    def ingest(self, key: str, **kwargs: object) -> IngestResult:
        return self.ingestor(**kwargs).ingest(ObjectRef(BUCKET, key))

    def totals(self) -> dict[str, int]:
        return self.repo.counter_totals()

    def counted(self, name: str) -> int:
        """One counter summed over the shards (any CounterShard field, not only GET /admin/stats's)."""
        return sum(shard.get(name, 0) for shard in self.repo.counters.values())

    def assert_invariants(self) -> None:
        """What audit checks on the real tables: one stored copy per file record, counters match the records."""
        totals = self.totals()
        assert totals["total_files"] == len(self.repo.files)
        assert totals["total_bytes_stored"] == sum(f["size"] for f in self.repo.files.values())
        assert totals["total_uploads"] == sum(f["upload_count"] for f in self.repo.files.values())
        for file in self.repo.files.values():
            assert (BUCKET, file["s3_key"]) in self.objects.objects, file
            assert self.repo.claims[(BUCKET, file["s3_key"])]["hash"] == file["hash"]
        # the tenant layer: each reference counts its tenant's processed uploads, and names stored content
        recount: dict[tuple[str, str], int] = {}
        for upload in self.repo.uploads.values():
            if upload.get("tenant") and upload.get("status") in ("stored", "duplicate"):
                key = (upload["tenant"], upload["hash"])
                recount[key] = recount.get(key, 0) + 1
        assert {key: ref["upload_count"] for key, ref in self.repo.tenant_refs.items()} == recount
        assert all(digest in self.repo.files for _, digest in self.repo.tenant_refs)


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def expect(result: IngestResult, outcome: Outcome) -> None:
    assert result.outcome == outcome, result
