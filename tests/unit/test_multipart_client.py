"""The multipart upload client (scripts/dfdtools/multipart.py) against a fake API and a fake part endpoint:
an injected HTTP session, no network. The fake API follows the contract (MULTIPART.md): presign ≤ 100
parts per call with the exact Content-Length and the given x-amz-checksum-sha256; the part endpoint checks both
like S3 does and answers an ETag; complete checks every part is there with its ETag."""

from __future__ import annotations

import base64
import hashlib
import io
import json
import re
import threading
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import requests

from dfdtools import multipart, upload
from dfdtools.multipart import (
    ApiError,
    MultipartError,
    MultipartUploader,
    StateStore,
    Tuning,
    UploadGone,
    UploadInterrupted,
)

API = "http://api.test"
PART = 5 * 1024  # a small part size: the client takes whatever the server plans


@dataclass
class FakeResponse:
    status_code: int
    body: Any = None
    headers: dict[str, str] = field(default_factory=dict)
    raw_text: str = ""

    @property
    def text(self) -> str:
        return self.raw_text or json.dumps(self.body)

    @property
    def ok(self) -> bool:
        return self.status_code < 400

    def json(self) -> Any:
        if self.body is None:
            raise ValueError("no JSON")
        return self.body


Fault = Callable[[], FakeResponse]  # a part PUT's answer instead of the real one (or raises)


@dataclass
class FakeServer:
    """The API's multipart routes and the presigned part endpoint, in memory."""

    size: int
    part_size: int = PART
    upload_id: str = "u1"
    expires_in: int = 900
    held: dict[int, tuple[str, int]] = field(default_factory=dict)  # part -> (etag, size)
    puts: list[int] = field(default_factory=list)  # part numbers, one per PUT that reached the endpoint
    presigned: list[list[int]] = field(default_factory=list)  # part numbers per presign call
    api_calls: list[tuple[str, str, Mapping[str, str]]] = field(default_factory=list)
    completed: list[dict[str, Any]] = field(default_factory=list)
    faults: dict[int, list[Fault]] = field(default_factory=dict)  # next answers of a part's PUTs
    api_faults: list[FakeResponse] = field(default_factory=list)  # next answers of API calls
    in_flight: int = 0
    max_in_flight: int = 0
    on_put: Callable[[int], None] | None = None  # called inside each PUT (concurrency probes, cancels)
    lock: threading.Lock = field(default_factory=threading.Lock)
    generation: int = 0  # bumped by re-presigning: older URLs answer "expired" when `expire_old` is set
    expire_old: bool = False

    @property
    def part_count(self) -> int:
        return -(-self.size // self.part_size)

    def part_len(self, number: int) -> int:
        return min(self.part_size, self.size - (number - 1) * self.part_size)

    def issued(self) -> dict[str, Any]:
        return {
            "upload_id": self.upload_id,
            "multipart": True,
            "part_size": self.part_size,
            "part_count": self.part_count,
            "key": f"uploads/{self.upload_id}",
            "bucket": "b",
            "expires_at": "2026-11-24T00:00:00Z",
            "expires_in": 86400,
        }

    # -- the session's request ------------------------------------------------------------------
    def request(
        self,
        method: str,
        url: str,
        *,
        headers: Mapping[str, str] | None = None,
        json: Any = None,
        data: Any = None,
        timeout: float = 0,
    ) -> FakeResponse:
        if url.startswith("http://s3.test/"):
            return self._put(url, dict(headers or {}), data)
        with self.lock:
            self.api_calls.append((method, url[len(API) :], dict(headers or {})))
            if self.api_faults:
                return self.api_faults.pop(0)
        path = url[len(API) :]
        if method == "POST" and path == f"/uploads/{self.upload_id}/parts":
            return self._presign(json)
        if method == "GET" and path == f"/uploads/{self.upload_id}/parts":
            parts = [{"part_number": n, "etag": e, "size": s} for n, (e, s) in sorted(self.held.items())]
            plan = {"part_size": self.part_size, "part_count": self.part_count, "size": self.size}
            return FakeResponse(200, {"upload_id": self.upload_id, "parts": parts, **plan, "status": "pending"})
        if method == "POST" and path == f"/uploads/{self.upload_id}/complete":
            missing = [n for n in range(1, self.part_count + 1) if n not in self.held]
            if missing:
                return FakeResponse(409, {"error": {"code": "incomplete", "message": "parts missing",
                                                    "details": {"missing": missing, "wrong_size": []}}})  # fmt: skip
            given = {p["part_number"]: p["etag"] for p in json["parts"]}
            if given != {n: e for n, (e, _) in self.held.items()}:
                return FakeResponse(409, {"error": {"code": "etag_mismatch", "message": "etags differ"}})
            self.completed.append(json)
            return FakeResponse(202, {"upload_id": self.upload_id, "status": "pending"})
        return FakeResponse(404, {"error": {"code": "not_found", "message": "no such upload"}})

    def _presign(self, body: Any) -> FakeResponse:
        parts = body["parts"]
        assert 1 <= len(parts) <= 100, len(parts)
        with self.lock:
            self.presigned.append([p["part_number"] for p in parts])
            self.generation += 1
        answer = []
        for part in parts:
            number = part["part_number"]
            assert 1 <= number <= self.part_count
            headers = {"content-length": str(self.part_len(number))}
            if "checksum_sha256" in part:
                headers["x-amz-checksum-sha256"] = part["checksum_sha256"]
            url = f"http://s3.test/{self.upload_id}?partNumber={number}&gen={self.generation}"
            answer.append({"part_number": number, "url": url, "method": "PUT", "headers": headers})
        return FakeResponse(200, {"parts": answer, "expires_in": self.expires_in})

    def _put(self, url: str, headers: dict[str, str], data: Any) -> FakeResponse:
        number = int(re.search(r"partNumber=(\d+)", url).group(1))  # type: ignore[union-attr]
        generation = int(re.search(r"gen=(\d+)", url).group(1))  # type: ignore[union-attr]
        with self.lock:
            self.puts.append(number)
            self.in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self.in_flight)
            fault = self.faults.get(number, []).pop(0) if self.faults.get(number) else None
        try:
            if self.on_put is not None:
                self.on_put(number)
            if fault is not None:
                data.read(1024)  # a failure in the middle of the body
                return fault()
            if self.expire_old and generation < self.generation:
                return FakeResponse(403, raw_text="<Error><Code>AccessDenied</Code><Message>Request has expired")
            chunks = []
            while chunk := data.read(65536):
                chunks.append(chunk)
            body = b"".join(chunks)
            assert int(headers["content-length"]) == len(body) == len(data)
            digest = base64.b64encode(hashlib.sha256(body).digest()).decode()
            if headers.get("x-amz-checksum-sha256") != digest:
                return FakeResponse(400, raw_text="<Error><Code>BadDigest</Code></Error>")
            etag = f'"{hashlib.md5(body).hexdigest()}"'  # noqa: S324 - S3's part ETag
            with self.lock:
                self.held[number] = (etag, len(body))
            return FakeResponse(200, headers={"ETag": etag})
        finally:
            with self.lock:
                self.in_flight -= 1


@pytest.fixture
def data_file(tmp_path: Path) -> Path:
    path = tmp_path / "big.bin"
    path.write_bytes(bytes(range(256)) * 100 + b"tail")  # 25,604 B: 6 parts of 5 KiB, the last 4 bytes
    return path


@pytest.fixture
def states(tmp_path: Path) -> StateStore:
    return StateStore(tmp_path / "state")


def server_for(path: Path, **kwargs: Any) -> FakeServer:
    return FakeServer(size=path.stat().st_size, **kwargs)


def uploader(
    server: FakeServer, states: StateStore, sleeps: list[float] | None = None, **tuning: Any
) -> MultipartUploader:
    waits = sleeps if sleeps is not None else []
    return MultipartUploader(
        API,
        session=server,
        headers={"Authorization": "Bearer t0k"},
        tuning=Tuning(**{"backoff": 0.5, **tuning}),
        states=states,
        sleep=waits.append,
    )


class Recorder:
    def __init__(self) -> None:
        self.done = 0
        self.closed = False
        self.lock = threading.Lock()

    def update(self, amount: int) -> None:
        with self.lock:
            self.done += amount

    def close(self) -> None:
        self.closed = True


# ---------------------------------------------------------------------- the happy path
def test_uploads_every_part_with_its_checksum_and_completes_with_the_etags(data_file: Path, states: StateStore) -> None:
    server = server_for(data_file)
    progress = Recorder()
    client = uploader(server, states)
    assert client.start(data_file, server.issued(), progress) == "u1"
    assert sorted(server.puts) == [1, 2, 3, 4, 5, 6]
    assert server.held[6][1] == 4  # the last part is the remainder
    (completed,) = server.completed
    assert completed["parts"] == [{"part_number": n, "etag": server.held[n][0]} for n in range(1, 7)]
    assert server.presigned == [[1, 2, 3, 4], [5, 6]]  # parts_in_flight first, then doubling
    assert all(headers == {"Authorization": "Bearer t0k"} for _, _, headers in server.api_calls)
    assert progress.done == data_file.stat().st_size and progress.closed
    assert client.sent == data_file.stat().st_size
    assert not states.path_for(data_file).exists()  # complete answered 202: nothing left to resume


def test_presigns_in_batches_of_at_most_100(tmp_path: Path, states: StateStore) -> None:
    path = tmp_path / "many.bin"
    path.write_bytes(b"x" * (250 * 16))
    server = FakeServer(size=250 * 16, part_size=16)
    uploader(server, states, parts_in_flight=3).start(path, server.issued())
    assert [len(batch) for batch in server.presigned] == [3, 3, 6, 12, 24, 48, 96, 58]  # doubling, ≤ 100
    assert sorted(n for batch in server.presigned for n in batch) == list(range(1, 251))
    assert len(server.completed[0]["parts"]) == 250


def test_the_next_batch_s_checksums_are_computed_while_this_one_is_sent(
    tmp_path: Path, states: StateStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every part's SHA-256 is computed once; those of every batch after the first by the thread that works
    ahead (started as soon as the previous batch is presigned), not by a worker holding the presign lock."""
    path = tmp_path / "ahead.bin"
    path.write_bytes(bytes(range(256)) * 3)  # 48 parts of 16 bytes
    server = FakeServer(size=768, part_size=16)
    hashed: list[tuple[int, str]] = []
    real = multipart.part_checksum

    def recording(file: str, offset: int, length: int) -> str:
        hashed.append((offset // 16 + 1, threading.current_thread().name))
        return real(file, offset, length)

    monkeypatch.setattr(multipart, "part_checksum", recording)
    uploader(server, states, parts_in_flight=3).start(path, server.issued())
    assert [len(batch) for batch in server.presigned] == [3, 3, 6, 12, 24]
    assert sorted(number for number, _ in hashed) == list(range(1, 49))
    assert {number for number, thread in hashed if not thread.startswith("dfd-part-sha256")} == {1, 2, 3}
    assert len(server.completed) == 1


def test_parts_in_flight_reach_but_never_exceed_the_bound(tmp_path: Path, states: StateStore) -> None:
    path = tmp_path / "wide.bin"
    path.write_bytes(b"y" * (12 * 16))
    server = FakeServer(size=12 * 16, part_size=16)
    first_wave = threading.Barrier(3, timeout=30)  # breaks (and the upload fails) unless 3 PUTs overlap

    def probe(number: int) -> None:
        if number <= 3:
            first_wave.wait()

    server.on_put = probe
    uploader(server, states, parts_in_flight=3).start(path, server.issued())
    assert server.max_in_flight == 3
    assert len(server.held) == 12


# ---------------------------------------------------------------------- retries
def test_network_errors_and_5xx_are_retried_with_backoff(data_file: Path, states: StateStore) -> None:
    server = server_for(data_file)

    def drop() -> FakeResponse:
        raise requests.ConnectionError("connection reset")

    server.faults = {2: [drop, lambda: FakeResponse(503, raw_text="SlowDown")], 5: [lambda: FakeResponse(500)]}
    sleeps: list[float] = []
    progress = Recorder()
    client = uploader(server, states, sleeps)
    client.start(data_file, server.issued(), progress)
    assert server.puts.count(2) == 3 and server.puts.count(5) == 2
    assert sorted(sleeps) == [0.5, 0.5, 1.0]  # doubled per failed attempt of the same part
    assert progress.done == data_file.stat().st_size  # failed attempts' bytes are taken back
    assert client.sent > data_file.stat().st_size  # but they were sent
    assert len(server.completed) == 1


def test_a_part_gives_up_after_its_attempts(data_file: Path, states: StateStore) -> None:
    server = server_for(data_file)
    server.faults = {3: [lambda: FakeResponse(500)] * 3}
    with pytest.raises(MultipartError, match=r"part 3: gave up after 3 attempts \(PUT answered 500\)"):
        uploader(server, states, attempts=3).start(data_file, server.issued())
    assert server.completed == []
    assert states.load(data_file) is not None  # resumable later


def test_an_expired_url_is_presigned_again(data_file: Path, states: StateStore) -> None:
    server = server_for(data_file)
    expired = "<Error><Code>AccessDenied</Code><Message>Request has expired</Message></Error>"
    server.faults = {4: [lambda: FakeResponse(403, raw_text=expired)]}
    sleeps: list[float] = []
    uploader(server, states, sleeps).start(data_file, server.issued())
    assert sorted(server.presigned) == [[1, 2, 3, 4], [4], [5, 6]]
    assert sleeps == []  # not a failure: no backoff
    assert len(server.completed) == 1


def test_a_url_near_its_expiry_is_presigned_before_use(data_file: Path, states: StateStore) -> None:
    server = server_for(data_file, expires_in=10)  # the margin (half of it, at most 30 s) is already gone
    now = [0.0]
    client = MultipartUploader(
        API, session=server, tuning=Tuning(parts_in_flight=1), states=states, clock=lambda: now[0]
    )
    server.on_put = lambda _: now.__setitem__(0, now[0] + 6)  # each part takes 6 s
    client.start(data_file, server.issued())
    # a URL is good for 5 s (10 s minus the margin): 3 and 4 are presigned at t=12, 4 is sent at t=18
    assert server.presigned == [[1], [2], [3, 4], [4], [5, 6], [6]]


def test_other_4xx_on_a_part_fail_clearly(data_file: Path, states: StateStore) -> None:
    server = server_for(data_file)
    server.faults = {1: [lambda: FakeResponse(403, raw_text="<Code>SignatureDoesNotMatch</Code>")]}
    with pytest.raises(MultipartError, match=r"part 1: PUT answered 403: .*SignatureDoesNotMatch"):
        uploader(server, states, parts_in_flight=1).start(data_file, server.issued())


def test_a_file_changed_after_its_checksums_fails_clearly(data_file: Path, states: StateStore) -> None:
    server = server_for(data_file)
    original = data_file.read_bytes()

    def change(number: int) -> None:
        if number == 1:  # after the checksums of the batch were taken
            data_file.write_bytes(b"!" * len(original))

    server.on_put = change
    with pytest.raises(MultipartError, match="no longer match their SHA-256: the file changed"):
        uploader(server, states, parts_in_flight=1).start(data_file, server.issued())


# ---------------------------------------------------------------------- interruption and resume
def test_cancel_keeps_the_state_and_resume_sends_only_the_missing_parts(data_file: Path, states: StateStore) -> None:
    server = server_for(data_file)
    first = uploader(server, states, parts_in_flight=1)
    server.on_put = lambda number: first.cancel() if number == 3 else None  # stop while part 3 is sent
    with pytest.raises(UploadInterrupted) as stopped:
        first.start(data_file, server.issued())
    assert sorted(server.held) == [1, 2]  # part 3 was abandoned mid-body
    assert f"--resume {data_file.resolve()}" in str(stopped.value)
    kept = states.load(data_file)
    assert kept is not None and kept.upload_id == "u1" and kept.api == API
    assert stopped.value.state_path == states.path_for(data_file)
    on_disk = json.loads(stopped.value.state_path.read_text())
    assert on_disk["part_size"] == PART and on_disk["part_count"] == 6 and on_disk["size"] == 25604

    server.puts.clear()
    server.on_put = None
    progress = Recorder()
    second = uploader(server, states)
    assert second.resume(kept, progress) == "u1"
    assert sorted(server.puts) == [3, 4, 5, 6]
    assert server.presigned[-1] == [3, 4, 5, 6]
    assert second.sent == data_file.stat().st_size - 2 * PART
    assert progress.done == data_file.stat().st_size  # the held parts count as done
    assert server.completed[0]["parts"] == [{"part_number": n, "etag": server.held[n][0]} for n in range(1, 7)]
    assert states.load(data_file) is None


def test_resume_sends_a_part_of_the_wrong_size_again(data_file: Path, states: StateStore) -> None:
    server = server_for(data_file)
    server.held = {n: (f'"e{n}"', PART) for n in range(1, 6)} | {6: ('"short"', 1)}
    client = uploader(server, states)
    state = multipart.UploadState(*multipart.file_identity(data_file), API, "u1", PART, 6)
    client.resume(state)
    assert server.puts == [6]


def test_resume_of_an_upload_the_server_no_longer_has_forgets_the_state(data_file: Path, states: StateStore) -> None:
    server = server_for(data_file)
    state = multipart.UploadState(*multipart.file_identity(data_file), API, "u1", PART, 6)
    states.save(state)
    server.api_faults = [FakeResponse(409, {"error": {"code": "not_pending", "message": "stored",
                                                      "details": {"status": "stored"}}})]  # fmt: skip
    with pytest.raises(UploadGone, match="409 not_pending"):
        uploader(server, states).resume(state)
    assert states.load(data_file) is None


def test_resume_refuses_a_server_plan_other_than_the_kept_one(data_file: Path, states: StateStore) -> None:
    server = server_for(data_file, part_size=2 * PART)
    state = multipart.UploadState(*multipart.file_identity(data_file), API, "u1", PART, 6)
    with pytest.raises(MultipartError, match="is not the one kept in the state"):
        uploader(server, states).resume(state)


def test_a_changed_file_has_no_state_to_resume(data_file: Path, states: StateStore) -> None:
    state = multipart.UploadState(*multipart.file_identity(data_file), API, "u1", PART, 6)
    states.save(state)
    assert states.load(data_file) == state
    data_file.write_bytes(data_file.read_bytes() + b"more")
    assert states.load(data_file) is None


def test_ctrl_c_stops_cleanly_and_keeps_the_state(
    data_file: Path, states: StateStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    server = server_for(data_file)
    real_wait = multipart.wait
    calls = iter(range(100))

    def interrupted_wait(*args: Any, **kwargs: Any) -> Any:
        if next(calls) == 2:
            raise KeyboardInterrupt
        return real_wait(*args, **kwargs)

    monkeypatch.setattr(multipart, "wait", interrupted_wait)
    with pytest.raises(UploadInterrupted):
        uploader(server, states, parts_in_flight=1).start(data_file, server.issued())
    assert states.load(data_file) is not None
    assert server.completed == []


# ---------------------------------------------------------------------- bad answers
@pytest.mark.parametrize(
    ("answer", "message"),
    [
        (FakeResponse(200, {"parts": "nope", "expires_in": 900}), "answered an unexpected body"),
        (FakeResponse(200, {"parts": [], "expires_in": 900}), r"presigned parts \[\], asked for \[1, 2"),
        (
            FakeResponse(
                200,
                {
                    "parts": [{"part_number": n, "url": "ftp://x", "headers": {}} for n in range(1, 5)],
                    "expires_in": 900,
                },
            ),
            "part 1 has no usable url",
        ),
        (FakeResponse(200, raw_text="<html>"), "answered 200 without JSON"),
        (
            FakeResponse(400, {"error": {"code": "validation_error", "message": "part_number out of range"}}),
            "400 validation_error: part_number out of range",
        ),
        (FakeResponse(403, {"error": {"code": "not_owner", "message": "not yours"}}), "403 not_owner: not yours"),
    ],
)
def test_bad_presign_answers_are_clear_errors(
    data_file: Path, states: StateStore, answer: FakeResponse, message: str
) -> None:
    server = server_for(data_file)
    server.api_faults = [answer]
    with pytest.raises(MultipartError, match=message):
        uploader(server, states).start(data_file, server.issued())


def test_api_5xx_is_retried(data_file: Path, states: StateStore) -> None:
    server = server_for(data_file)
    server.api_faults = [FakeResponse(502, raw_text="bad gateway"), FakeResponse(503, raw_text="busy")]
    sleeps: list[float] = []
    uploader(server, states, sleeps).start(data_file, server.issued())
    assert sleeps == [0.5, 1.0] and len(server.completed) == 1


def test_a_part_without_an_etag_is_a_clear_error(data_file: Path, states: StateStore) -> None:
    server = server_for(data_file)
    server.faults = {1: [lambda: FakeResponse(200)]}
    with pytest.raises(MultipartError, match="without an ETag header"):
        uploader(server, states, parts_in_flight=1).start(data_file, server.issued())


def test_complete_refused_names_what_is_missing(data_file: Path, states: StateStore) -> None:
    server = server_for(data_file)
    real = server.request

    def forget_part_2(method: str, url: str, **kwargs: Any) -> FakeResponse:
        if url.endswith("/complete"):
            server.held.pop(2, None)
        return real(method, url, **kwargs)

    client = MultipartUploader(API, session=type("S", (), {"request": staticmethod(forget_part_2)})(), states=states)
    with pytest.raises(ApiError, match=r'409 incomplete: parts missing \{"missing": \[2\]'):
        client.start(data_file, server.issued())


@pytest.mark.parametrize(
    ("issued", "message"),
    [
        ({"multipart": True, "part_size": PART, "part_count": 6}, "without a upload_id"),
        ({"upload_id": "u1", "part_size": 0, "part_count": 6}, "bad part_size: 0"),
        ({"upload_id": "u1", "part_size": PART, "part_count": 3}, "3 parts of 5120 B do not make"),
    ],
)
def test_bad_create_answers_are_clear_errors(
    data_file: Path, states: StateStore, issued: dict[str, Any], message: str
) -> None:
    with pytest.raises(MultipartError, match=message):
        uploader(server_for(data_file), states).start(data_file, issued)
    assert states.load(data_file) is None


# ---------------------------------------------------------------------- the CLI
class FakeRequests:
    """upload.py's module-level requests.post/get, routed to the fake server."""

    def __init__(self, server: FakeServer) -> None:
        self.server = server
        self.posts: list[dict[str, Any]] = []

    def post(self, url: str, json: Any = None, **_: Any) -> FakeResponse:
        self.posts.append(json)
        return FakeResponse(201, self.server.issued())

    def get(self, url: str, **_: Any) -> FakeResponse:
        return FakeResponse(200, {"status": "stored"})


class CliSession:
    """The requests.Session the CLI opens (its bearer token in `headers`): POST /upload and GET /metadata go to
    the fake API's FakeRequests, the multipart calls and part PUTs to the fake server."""

    def __init__(self, server: FakeServer, fake: FakeRequests) -> None:
        self.server, self.fake = server, fake
        self.headers: dict[str, str] = {}
        self.mounted: dict[str, Any] = {}

    def post(self, url: str, json: Any = None, **kwargs: Any) -> Any:
        if url.endswith("/upload"):
            assert self.headers.get("Authorization", "").startswith("Bearer ")
            return self.fake.post(url, json=json, **kwargs)
        return self.server.request("POST", url, json=json, **kwargs)

    def get(self, url: str, **kwargs: Any) -> Any:
        if "/metadata/" in url:
            return self.fake.get(url, **kwargs)
        return self.server.request("GET", url, **kwargs)

    def mount(self, prefix: str, adapter: Any) -> None:  # the uploader's session mounts its LargeBlocks adapter
        self.mounted[prefix] = adapter

    def __getattr__(self, name: str) -> Any:
        return getattr(self.server, name)


@pytest.fixture
def cli(monkeypatch: pytest.MonkeyPatch, data_file: Path) -> Iterator[tuple[FakeServer, FakeRequests]]:
    server = server_for(data_file)
    fake = FakeRequests(server)
    # upload.py and dfdtools.multipart share the one requests module: every Session they open is this one
    monkeypatch.setattr(upload.requests, "Session", lambda: CliSession(server, fake))
    yield server, fake


def test_cli_ctrl_c_exits_130_and_resume_finishes(
    cli: tuple[FakeServer, FakeRequests],
    data_file: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    server, fake = cli
    real_wait = multipart.wait

    def wait_or_interrupt(*args: Any, **kwargs: Any) -> Any:
        if 1 in server.held:  # Ctrl-C once part 1 is in S3
            raise KeyboardInterrupt
        return real_wait(*args, **kwargs)

    monkeypatch.setattr(multipart, "wait", wait_or_interrupt)
    state_dir = ["--state-dir", str(tmp_path / "st"), "--api", API, "--parts-in-flight", "1", "--token", "t0k"]
    assert upload.main([str(data_file), *state_dir, "--no-progress"]) == 130
    assert f"scripts/upload --resume {data_file.resolve()}" in capsys.readouterr().err
    monkeypatch.setattr(multipart, "wait", real_wait)
    server.puts.clear()
    assert upload.main([str(data_file), *state_dir, "--resume", "--no-progress"]) == 0
    assert len(fake.posts) == 1  # resuming does not create another upload
    assert 1 not in server.puts and len(server.completed) == 1
    assert "stored" in capsys.readouterr().out


def test_batches_do_not_depend_on_which_worker_asks_first(data_file: Path, states: StateStore) -> None:
    """Parts 5 and 6 asked for in the reverse order (a later part's worker got the lock first): the same batches
    as in order — the next batch starts at the first part never presigned."""
    server = server_for(data_file)
    client = uploader(server, states, parts_in_flight=4)
    state = multipart.UploadState(*multipart.file_identity(data_file), API, "u1", PART, 6)
    presigner = multipart._Presigner(client, state, [1, 2, 3, 4, 5, 6])
    for number in (1, 6, 5, 2, 3, 4):
        assert presigner.get(number).url.startswith("http")
    assert server.presigned == [[1, 2, 3, 4], [5, 6]]


def test_the_default_session_sends_bodies_in_read_chunk_steps() -> None:
    """urllib3 reads a body in its connections' blocksize (16 KiB by default): the uploader's default session
    (scripts/upload's) asks for READ_CHUNK, so a part goes out in PartReader-sized reads."""
    from urllib3.util.request import body_to_chunks

    session = multipart.part_session()
    for scheme in ("http", "https"):
        pool = session.get_adapter(f"{scheme}://example.com").poolmanager.connection_from_url(
            f"{scheme}://example.com/"
        )
        assert pool._new_conn().blocksize == multipart.READ_CHUNK
    assert isinstance(multipart.MultipartUploader(API).session, requests.Session)
    reads: list[int] = []

    class Body(io.BytesIO):
        def read(self, size: int | None = -1) -> bytes:
            reads.append(-1 if size is None else size)
            return super().read(size)

    chunks = body_to_chunks(Body(b"x" * (3 * multipart.READ_CHUNK)), "PUT", multipart.READ_CHUNK).chunks
    assert chunks is not None and sum(len(chunk) for chunk in chunks) == 3 * multipart.READ_CHUNK
    assert set(reads) == {multipart.READ_CHUNK}


# ---------------------------------------------------------------------- complete while S3 assembles
@dataclass
class SlowCompleteServer(FakeServer):
    """complete answers 202 "completing" + Retry-After this many times before the assembled answer."""

    completing: int = 0
    retry_after: str = "7"

    def request(self, method: str, url: str, **kwargs: Any) -> FakeResponse:
        if method == "POST" and url.endswith("/complete") and self.completing:
            with self.lock:
                self.api_calls.append((method, url[len(API) :], dict(kwargs.get("headers") or {})))
            self.completing -= 1
            body = {"upload_id": self.upload_id, "status": "completing"}
            return FakeResponse(202, body, headers={"Retry-After": self.retry_after})
        return super().request(method, url, **kwargs)


def test_a_completing_answer_is_repeated_after_retry_after_until_complete(data_file: Path, states: StateStore) -> None:
    server = SlowCompleteServer(size=data_file.stat().st_size, completing=2)
    sleeps: list[float] = []
    assert uploader(server, states, sleeps).start(data_file, server.issued(), Recorder()) == "u1"
    completes = [path for method, path, _ in server.api_calls if path.endswith("/complete")]
    assert completes == ["/uploads/u1/complete"] * 3 and len(server.completed) == 1
    assert sleeps[-2:] == [7.0, 7.0]
    assert not states.path_for(data_file).exists()


def test_a_complete_still_assembling_past_the_wait_keeps_the_state_for_resume(
    data_file: Path, states: StateStore
) -> None:
    server = SlowCompleteServer(size=data_file.stat().st_size, completing=10**6)
    sleeps: list[float] = []
    with pytest.raises(MultipartError, match=r"still assembling.*--resume"):
        uploader(server, states, sleeps, complete_wait=0.0).start(data_file, server.issued(), Recorder())
    assert states.path_for(data_file).exists()
