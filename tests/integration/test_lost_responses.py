"""A write whose response is lost (DynamoDB or S3 applied it, the client saw a timeout and
botocore sent it again) is applied once. Each scenario runs with the response of each of its writes lost in
turn — moto applies the request, then the client sees a ReadTimeoutError — and nothing may be counted twice:
the answers are those of an undisturbed run, the counters, upload counts and tenant references are unchanged,
and the audit (which recounts upload_count from the event and upload records) holds."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest
from botocore.exceptions import ReadTimeoutError
from botocore.retries.standard import ExponentialBackoff
from moto.core.botocore_stubber import BotocoreStubber

from dfd.handlers import admin_stats
from tests.integration.support import Aws, get, post, upload_as
from tests.support import ALICE, BOB, CAROL, api_event, call

_DYNAMODB_WRITES = {"PutItem", "UpdateItem", "DeleteItem", "TransactWriteItems", "BatchWriteItem"}


@dataclass
class LostResponses:
    """Counts the writes made while armed, and loses the response of the `lose`-th (0-based): moto applies
    it, then the client sees a read timeout and botocore retries."""

    lose: int | None = None
    armed: bool = False
    writes: list[str] = field(default_factory=list)
    lost: list[str] = field(default_factory=list)

    def write_name(self, request: Any) -> str | None:
        target = request.headers.get("X-Amz-Target")
        if target is not None:
            name = (target.decode() if isinstance(target, bytes) else str(target)).split(".")[-1]
            return name if name in _DYNAMODB_WRITES else None
        if request.method == "DELETE":
            return "s3:DeleteObject"
        return None

    def after(self, request: Any) -> None:
        if not self.armed:
            return
        name = self.write_name(request)
        if name is None:
            return
        index = len(self.writes)
        self.writes.append(name)
        if index == self.lose:
            self.lost.append(name)
            raise ReadTimeoutError(endpoint_url=request.url)


@pytest.fixture
def lost(aws: Aws, monkeypatch: pytest.MonkeyPatch) -> Iterator[LostResponses]:
    state = LostResponses()
    process = BotocoreStubber.process_request  # already serialized by the aws fixture

    def apply_then_lose(self: BotocoreStubber, request: Any) -> Any:
        response = process(self, request)
        state.after(request)
        return response

    monkeypatch.setattr(BotocoreStubber, "process_request", apply_then_lose)
    monkeypatch.setattr(ExponentialBackoff, "delay_amount", lambda self, context: 0.0)  # retry at once
    yield state


def stats() -> dict[str, Any]:
    status, body = call(admin_stats.handler, api_event("GET", "/admin/stats"))
    assert status == 200
    return body


def tables(aws: Aws) -> dict[str, Any]:
    """What must come out the same whichever response was lost: the counters, each file's upload count, each
    tenant reference's, the upload statuses, the objects left."""
    s = aws.settings
    files = aws.ddb.scan(TableName=s.files_table, ConsistentRead=True)["Items"]
    items = aws.ddb.scan(TableName=s.tenant_files_table, ConsistentRead=True)["Items"]
    refs = [r for r in items if "upload_count" in r]  # not the tenants' usage shards
    uploads = aws.ddb.scan(TableName=s.uploads_table, ConsistentRead=True)["Items"]
    listing = aws.s3.list_objects_v2(Bucket=s.bucket).get("Contents", [])
    counters = stats()
    return {
        "counters": [counters[name] for name in ("total_files", "total_uploads", "duplicates_avoided")],
        "files": sorted(int(f["upload_count"]["N"]) for f in files),
        "refs": sorted((r["tenant"]["S"], int(r["upload_count"]["N"])) for r in refs),
        "uploads": sorted(u["status"]["S"] for u in uploads),
        "objects": len(listing),
    }


DATA = b"exactly once, whatever is lost" * 40


def new_content(aws: Aws) -> None:
    upload_as(aws, ALICE, DATA, "first.bin")


def cross_tenant_duplicate(aws: Aws) -> None:
    upload_as(aws, BOB, DATA, "bob.bin")


def same_tenant_duplicate(aws: Aws) -> None:
    answer = upload_as(aws, CAROL, DATA, "carol.bin")
    assert get("metadata", answer["upload_id"], CAROL)[1]["status"] == "duplicate"


def precheck(aws: Aws) -> None:
    status, body = post(CAROL, DATA, "carol.bin", digest=True)
    assert status == 409 and body["file"]["upload_count"] == 2, body


def lost_copy(aws: Aws) -> None:
    answer = upload_as(aws, CAROL, DATA, "survivor.bin")
    assert get("metadata", answer["upload_id"], CAROL)[1]["status"] == "stored"


def lose_the_stored_copy(aws: Aws) -> None:
    new_content(aws)
    listing = aws.s3.list_objects_v2(Bucket=aws.settings.bucket)["Contents"]
    aws.s3.delete_object(Bucket=aws.settings.bucket, Key=listing[0]["Key"])


# name: (setup, the scenario whose every write loses its response in turn, its writes, what it leaves)
SCENARIOS: dict[str, tuple[Callable[[Aws], None], Callable[[Aws], None], int, dict[str, Any]]] = {
    # PutItem (the upload record), TransactWriteItems (stored)
    "new content": (
        lambda aws: None,
        new_content,
        2,
        {"counters": [1, 1, 0], "files": [1], "refs": [("acme", 1)], "uploads": ["stored"], "objects": 1},
    ),
    # PutItem, TransactWriteItems (duplicate), DeleteObject
    "cross-tenant duplicate": (
        new_content,
        cross_tenant_duplicate,
        3,
        {
            "counters": [1, 2, 1],
            "files": [2],
            "refs": [("acme", 1), ("globex", 1)],
            "uploads": ["stored", "stored"],
            "objects": 1,
        },
    ),
    "same-tenant duplicate": (
        new_content,
        same_tenant_duplicate,
        3,
        {"counters": [1, 2, 1], "files": [2], "refs": [("acme", 2)], "uploads": ["duplicate", "stored"], "objects": 1},
    ),
    # TransactWriteItems (the caller's own upload record, counted)
    "precheck 409": (
        new_content,
        precheck,
        1,
        {"counters": [1, 2, 1], "files": [2], "refs": [("acme", 2)], "uploads": ["duplicate", "stored"], "objects": 1},
    ),
    # PutItem, TransactWriteItems (duplicate), TransactWriteItems (adopted as the stored copy)
    "duplicate of a lost copy": (
        lose_the_stored_copy,
        lost_copy,
        3,
        {"counters": [1, 2, 1], "files": [2], "refs": [("acme", 2)], "uploads": ["stored", "stored"], "objects": 1},
    ),
}
CASES = [(name, index) for name, scenario in SCENARIOS.items() for index in [None, *range(scenario[2])]]


@pytest.mark.parametrize(("scenario", "lose"), CASES, ids=[f"{n}-{'none' if i is None else i}" for n, i in CASES])
def test_a_lost_response_is_applied_once(aws: Aws, lost: LostResponses, scenario: str, lose: int | None) -> None:
    setup, run, writes, expected = SCENARIOS[scenario]
    setup(aws)
    lost.lose, lost.armed = lose, True
    run(aws)
    lost.armed = False
    assert len(lost.lost) == (lose is not None)
    assert len(lost.writes) == writes + (lose is not None), lost.writes  # the lost one, sent again
    assert tables(aws) == expected, lost.lost
    aws.assert_invariants()
