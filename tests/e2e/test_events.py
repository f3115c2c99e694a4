"""Events out on the local stack over HTTP: make run publishes every outcome to its bus and delivers it to the
SQS queue `dfd-events` (named in the ready file); scripts/events prints them."""

from __future__ import annotations

import hashlib
import os
import subprocess
import uuid
from typing import Any

import pytest
import requests

from tests.e2e.e2e_helpers import ROOT, RunningStack, take_events, wait_until

pytestmark = pytest.mark.e2e


def test_every_outcome_reaches_the_local_events_queue(stack: RunningStack) -> None:
    events = stack.description["events"]
    assert events["queue"] == "dfd-events" and set(events["buses"].values()) == {"dfd-bus"}
    data = f"published {uuid.uuid4()}".encode()
    digest = hashlib.sha256(data).hexdigest()
    body = {"filename": "event.txt", "size": len(data), "content_type": "text/plain"}
    answer = requests.post(f"{stack.api_url}/upload", json=body, headers=stack.auth("bob"), timeout=10).json()
    assert requests.put(answer["upload_url"], data=data, headers=answer["headers"], timeout=10).status_code == 200
    upload_id = answer["upload_id"]
    seen: list[dict[str, Any]] = []

    def mine(*kinds: str) -> list[dict[str, Any]] | None:
        take_events(stack, seen)
        found = [e for e in seen if e["detail"].get("upload_id") == upload_id or e["detail"]["sha256"] == digest]
        return found if sorted(e["detail-type"] for e in found) == sorted(kinds) else None

    stored = wait_until(lambda: mine("Upload Stored", "File Stored"), timeout=30)
    upload_event = next(e for e in stored if e["detail-type"] == "Upload Stored")
    assert upload_event["source"] == "dfd"
    assert upload_event["detail"] | {"event_id": None, "occurred_at": None} == {
        "event_id": None,
        "occurred_at": None,
        "tenant": "globex",
        "owner": upload_event["detail"]["owner"],
        "upload_id": upload_id,
        "filename": "event.txt",
        "via": "presigned",
        "sha256": digest,
        "size": len(data),
    }
    deleted = requests.delete(f"{stack.api_url}/uploads/{upload_id}", headers=stack.auth("bob"), timeout=10)
    assert deleted.status_code == 204
    wait_until(lambda: mine("Upload Stored", "File Stored", "Upload Deleted"), timeout=30)

    # scripts/events prints what arrives (here: a precheck's Deduplicated event, on the same queue)
    other = f"printed {uuid.uuid4()}".encode()
    body = {"filename": "p.txt", "size": len(other)}
    first = requests.post(f"{stack.api_url}/upload", json=body, headers=stack.auth("carol"), timeout=10).json()
    assert requests.put(first["upload_url"], data=other, headers=first["headers"], timeout=10).status_code == 200
    wait_until(
        lambda: (
            requests.get(f"{stack.api_url}/metadata/{first['upload_id']}", headers=stack.auth("carol"), timeout=10)
            .json()
            .get("status")
            == "stored"
        ),
        timeout=30,
    )
    body["sha256"] = hashlib.sha256(other).hexdigest()
    again = requests.post(f"{stack.api_url}/upload", json=body, headers=stack.auth("carol"), timeout=10)
    assert again.status_code == 409
    env = {**os.environ, "DFD_AWS_PORT": stack.aws_url.rsplit(":", 1)[1]}
    printed = ""
    for _ in range(20):
        done = subprocess.run(
            [str(ROOT / "scripts" / "events"), "--endpoint-url", stack.aws_url],
            capture_output=True,
            text=True,
            timeout=60,
            env=env,
            check=True,
        )
        printed += done.stdout
        if "Upload Deduplicated" in printed:
            break
    assert again.json()["upload_id"] in printed
