"""POST /uploads/{id}/complete of up to 10,000 parts within the function's budget: S3 may take minutes to
assemble them, so a CompleteMultipartUpload that outlasts the budget answers 202 "completing" with Retry-After,
and the client's repeat of the same POST (idempotent) finds the object assembled."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest
from botocore.exceptions import ReadTimeoutError

from dfd import deps
from dfd.adapters import aws
from dfd.adapters.s3 import ObjectStore
from dfd.core.config import MIB, Settings
from dfd.core.errors import StillCompleting
from dfd.core.objects import PartInfo
from dfd.handlers import multipart as handler
from dfd.identity.caller import Caller
from dfd.uploads.multipart import COMPLETING, MultipartService
from dfdlocal.template import load_template
from tests.support import ROOT, LambdaContext, api_event, call
from tests.unit.fakes import FakeObjectStore, FakeRepository

NOW = datetime(2026, 3, 1, 12, 0, 0, tzinfo=UTC)
ALICE = Caller(owner="alice-sub", tenant="acme", is_admin=False)
SIZE = 12 * MIB + 123


class SlowAssembly(FakeObjectStore):
    """S3 assembling for longer than the request waits: the object appears, the answer does not come."""

    def complete_multipart(self, bucket: str, key: str, s3_upload_id: str, parts: list[PartInfo], *, size: int) -> None:
        super().complete_multipart(bucket, key, s3_upload_id, parts, size=size)
        raise StillCompleting(f"S3 is still assembling {key}")


def test_a_slow_assembly_is_completing_then_the_repeat_finds_it_done() -> None:
    s = Settings(
        files_table="f", counters_table="c", uploads_table="u", events_table="e", tenant_files_table="t",
        bucket="b", multipart_min_part=5 * MIB, multipart_threshold=10 * MIB,
    )  # fmt: skip
    repo, objects = FakeRepository(s), SlowAssembly()
    service = MultipartService(s, repo, objects, now=lambda: NOW)
    body = service.create(ALICE, filename="big.bin", size=SIZE, content_type="application/octet-stream", sha256=None)
    upload_id = str(body["upload_id"])
    service.presign_parts(ALICE, upload_id, {"parts": [{"part_number": n} for n in (1, 2, 3)]})
    s3_upload_id = repo.uploads[upload_id]["s3_upload_id"]
    for number, length in ((1, 5 * MIB), (2, 5 * MIB), (3, 2 * MIB + 123)):
        objects.upload_part(s3_upload_id, number, b"x" * length)

    assert service.complete(ALICE, upload_id, None) == {"upload_id": upload_id, "status": COMPLETING}
    assert not repo.uploads[upload_id].get("completed_at")  # not known to be done yet
    # the repeat: S3 knows the upload no more and the object is there — completed
    assert service.complete(ALICE, upload_id, None) == {"upload_id": upload_id, "status": "pending"}
    assert repo.uploads[upload_id]["completed_at"]
    assert service.complete(ALICE, upload_id, None) == {"upload_id": upload_id, "status": "pending"}


def test_the_complete_client_waits_one_budget_once() -> None:
    class Client:
        def complete_multipart_upload(self, **_: Any) -> None:
            raise ReadTimeoutError(endpoint_url="https://b.s3.eu-west-1.amazonaws.com/k")

    store = ObjectStore(object(), complete_client=Client())
    with pytest.raises(StillCompleting):
        store.complete_multipart("b", "k", "id", [PartInfo(1, '"e"', 5)], size=5)
    config = aws._s3_complete().meta.config
    assert config.retries["total_max_attempts"] == 1 and config.read_timeout == aws.COMPLETE_WAIT_SECONDS
    # 10 ListParts pages (10,000 parts) and the wait fit the function's Timeout, itself under the HTTP API's 30 s
    timeout = load_template(ROOT / "template.yaml")["Resources"]["UploadPartsFunction"]["Properties"]["Timeout"]
    assert aws.COMPLETE_WAIT_SECONDS + 5 <= timeout < 30


def test_the_handler_answers_202_completing_with_retry_after(monkeypatch: pytest.MonkeyPatch) -> None:
    class Service:
        def complete(self, caller: Caller, upload_id: str, body: Any) -> dict[str, Any]:
            return {"upload_id": upload_id, "status": COMPLETING}

    monkeypatch.setattr(deps, "multipart_service", Service)
    upload_id = "0" * 32
    event = api_event("POST", f"/uploads/{upload_id}/complete")
    event["pathParameters"] = {"id": upload_id}
    response = handler.handler(event, LambdaContext())
    assert response["statusCode"] == 202 and response["headers"]["Retry-After"] == "5"
    status, answer = call(handler.handler, event)
    assert (status, answer) == (202, {"upload_id": upload_id, "status": COMPLETING})
