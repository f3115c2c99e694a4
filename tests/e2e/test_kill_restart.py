"""Kill the local stack with SIGKILL in the middle of a storm of uploads, multipart completions and deletes, start it
again on the same data directory, and lose nothing that was acknowledged: every upload whose last step got a 2xx
(its PUT, its completion) ends stored with its bytes, every acknowledged delete stays deleted, the audit (counters
against a recount, every content's object present) holds, and a token issued before the kill still works. A request
the kill left unanswered has an unknown outcome: an upload whose DELETE got no answer ends either stored with its
bytes or deleted."""

from __future__ import annotations

import hashlib
import os
import random
import signal
import socket
import sys
import threading
import time
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
import requests

from tests.e2e.e2e_helpers import (
    ROOT,
    RunningStack,
    clean_env,
    launch_stack,
    run_audit,
    settled,
    stop_stack,
    wait_until,
)

pytestmark = pytest.mark.e2e

MIB = 1024 * 1024
# ReconcileGraceSeconds, longer than the test waits: an acknowledged upload ends stored by its own S3 notification,
# kept on disk with its object, not by the reconcile's re-drive of a pending upload whose object exists
GRACE = 900
STORM_SECONDS = 8.0
FINAL = ("stored", "duplicate")
GONE = ("deleted", "404")


def launch(base: Path, data: Path, name: str) -> RunningStack:
    work = base / name
    work.mkdir()
    command = [sys.executable, "-m", "dfdlocal", "--api-port", "0", "--lambda-port", "0", "--aws-port", "0"]
    command += ["--ready-file", str(work / "ready.json"), "--param", f"ReconcileGraceSeconds={GRACE}"]
    env = clean_env() | {"DFD_DATA_DIR": str(data), "DFD_RECONCILE_INTERVAL": "5"}
    return launch_stack(command, cwd=ROOT, env=env, workdir=work)


class Storm:
    """Threads uploading (single PUTs and two-part multipart uploads) and deleting, recording what was
    acknowledged, until the stack stops answering."""

    def __init__(self, stack: RunningStack, token: str) -> None:
        self.api = stack.api_url
        self.auth = {"Authorization": f"Bearer {token}"}
        self.lock = threading.Lock()
        self.acknowledged: dict[str, bytes] = {}  # upload id -> its bytes: the PUT or the completion got a 2xx
        self.deleted: set[str] = set()  # the DELETE got a 2xx
        self.in_doubt: set[str] = set()  # the DELETE was sent and got no answer: deleted or not
        self.stop = threading.Event()

    def _post(self, path: str, **kw: Any) -> requests.Response:
        return requests.post(self.api + path, headers=self.auth, timeout=30, **kw)

    def single(self, rng: random.Random) -> None:
        data = rng.randbytes(rng.randint(1, 64 * 1024)) if rng.random() < 0.8 else b"shared content\n" * 100
        issued = self._post("/upload", json={"filename": "s.bin", "size": len(data)})
        if issued.status_code != 201:
            return  # 409: a duplicate by its hash (not sent here), or the stack going down
        answer = issued.json()
        if requests.put(answer["upload_url"], data=data, headers=answer["headers"], timeout=30).status_code == 200:
            with self.lock:
                self.acknowledged[answer["upload_id"]] = data

    def multipart(self, rng: random.Random) -> None:
        data = rng.randbytes(5 * MIB + rng.randint(1, 4096))
        created = self._post("/upload", json={"filename": "m.bin", "size": len(data), "multipart": True})
        if created.status_code != 201:
            return
        upload_id, size = created.json()["upload_id"], created.json()["part_size"]
        chunks = [data[i : i + size] for i in range(0, len(data), size)]
        parts = self._post(f"/uploads/{upload_id}/parts", json={"parts": [{"part_number": 1}, {"part_number": 2}]})
        if parts.status_code != 200:
            return
        etags = []
        for part, chunk in zip(parts.json()["parts"], chunks, strict=True):
            sent = requests.put(part["url"], data=chunk, headers=part["headers"], timeout=30)
            if sent.status_code != 200:
                return
            etags.append({"part_number": part["part_number"], "etag": sent.headers["ETag"]})
        if self._post(f"/uploads/{upload_id}/complete", json={"parts": etags}).status_code == 202:
            with self.lock:
                self.acknowledged[upload_id] = data

    def delete(self, rng: random.Random) -> None:
        with self.lock:
            candidates = sorted(set(self.acknowledged) - self.deleted - self.in_doubt)
            if not candidates:
                return
            upload_id = rng.choice(candidates)
            self.in_doubt.add(upload_id)  # until its answer comes
        answer = requests.delete(f"{self.api}/uploads/{upload_id}", headers=self.auth, timeout=30)
        with self.lock:
            self.in_doubt.discard(upload_id)  # answered: the status says what happened
            if answer.status_code == 204:
                self.deleted.add(upload_id)

    def worker(self, seed: int) -> None:
        rng = random.Random(seed)
        while not self.stop.is_set():
            try:
                kind = rng.random()
                if kind < 0.6:
                    self.single(rng)
                elif kind < 0.8:
                    self.multipart(rng)
                else:
                    self.delete(rng)
            except (requests.RequestException, KeyError, ValueError):
                if self.stop.is_set():
                    return
                time.sleep(0.05)  # the stack went away mid-call: that call was not acknowledged


def port_closed(url: str) -> bool:
    address = urlsplit(url)
    try:
        with socket.create_connection((address.hostname or "127.0.0.1", address.port or 80), timeout=1):
            return False
    except OSError:
        return True


def test_sigkill_during_a_storm_loses_nothing_acknowledged(tmp_path: Path) -> None:
    data = tmp_path / "data"
    first = launch(tmp_path, data, "first")
    token = first.token("alice")
    storm = Storm(first, token)
    threads = [threading.Thread(target=storm.worker, args=(seed,), daemon=True) for seed in range(6)]
    for thread in threads:
        thread.start()
    wait_until(lambda: len(storm.acknowledged) >= 10 and storm.deleted, timeout=120)
    time.sleep(STORM_SECONDS)
    os.killpg(first.process.pid, signal.SIGKILL)  # the stack, mid-storm; DynamoDB Local dies with it
    first.process.wait(10)
    storm.stop.set()
    for thread in threads:
        thread.join(60)
    wait_until(lambda: port_closed(first.description["dynamodb_url"]), timeout=20)
    acknowledged, deleted, in_doubt = dict(storm.acknowledged), set(storm.deleted), set(storm.in_doubt)
    assert acknowledged and deleted
    kept = set(acknowledged) - deleted - in_doubt  # must end stored

    second = launch(tmp_path, data, "second")
    try:
        alice = {"Authorization": f"Bearer {token}"}  # issued before the kill: the signing key was kept
        me = requests.get(f"{second.api_url}/me", headers=alice, timeout=10)
        assert me.status_code == 200, me.text

        def status(upload_id: str) -> str:
            answer = requests.get(f"{second.api_url}/metadata/{upload_id}", headers=alice, timeout=10)
            return str(answer.json().get("status")) if answer.status_code == 200 else str(answer.status_code)

        def unfinished() -> dict[str, str]:
            found = {u: status(u) for u in kept} | {u: status(u) for u in in_doubt}
            return {u: s for u, s in found.items() if s not in FINAL and not (u in in_doubt and s in GONE)}

        deadline, left = time.monotonic() + 180, unfinished()
        while left and time.monotonic() < deadline:
            time.sleep(1.0)
            left = unfinished()
        assert not left, f"acknowledged uploads not stored 180 s after the restart (id: status): {left}"
        for upload_id in deleted:
            assert status(upload_id) in GONE, upload_id
        for upload_id, body in acknowledged.items():
            if upload_id in deleted or (upload_id in in_doubt and status(upload_id) in GONE):
                continue
            link = requests.get(f"{second.api_url}/download/{upload_id}", headers=alice, timeout=30)
            assert link.status_code == 200, (upload_id, link.text)
            got = requests.get(link.json()["download_url"], timeout=60)  # the stored content's bytes
            assert got.status_code == 200, (upload_id, got.text[:200])
            assert hashlib.sha256(got.content).hexdigest() == hashlib.sha256(body).hexdigest(), upload_id
        wait_until(lambda: settled(second), timeout=180, interval=1.0)
        audit = run_audit(second)
        assert audit.returncode == 0, audit.stdout + audit.stderr
    finally:
        stop_stack(second)
