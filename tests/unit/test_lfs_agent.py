"""scripts/lfs-agent (dfdtools.lfsagent): git-lfs's custom transfer protocol (docs/custom-transfers.md) against an
in-memory /lfs API and part endpoint — init, upload (basic PUT or dfd multipart), download, progress, terminate,
per-object errors, the resume of a killed push's upload — and the one-command install into a real repository."""

from __future__ import annotations

import base64
import hashlib
import io
import json
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from dfdtools import lfsagent
from dfdtools.multipart import StateStore, Tuning, UploadState, file_identity

API = "http://api.test/lfs/game"
PART = 4096
AUTH = "Basic Z2l0OmRmZF9wYXRfeA=="


@dataclass
class Reply:
    status_code: int
    body: Any = None
    headers: dict[str, str] = field(default_factory=dict)
    content: bytes = b""

    @property
    def text(self) -> str:
        return json.dumps(self.body) if self.body is not None else self.content.decode(errors="replace")

    def json(self) -> Any:
        if self.body is None:
            raise ValueError("no JSON")
        return self.body


@dataclass
class Upload:
    size: int
    held: dict[int, tuple[str, int]] = field(default_factory=dict)
    completed: bool = False
    verified: bool = False
    aborted: bool = False

    @property
    def count(self) -> int:
        return -(-self.size // PART)


@dataclass
class FakeLfs:
    """The /lfs multipart routes (as dfd.handlers.lfs answers them), the verify, and S3's endpoints."""

    uploads: dict[str, Upload] = field(default_factory=dict)
    puts: list[tuple[str, int]] = field(default_factory=list)  # (upload id, part) per part PUT
    calls: list[tuple[str, str, dict[str, str]]] = field(default_factory=list)  # API calls
    objects: dict[str, bytes] = field(default_factory=dict)  # basic PUTs and what GETs serve
    refuse_put: int | None = None  # a basic PUT's answer instead of 200
    ingesting: int = 0  # verifies of a completed upload answered 429 (the ingest still hashing) before the 200

    def request(
        self, method: str, url: str, *, headers: Any = None, json: Any = None, data: Any = None, **_: Any
    ) -> Reply:
        headers = dict(headers or {})
        if url.startswith("http://s3.test/"):
            return self._s3(method, url.removeprefix("http://s3.test/"), headers, data)
        self.calls.append((method, url.removeprefix(API), headers))
        if headers.get("Authorization") != AUTH:
            return Reply(401, {"message": "Credentials needed"})
        parts = url.removeprefix(API).strip("/").split("/")
        if parts[0] == "verify":
            upload = self.uploads[parts[1]]
            if upload.completed and self.ingesting:
                self.ingesting -= 1
                return Reply(429, {"message": "being ingested"}, headers={"Retry-After": "7"})
            upload.verified = upload.completed
            return Reply(200 if upload.completed else 422, {} if upload.completed else {"message": "not in the store"})
        upload_id = parts[1]
        upload = self.uploads.get(upload_id)
        if upload is None or upload.aborted or (upload.completed and parts[2:] != ["complete"]):
            return Reply(404 if upload is None else 422, {"message": "no longer pending"})
        if method == "DELETE":
            upload.aborted = True
            return Reply(200, {"upload_id": upload_id, "status": "deleted"})
        if parts[2] == "parts" and method == "GET":
            listed = [{"part_number": n, "etag": e, "size": s} for n, (e, s) in sorted(upload.held.items())]
            plan = {"part_size": PART, "part_count": upload.count, "size": upload.size, "status": "pending"}
            return Reply(200, {"upload_id": upload_id, "parts": listed, **plan})
        if parts[2] == "parts":
            signed = []
            for entry in json["parts"]:
                number = entry["part_number"]
                length = min(PART, upload.size - (number - 1) * PART)
                part_headers = {"content-length": str(length), "x-amz-checksum-sha256": entry["checksum_sha256"]}
                url = f"http://s3.test/{upload_id}/{number}"
                signed.append({"part_number": number, "url": url, "method": "PUT", "headers": part_headers})
            return Reply(200, {"parts": signed, "expires_in": 900})
        given = {p["part_number"]: p["etag"] for p in json["parts"]}
        assert given == {n: e for n, (e, _) in upload.held.items()} and len(given) == upload.count
        upload.completed = True
        return Reply(202, {"upload_id": upload_id, "status": "pending"})

    def _s3(self, method: str, path: str, headers: dict[str, str], data: Any) -> Reply:
        if method == "GET":
            return Reply(200, content=self.objects[path]) if path in self.objects else Reply(403, content=b"denied")
        body = b"".join(iter(lambda: data.read(65536), b""))
        if path.startswith("basic/"):
            if self.refuse_put is not None:
                return Reply(self.refuse_put, content=b"<Error><Code>AccessDenied</Code></Error>")
            assert headers["content-length"] == str(len(body))
            self.objects[path] = body
            return Reply(200, headers={"ETag": '"x"'})
        upload_id, number = path.split("/")
        assert headers["x-amz-checksum-sha256"] == base64.b64encode(hashlib.sha256(body).digest()).decode()
        self.puts.append((upload_id, int(number)))
        etag = '"' + hashlib.md5(body, usedforsecurity=False).hexdigest() + '"'
        self.uploads[upload_id].held[int(number)] = (etag, len(body))
        return Reply(200, headers={"ETag": etag})


@pytest.fixture
def server() -> FakeLfs:
    return FakeLfs()


def converse(
    server: FakeLfs,
    lfs_dir: Path,
    *requests: dict[str, Any],
    sleeps: list[float] | None = None,
    wait: float | None = 60,
) -> tuple[int, list[dict[str, Any]]]:
    """The agent's exit status and every line it wrote, for ``requests`` sent one a line, as git-lfs does; its
    waits go to ``sleeps`` (each advances its clock), the verify's to at most ``wait`` seconds (None: the agent's
    own, by the object's size)."""
    out = io.StringIO()
    lines = [json.dumps(r) + "\n" for r in requests]
    tuning = Tuning(parts_in_flight=2, attempts=2, backoff=0, max_backoff=0)
    waited = sleeps if sleeps is not None else []

    def agent(emit: Any) -> lfsagent.Agent:
        return lfsagent.Agent(
            emit,
            lfs_dir=lfs_dir,
            session=server,
            tuning=tuning,
            sleep=waited.append,
            clock=lambda: sum(waited),
            verify_wait=wait,
        )

    status = lfsagent.run(lines, out, agent)
    return status, [json.loads(line) for line in out.getvalue().splitlines()]


INIT = {"event": "init", "operation": "upload", "remote": "origin", "concurrent": False, "concurrenttransfers": 3}
TERMINATE = {"event": "terminate"}


def lfs_object(root: Path, data: bytes) -> tuple[str, Path]:
    oid = hashlib.sha256(data).hexdigest()
    path = root / "lfs" / "objects" / oid[:2] / oid[2:4] / oid
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    return oid, path


def multipart_request(oid: str, path: Path, size: int, upload_id: str) -> dict[str, Any]:
    header = {
        "Upload-Id": upload_id,
        "Part-Size": str(PART),
        "Part-Count": str(-(-size // PART)),
        "Authorization": AUTH,
    }
    return {"event": "upload", "oid": oid, "size": size, "path": str(path), "action": {"href": API, "header": header}}


def completes(lines: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [line for line in lines if line.get("event") == "complete"]


def progress_of(lines: list[dict[str, Any]], oid: str) -> list[int]:
    return [line["bytesSoFar"] for line in lines if line.get("event") == "progress" and line["oid"] == oid]


def test_init_is_answered_empty_and_terminate_ends_with_status_0_and_no_answer(server: FakeLfs, tmp_path: Path) -> None:
    assert converse(server, tmp_path, INIT, TERMINATE) == (0, [{}])


def test_a_multipart_action_sends_every_part_with_its_sha256_in_parallel_and_completes(
    server: FakeLfs, tmp_path: Path
) -> None:
    data = bytes(range(256)) * 70  # 17,920 B: 5 parts, the last short
    oid, path = lfs_object(tmp_path, data)
    server.uploads["u1"] = Upload(len(data))
    status, lines = converse(server, tmp_path / "lfs", INIT, multipart_request(oid, path, len(data), "u1"), TERMINATE)
    assert status == 0 and lines[0] == {}
    assert completes(lines) == [{"event": "complete", "oid": oid}]
    assert sorted(n for _, n in server.puts) == [1, 2, 3, 4, 5] and server.uploads["u1"].completed
    shown = progress_of(lines, oid)
    assert shown == sorted(shown) and shown[-1] == len(data)  # grows, ends at the size
    sinces = [line["bytesSinceLast"] for line in lines if line.get("event") == "progress"]
    assert sum(sinces) == len(data) and min(sinces) > 0
    # the action's Authorization on every API call; none left over to resume
    assert {headers["Authorization"] for _, _, headers in server.calls} == {AUTH}
    assert not list((tmp_path / "lfs" / "dfd-multipart").glob("*.json"))


def test_complete_is_said_once_the_ingest_recorded_the_object(server: FakeLfs, tmp_path: Path) -> None:
    data = bytes(range(256)) * 20
    oid, path = lfs_object(tmp_path, data)
    server.uploads["u1"] = Upload(len(data))
    server.ingesting = 2
    sleeps: list[float] = []
    request = multipart_request(oid, path, len(data), "u1")
    status, lines = converse(server, tmp_path / "lfs", INIT, request, TERMINATE, sleeps=sleeps)
    assert status == 0 and completes(lines) == [{"event": "complete", "oid": oid}]
    assert sleeps == [7, 7] and server.uploads["u1"].verified  # after each Retry-After
    server.uploads["u2"] = Upload(len(data))
    server.ingesting = 100
    _, lines = converse(server, tmp_path / "lfs", INIT, multipart_request(oid, path, len(data), "u2"), wait=20)
    assert "still being ingested after 20 s" in completes(lines)[0]["error"]["message"]


def test_a_huge_object_s_verify_is_repeated_while_its_segments_hash_it_until_it_is_stored(
    server: FakeLfs, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An object above the segment threshold is hashed for hours (docs/design/segments.md): its verify answers 429
    all that time, and the agent waits by the object's size, not a fixed time."""
    assert lfsagent.verify_wait_for(1) == lfsagent.VERIFY_WAIT
    largest = 10_000 * 5 * 1024**3  # 48.8 TiB: 134,218 s on paper at 400 MB/s
    assert lfsagent.verify_wait_for(largest) >= 4 * largest / 400e6
    data = bytes(range(256)) * 20
    oid, path = lfs_object(tmp_path, data)
    monkeypatch.setattr(lfsagent, "VERIFY_WAIT", 60.0)
    monkeypatch.setattr(lfsagent, "VERIFY_RATE", 1.0)  # this object: 5,120 s
    server.uploads["u1"] = Upload(len(data))
    server.ingesting = 500  # 3,500 s of Retry-After: far past VERIFY_WAIT
    sleeps: list[float] = []
    request = multipart_request(oid, path, len(data), "u1")
    status, lines = converse(server, tmp_path / "lfs", INIT, request, TERMINATE, sleeps=sleeps, wait=None)
    assert status == 0 and completes(lines) == [{"event": "complete", "oid": oid}], lines
    assert len(sleeps) == 500 and server.uploads["u1"].verified
    server.uploads["u2"] = Upload(len(data))
    server.ingesting = 1000  # 7,000 s: past its size's wait
    _, lines = converse(server, tmp_path / "lfs", INIT, multipart_request(oid, path, len(data), "u2"), wait=None)
    assert "still being ingested after 5120 s" in completes(lines)[0]["error"]["message"]


def test_a_push_run_again_resumes_the_killed_upload_verifies_it_and_aborts_the_new_one(
    server: FakeLfs, tmp_path: Path
) -> None:
    data = bytes(range(256)) * 70
    oid, path = lfs_object(tmp_path, data)
    # the first run: upload u1 was registered, its state kept, parts 1 and 2 sent, then the push was killed
    first = Upload(len(data))
    server.uploads["u1"] = first
    absolute, size, mtime_ns = file_identity(path)
    states = StateStore(tmp_path / "lfs" / "dfd-multipart")
    states.save(UploadState(absolute, size, mtime_ns, API, "u1", PART, first.count))
    for number in (1, 2):
        chunk = data[(number - 1) * PART : number * PART]
        first.held[number] = ('"' + hashlib.md5(chunk, usedforsecurity=False).hexdigest() + '"', len(chunk))
    server.uploads["u2"] = Upload(len(data))  # the second run's batch registered u2

    status, lines = converse(server, tmp_path / "lfs", INIT, multipart_request(oid, path, len(data), "u2"), TERMINATE)
    assert status == 0 and completes(lines) == [{"event": "complete", "oid": oid}]
    assert sorted(server.puts) == [("u1", 3), ("u1", 4), ("u1", 5)]  # only the parts S3 did not hold
    assert first.completed and first.verified  # ingested before the agent says complete
    assert server.uploads["u2"].aborted and not server.uploads["u2"].held
    assert progress_of(lines, oid)[0] == 2 * PART and progress_of(lines, oid)[-1] == len(data)
    assert states.load(path) is None


def test_a_kept_upload_no_longer_pending_gives_way_to_the_batchs_own(server: FakeLfs, tmp_path: Path) -> None:
    data = bytes(range(256)) * 20
    oid, path = lfs_object(tmp_path, data)
    absolute, size, mtime_ns = file_identity(path)
    StateStore(tmp_path / "lfs" / "dfd-multipart").save(UploadState(absolute, size, mtime_ns, API, "gone", PART, 2))
    server.uploads["u2"] = Upload(len(data))
    status, lines = converse(server, tmp_path / "lfs", INIT, multipart_request(oid, path, len(data), "u2"), TERMINATE)
    assert status == 0 and completes(lines) == [{"event": "complete", "oid": oid}]
    assert server.uploads["u2"].completed and not server.uploads["u2"].aborted


def test_a_basic_action_is_one_put_with_exactly_its_signed_headers(server: FakeLfs, tmp_path: Path) -> None:
    data = b"small object"
    oid, path = lfs_object(tmp_path, data)
    header = {"content-length": str(len(data)), "x-amz-checksum-sha256": "abc", "if-none-match": "*"}
    upload = {"event": "upload", "oid": oid, "size": len(data), "path": str(path)}
    upload["action"] = {"href": f"http://s3.test/basic/{oid}", "header": header}
    status, lines = converse(server, tmp_path / "lfs", INIT, upload, TERMINATE)
    assert status == 0 and completes(lines) == [{"event": "complete", "oid": oid}]
    assert server.objects[f"basic/{oid}"] == data and server.calls == []
    assert progress_of(lines, oid)[-1] == len(data)


def test_a_failed_object_is_its_own_error_and_the_next_one_still_goes(server: FakeLfs, tmp_path: Path) -> None:
    refused_oid, refused_path = lfs_object(tmp_path, b"refused")
    data = bytes(range(256)) * 20
    oid, path = lfs_object(tmp_path, data)
    server.refuse_put = 403
    refused = {"event": "upload", "oid": refused_oid, "size": 7, "path": str(refused_path)}
    refused["action"] = {"href": f"http://s3.test/basic/{refused_oid}", "header": {"content-length": "7"}}
    server.uploads["u1"] = Upload(len(data))
    status, lines = converse(server, tmp_path / "lfs", INIT, refused, multipart_request(oid, path, len(data), "u1"))
    assert status == 0
    failed, done = completes(lines)
    assert failed["oid"] == refused_oid and failed["error"]["code"] == 2
    assert "answered 403" in failed["error"]["message"]
    assert done == {"event": "complete", "oid": oid}


def test_a_multipart_action_without_its_plan_is_an_error_of_that_object(server: FakeLfs, tmp_path: Path) -> None:
    oid, path = lfs_object(tmp_path, b"x" * 100)
    request = multipart_request(oid, path, 100, "u1")
    del request["action"]["header"]["Part-Size"]
    _, lines = converse(server, tmp_path / "lfs", INIT, request, TERMINATE)
    assert "Part-Size" in completes(lines)[0]["error"]["message"]


def test_a_download_is_a_file_under_lfs_tmp_that_git_lfs_takes_over(server: FakeLfs, tmp_path: Path) -> None:
    data = b"downloaded bytes"
    oid = hashlib.sha256(data).hexdigest()
    server.objects[f"obj/{oid}"] = data
    download = {"event": "download", "oid": oid, "size": len(data), "action": {"href": f"http://s3.test/obj/{oid}"}}
    init = INIT | {"operation": "download"}
    status, lines = converse(server, tmp_path / "lfs", init, download, TERMINATE)
    assert status == 0
    (done,) = completes(lines)
    assert Path(done["path"]).read_bytes() == data and Path(done["path"]).parent == tmp_path / "lfs" / "tmp"
    missing = download | {"action": {"href": "http://s3.test/obj/nothing"}}
    _, lines = converse(server, tmp_path / "lfs", init, missing, TERMINATE)
    assert completes(lines)[0]["error"]["code"] == 2 and not list((tmp_path / "lfs" / "tmp").glob("nothing*"))


@pytest.mark.parametrize("line", ["not json", "[1]", '{"event": "dance"}'])
def test_a_broken_conversation_is_fatal_with_a_nonzero_status(server: FakeLfs, tmp_path: Path, line: str) -> None:
    out = io.StringIO()
    agent = lambda emit: lfsagent.Agent(emit, lfs_dir=tmp_path, session=server)  # noqa: E731
    assert lfsagent.run([json.dumps(INIT) + "\n", line + "\n"], out, agent) == 1


def test_install_writes_the_custom_transfer_config_of_the_repository(tmp_path: Path) -> None:
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    written = lfsagent.install(False, cwd=tmp_path)
    assert f"lfs.customtransfer.dfd-multipart.path={lfsagent.AGENT}" in written

    def config(name: str) -> str:
        done = subprocess.run(["git", "config", "--local", name], cwd=tmp_path, capture_output=True, text=True)
        return done.stdout.strip()

    assert config("lfs.customtransfer.dfd-multipart.path") == str(lfsagent.AGENT)
    assert config("lfs.customtransfer.dfd-multipart.args") == "transfer"
    assert config("lfs.customtransfer.dfd-multipart.concurrent") == "false"
    assert config("lfs.customtransfer.dfd-multipart.direction") == "upload"
    assert lfsagent.AGENT.exists() and lfsagent.git_lfs_dir(tmp_path) == (tmp_path / ".git" / "lfs").resolve()
