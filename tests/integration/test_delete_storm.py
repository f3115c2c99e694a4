"""The delete storm: 8 threads upload one content (some by the hash-first precheck), delete uploads of
it at random and replay ingest events, while the reconcile workflow's reaper runs (moto's Step Functions, every
tombstone already past its grace period). Then scripts/audit holds, and either a live upload exists and
downloads the bytes, or none does and the bytes are gone."""

from __future__ import annotations

import hashlib
import json
import random
import threading
from typing import Any

import pytest
import requests

from dfd.handlers import download, ingest, upload
from tests.integration.support import Local, delete, later
from tests.support import ADMIN, ALICE, BOB, CAROL, DAVE, ApiUser, LambdaContext, api_event, call, sqs_batch

DATA = b"one content, many references, deleted at random\n" * 64
DIGEST = hashlib.sha256(DATA).hexdigest()
USERS = (ALICE, CAROL, BOB, DAVE, ALICE, BOB, CAROL, DAVE)
ROUNDS = 8


class Storm:
    def __init__(self, local: Local) -> None:
        self.local = local
        self.lock = threading.Lock()
        self.bodies: list[str] = []  # every notification delivered (replayed at random)
        self.errors: list[str] = []

    def ingest(self, bodies: list[str]) -> None:
        """The event source mapping: a failed record is delivered again (bounded)."""
        for _ in range(10):
            if not bodies:
                return
            result = ingest.handler(sqs_batch(*bodies), LambdaContext())
            failed = {f["itemIdentifier"] for f in result["batchItemFailures"]}
            batch = sqs_batch(*bodies)["Records"]
            bodies = [r["body"] for r in batch if r["messageId"] in failed] if failed else []
        if bodies:
            self.errors.append(f"{len(bodies)} records never ingested")

    def deliver(self) -> None:
        bodies = self.local.drain()
        with self.lock:
            self.bodies += bodies
        self.ingest(bodies)

    def upload(self, user: ApiUser, rng: random.Random) -> str | None:
        body: dict[str, Any] = {"filename": f"{user.username}.bin", "size": len(DATA)}
        if rng.random() < 0.4:
            body["sha256"] = DIGEST
        status, answer = call(upload.handler, api_event("POST", "/upload", body=body, user=user))
        if status == 409:
            return str(answer["upload_id"])
        assert status == 201, answer
        put = requests.put(answer["upload_url"], data=DATA, headers=answer["headers"], timeout=10)
        assert put.status_code == 200, put.text
        self.deliver()
        return str(answer["upload_id"])

    def delete(self, user: ApiUser, upload_id: str) -> None:
        for _ in range(5):  # a 503 (the delete lost every race) is retried, as a client would
            status, body = delete(upload_id, user)
            if status == 204:
                return
            assert status == 503, body
        self.errors.append(f"delete of {upload_id} never committed")

    def replay(self, rng: random.Random) -> None:
        with self.lock:
            chosen = rng.sample(self.bodies, min(2, len(self.bodies)))
        self.ingest(chosen)


def worker(storm: Storm, index: int, survivors: bool) -> None:
    rng = random.Random(index)
    user = USERS[index]
    mine: list[str] = []
    try:
        for _ in range(ROUNDS):
            roll = rng.random()
            if roll < 0.35 or not mine:
                upload_id = storm.upload(user, rng)
                if upload_id:
                    mine.append(upload_id)
            elif roll < 0.85:
                storm.delete(ADMIN if rng.random() < 0.2 else user, mine.pop(rng.randrange(len(mine))))
            else:
                storm.replay(rng)
        if index % 2 or not survivors:  # at the end, half the workers (or all) delete what they still hold
            for upload_id in mine:
                storm.delete(user, upload_id)
    except Exception as error:  # reported by the test
        storm.errors.append(f"worker {index}: {error!r}")


@pytest.mark.parametrize("survivors", [True, False], ids=["some-uploads-remain", "every-upload-deleted"])
def test_delete_storm(local: Local, survivors: bool) -> None:
    storm = Storm(local)
    threads = [threading.Thread(target=worker, args=(storm, i, survivors), name=f"storm-{i}") for i in range(8)]
    for thread in threads:
        thread.start()
    for _ in range(3):  # the reaper runs while they work
        local.run(sweep=False, now=later(hours=2))
    for thread in threads:
        thread.join()
    assert not storm.errors, storm.errors
    storm.deliver()
    local.run(sweep=False, now=later(hours=3))
    storm.deliver()
    local.assert_invariants()

    uploads = local.ddb.scan(TableName=local.settings.uploads_table, ConsistentRead=True)["Items"]
    live = [u for u in uploads if u["status"]["S"] in ("stored", "duplicate")]
    objects = [o["Key"] for o in local.s3.list_objects_v2(Bucket=local.settings.bucket).get("Contents", [])]
    assert bool(live) == survivors
    if live:
        owner = {user.sub: user for user in USERS}[live[0]["owner"]["S"]]
        status, link = call(download.handler, api_event("GET", f"/download/{live[0]['upload_id']['S']}", user=owner))
        assert status == 200, link
        assert requests.get(link["download_url"], timeout=10).content == DATA
        assert len(objects) == 1
    else:
        assert objects == [], json.dumps(objects)
