"""The client side of a multipart upload: parallel parts, per-part SHA-256, per-part retry, resume.

The server owns the S3 multipart upload: ``POST /upload`` answers ``"multipart": true`` with ``upload_id``,
``part_size`` and ``part_count``; this module then

- presigns parts in batches (``POST /uploads/{id}/parts``; ``parts_in_flight`` first, then doubling up to
  the API's 100), each with the part's SHA-256 (``checksum_sha256``, base64) computed from disk (one thread
  computes the next batch's while the parts of the current one are sent), so S3 verifies every part;
- PUTs ``parts_in_flight`` parts at a time (a bounded thread pool), each streamed from disk with exactly the
  presigned headers: memory stays at a few read buffers per part in flight, whatever the file's size;
- retries a part on network errors and 5xx with exponential backoff, and presigns it again when its URL has
  expired (403 "Request has expired", or its ``expires_in`` ran out);
- keeps a state file per upload (:class:`StateStore`, key = absolute path + size + mtime) from the moment the
  server created it until ``POST /uploads/{id}/complete`` answers 202, so an interrupted upload can be resumed:
  :meth:`MultipartUploader.resume` asks ``GET /uploads/{id}/parts`` what S3 holds and sends only the parts that
  are missing or of the wrong size;
- stops cleanly on :meth:`MultipartUploader.cancel` or Ctrl-C: parts in flight are abandoned at their next
  read, the state stays, :class:`UploadInterrupted` says how to resume.

Every API request carries the caller's ``headers`` (the ``Authorization`` header); part PUTs carry only the
presigned headers. HTTP goes through an injected session (``requests.Session`` or anything with its
``request`` method), which is how the tests run it without a network.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import json
import os
import threading
import time
from collections.abc import Callable, Mapping
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Protocol

import requests
import requests.adapters

PRESIGN_BATCH = 100  # the API's limit per POST /uploads/{id}/parts
READ_CHUNK = 256 * 1024
URL_MARGIN = 30.0  # seconds: a presigned URL this close to its expiry is presigned again before use
STATE_VERSION = 1


# ---------------------------------------------------------------------- ports
class HttpResponse(Protocol):
    status_code: int

    @property
    def headers(self) -> Mapping[str, str]: ...

    @property
    def text(self) -> str: ...

    def json(self) -> Any: ...


class HttpSession(Protocol):
    """What the uploader needs of ``requests.Session``."""

    def request(
        self,
        method: str,
        url: str,
        *,
        headers: Mapping[str, str] | None = ...,
        json: Any = ...,
        data: Any = ...,
        timeout: float = ...,
    ) -> Any: ...


class ProgressSink(Protocol):
    def update(self, amount: int) -> None: ...

    def close(self) -> None: ...


class NoProgress:
    def update(self, amount: int) -> None:
        pass

    def close(self) -> None:
        pass


# ---------------------------------------------------------------------- errors
class MultipartError(Exception):
    """The upload cannot go on: a clear message (the API's error code and message, or what was wrong)."""


class ApiError(MultipartError):
    def __init__(self, what: str, status: int, code: str, message: str, details: Any = None) -> None:
        self.status, self.code, self.details = status, code, details
        super().__init__(f"{what}: {status} {code}: {message}" + (f" {json.dumps(details)}" if details else ""))


class UploadGone(ApiError):
    """The server no longer has this upload as a pending multipart upload (404, or 409 not_pending)."""


class UploadInterrupted(Exception):
    """Cancelled or Ctrl-C: the state is kept at ``state_path``; ``scripts/upload --resume PATH`` continues."""

    def __init__(self, state: UploadState, state_path: Path, parts_done: int) -> None:
        self.state, self.state_path, self.parts_done = state, state_path, parts_done
        super().__init__(
            f"interrupted with {parts_done} of {state.part_count} parts uploaded; the upload {state.upload_id} "
            f"is kept in {state_path}: run `scripts/upload --resume {state.path}` to send only the rest"
        )


class _Cancelled(Exception):
    pass


# ---------------------------------------------------------------------- state on disk
@dataclass
class UploadState:
    """What resuming needs: which server upload holds this file's parts, and the file it was made for."""

    path: str  # absolute
    size: int
    mtime_ns: int
    api: str
    upload_id: str
    part_size: int
    part_count: int
    key: str = ""
    bucket: str = ""
    expires_at: str = ""
    created_at: float = field(default_factory=time.time)
    version: int = STATE_VERSION

    def part_range(self, number: int) -> tuple[int, int]:
        """(offset, length) of part `number` (1-based): every part is part_size but the last."""
        offset = (number - 1) * self.part_size
        return offset, min(self.part_size, self.size - offset)

    @classmethod
    def from_json(cls, document: Mapping[str, Any]) -> UploadState:
        if document.get("version") != STATE_VERSION:
            raise ValueError(f"state version {document.get('version')!r} is not {STATE_VERSION}")
        names = set(cls.__dataclass_fields__)
        return cls(**{k: v for k, v in document.items() if k in names})


def file_identity(path: Path) -> tuple[str, int, int]:
    """(absolute path, size, mtime in ns): a changed file is a different file (its upload is not resumed)."""
    absolute = path.resolve()
    info = absolute.stat()
    return str(absolute), info.st_size, info.st_mtime_ns


def default_state_dir() -> Path:
    cache = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(cache) / "dfd" / "uploads"


class StateStore:
    """One JSON file per file being uploaded: ``<dir>/<sha256(path NUL size NUL mtime_ns)[:32]>.json``."""

    def __init__(self, directory: Path | None = None) -> None:
        self.directory = directory or default_state_dir()

    def path_for(self, path: Path) -> Path:
        absolute, size, mtime_ns = file_identity(path)
        name = hashlib.sha256(f"{absolute}\0{size}\0{mtime_ns}".encode()).hexdigest()[:32]
        return self.directory / f"{name}.json"

    def load(self, path: Path) -> UploadState | None:
        """The state kept for this file as it is now (same path, size and mtime), if any and readable."""
        where = self.path_for(path)
        try:
            state = UploadState.from_json(json.loads(where.read_text()))
        except FileNotFoundError:
            return None
        except (ValueError, TypeError) as error:
            raise MultipartError(f"unreadable upload state {where}: {error} (delete it to start over)") from None
        absolute, size, mtime_ns = file_identity(path)
        return state if (state.path, state.size, state.mtime_ns) == (absolute, size, mtime_ns) else None

    def save(self, state: UploadState) -> Path:
        where = self.path_for(Path(state.path))
        self.directory.mkdir(parents=True, exist_ok=True)
        temporary = where.with_suffix(f".tmp{os.getpid()}")
        temporary.write_text(json.dumps(asdict(state), indent=1) + "\n")
        os.replace(temporary, where)
        return where

    def delete(self, state: UploadState) -> None:
        self.path_for(Path(state.path)).unlink(missing_ok=True)


# ---------------------------------------------------------------------- the part body
class PartReader:
    """One part of the file as a request body of known length (so the PUT carries Content-Length): read from
    disk as it is sent, reporting progress, and abandoned (an exception inside the send) once cancelled."""

    def __init__(self, path: str, offset: int, length: int, report: Callable[[int], None], stop: threading.Event):
        self._handle = open(path, "rb")  # noqa: SIM115 - closed by close(), after the request
        self._handle.seek(offset)
        self._left = length
        self._length = length
        self._report = report
        self._stop = stop
        self.sent = 0

    def __len__(self) -> int:
        return self._length

    def read(self, size: int = -1) -> bytes:
        if self._stop.is_set():
            raise _Cancelled
        wanted = self._left if size is None or size < 0 else min(size, self._left)
        chunk = self._handle.read(min(wanted, READ_CHUNK) if wanted else 0)
        self._left -= len(chunk)
        self.sent += len(chunk)
        if chunk:
            self._report(len(chunk))
        return chunk

    def close(self) -> None:
        self._handle.close()


class LargeBlocks(requests.adapters.HTTPAdapter):
    """Connections that send a request body in READ_CHUNK steps (urllib3's default, 16 KiB, costs a round of
    Python — a PartReader.read, a progress report, a send — per 16 KiB: ~0.25 s of CPU per 256 MiB)."""

    def init_poolmanager(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("blocksize", READ_CHUNK)
        super().init_poolmanager(*args, **kwargs)


def mount_large_blocks(session: requests.Session) -> requests.Session:
    """`session` with :class:`LargeBlocks` for http and https (what :func:`part_session` makes)."""
    adapter = LargeBlocks()
    session.mount("http://", adapter)
    session.mount("https://", adapter)
    return session


def part_session() -> requests.Session:
    """The uploader's default session: a ``requests.Session`` whose part PUTs go in READ_CHUNK steps."""
    return mount_large_blocks(requests.Session())


def part_checksum(path: str, offset: int, length: int) -> str:
    """Base64 SHA-256 of the part, read in 1 MiB chunks (what S3 compares with x-amz-checksum-sha256)."""
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        handle.seek(offset)
        left = length
        while left:
            chunk = handle.read(min(left, 1024 * 1024))
            if not chunk:
                raise MultipartError(f"{path} is shorter than when the upload started: start a new upload")
            digest.update(chunk)
            left -= len(chunk)
    return base64.b64encode(digest.digest()).decode()


# ---------------------------------------------------------------------- the uploader
@dataclass
class Presigned:
    url: str
    headers: dict[str, str]
    deadline: float  # monotonic


@dataclass
class Tuning:
    parts_in_flight: int = 4
    attempts: int = 5  # per part (and per API call), for network errors and 5xx
    backoff: float = 0.5  # seconds, doubled after each failed attempt
    max_backoff: float = 8.0
    timeout: float = 300.0  # seconds per part PUT
    api_timeout: float = 30.0
    # POST /uploads/{id}/complete answering "completing" (S3 still assembling, minutes for 10,000 parts): repeated
    # after its Retry-After for up to this long
    complete_wait: float = 900.0


class MultipartUploader:
    """Uploads one file's parts for an upload the server created, then completes it.

    ``session`` does the HTTP; ``headers`` go on every API call; ``sleep`` waits between retries (injected
    by tests); ``sent`` counts the bytes handed to part PUTs (retries and abandoned parts included)."""

    def __init__(
        self,
        api: str,
        *,
        session: HttpSession | None = None,
        headers: Mapping[str, str] | None = None,
        tuning: Tuning | None = None,
        states: StateStore | None = None,
        sleep: Callable[[float], object] | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.api = api.rstrip("/")
        self.session: HttpSession = session or part_session()
        self.headers = dict(headers or {})
        self.tuning = tuning or Tuning()
        if self.tuning.parts_in_flight < 1:
            raise ValueError("parts_in_flight must be >= 1")
        self.states = states or StateStore()
        self._stop = threading.Event()
        self._sleep = sleep or self._stop.wait  # by default a cancel ends the wait
        self._last_headers: Mapping[str, str] = {}  # of the last API answer (complete's Retry-After)
        self._clock = clock
        self._lock = threading.Lock()
        self._presign_lock = threading.Lock()
        self.sent = 0

    # -------------------------------------------------------------- entry points
    def start(self, path: Path, issued: Mapping[str, Any], progress: ProgressSink | None = None) -> str:
        """Upload `path` for the multipart upload `issued` (POST /upload's 201 body) and complete it: returns
        the upload id once complete answered 202."""
        absolute, size, mtime_ns = file_identity(path)
        state = UploadState(
            path=absolute,
            size=size,
            mtime_ns=mtime_ns,
            api=self.api,
            upload_id=_text(issued, "upload_id", "POST /upload"),
            part_size=_positive(issued, "part_size", "POST /upload"),
            part_count=_positive(issued, "part_count", "POST /upload"),
            key=str(issued.get("key", "")),
            bucket=str(issued.get("bucket", "")),
            expires_at=str(issued.get("expires_at", "")),
        )
        _check_plan(state, "POST /upload")
        self.states.save(state)
        return self._run(state, {}, progress or NoProgress())

    def resume(self, state: UploadState, progress: ProgressSink | None = None) -> str:
        """Continue `state`'s upload: only the parts S3 does not hold (or holds with a wrong size) are sent.
        Raises :class:`UploadGone` (and forgets the state) when the server no longer has it pending."""
        try:
            listed = self._api("GET", f"/uploads/{state.upload_id}/parts", "GET /uploads/{id}/parts")
            held = self._held_parts(state, listed)
        except UploadGone:
            self.states.delete(state)
            raise
        sink = progress or NoProgress()
        sink.update(sum(state.part_range(n)[1] for n in held))
        return self._run(state, held, sink)

    def cancel(self) -> None:
        """Stop: no new part starts, parts in flight are abandoned at their next read (any thread may call)."""
        self._stop.set()

    # -------------------------------------------------------------- the work
    def _run(self, state: UploadState, held: dict[int, str], progress: ProgressSink) -> str:
        etags = dict(held)
        missing = [n for n in range(1, state.part_count + 1) if n not in etags]
        presigner = _Presigner(self, state, missing)
        report_lock = threading.Lock()

        def report(amount: int) -> None:
            with report_lock:
                self.sent += max(amount, 0)
                progress.update(amount)

        queue = list(reversed(missing))
        in_flight: dict[Future[str], int] = {}
        pool = ThreadPoolExecutor(self.tuning.parts_in_flight, thread_name_prefix="dfd-part")
        failure: BaseException | None = None
        try:
            while queue or in_flight:
                while queue and len(in_flight) < self.tuning.parts_in_flight and not self._stop.is_set():
                    number = queue.pop()
                    in_flight[pool.submit(self._send_part, state, number, presigner, report)] = number
                if not in_flight:
                    break
                done, _ = wait(list(in_flight), timeout=0.5, return_when=FIRST_COMPLETED)
                for future in done:
                    number = in_flight.pop(future)
                    try:
                        etags[number] = future.result()
                    except _Cancelled:
                        pass
                    except BaseException as error:  # the first failure stops the rest
                        if failure is None:
                            failure = error
                        self._stop.set()
        except KeyboardInterrupt:
            self._stop.set()
        finally:
            self._stop_pool(pool, in_flight, etags)
            presigner.close()
            progress.close()
        if failure is not None:
            if isinstance(failure, MultipartError):
                raise failure
            raise MultipartError(f"part upload failed: {type(failure).__name__}: {failure}") from failure
        if len(etags) < state.part_count:
            raise UploadInterrupted(state, self.states.path_for(Path(state.path)), len(etags))
        return self._complete(state, etags)

    def _stop_pool(self, pool: ThreadPoolExecutor, in_flight: dict[Future[str], int], etags: dict[int, str]) -> None:
        """Wait for the parts in flight (cancelled ones end at their next read); keep the ones that finished."""
        pool.shutdown(wait=False, cancel_futures=True)
        for future, number in in_flight.items():
            with contextlib.suppress(BaseException):  # an abandoned or failed part is simply missing
                etags[number] = future.result()
        pool.shutdown(wait=True)

    def _send_part(self, state: UploadState, number: int, presigner: _Presigner, report: Callable[[int], None]) -> str:
        offset, length = state.part_range(number)
        attempt = 0
        while True:
            if self._stop.is_set():
                raise _Cancelled
            signed = presigner.get(number)
            reader = PartReader(state.path, offset, length, report, self._stop)
            retry_reason = ""
            try:
                response = self.session.request(
                    "PUT", signed.url, headers=signed.headers, data=reader, timeout=self.tuning.timeout
                )
            except _Cancelled:
                raise
            except requests.RequestException as error:
                if isinstance(error.__context__, _Cancelled) or self._stop.is_set():
                    raise _Cancelled from None
                retry_reason = f"{type(error).__name__}: {error}"
                response = None
            finally:
                reader.close()
            if response is not None:
                status = response.status_code
                if status == 200:
                    etag = response.headers.get("ETag") or response.headers.get("etag")
                    if not etag:
                        raise MultipartError(
                            f"part {number}: the PUT answered 200 without an ETag header (a CORS or proxy "
                            "setting hides it?)"
                        )
                    return str(etag)
                body = response.text[:300]
                if status == 403 and "expired" in body.lower():
                    report(-reader.sent)
                    presigner.expire(number)
                    continue  # a fresh URL is not a retry of a failure
                if status == 400 and ("BadDigest" in body or "XAmzContentSHA256Mismatch" in body):
                    raise MultipartError(f"part {number}: its bytes no longer match their SHA-256: the file changed")
                if status < 500 and status != 429:
                    raise MultipartError(f"part {number}: PUT answered {status}: {body}")
                retry_reason = f"PUT answered {status}"
            report(-reader.sent)
            attempt += 1
            if attempt >= self.tuning.attempts:
                raise MultipartError(f"part {number}: gave up after {attempt} attempts ({retry_reason})")
            self._backoff(attempt)

    def _backoff(self, attempt: int) -> None:
        self._sleep(min(self.tuning.backoff * 2 ** (attempt - 1), self.tuning.max_backoff))
        if self._stop.is_set():
            raise _Cancelled

    def _complete(self, state: UploadState, etags: Mapping[int, str]) -> str:
        """POST /uploads/{id}/complete, repeated (idempotent) after its Retry-After while S3 is still assembling
        the object (202 "completing"); the saved state goes once the server says it is complete."""
        parts = [{"part_number": n, "etag": etags[n]} for n in range(1, state.part_count + 1)]
        deadline = time.monotonic() + self.tuning.complete_wait
        while True:
            answer = self._api(
                "POST", f"/uploads/{state.upload_id}/complete", "POST /uploads/{id}/complete", {"parts": parts}, 202
            )
            if not isinstance(answer, dict) or answer.get("upload_id") != state.upload_id:
                raise MultipartError(f"POST /uploads/{{id}}/complete answered an unexpected body: {answer!r:.300}")
            if answer.get("status") != COMPLETING:
                break
            if time.monotonic() >= deadline:
                raise MultipartError(
                    f"S3 was still assembling the upload after {self.tuning.complete_wait:.0f} s: run again with "
                    "--resume to complete it"
                )
            self._sleep(_retry_after(self._last_headers))
            if self._stop.is_set():
                raise _Cancelled
        self.states.delete(state)
        return state.upload_id

    def _held_parts(self, state: UploadState, listed: Any) -> dict[int, str]:
        what = "GET /uploads/{id}/parts"
        if not isinstance(listed, dict) or not isinstance(listed.get("parts"), list):
            raise MultipartError(f"{what} answered an unexpected body: {listed!r:.300}")
        if (listed.get("part_size"), listed.get("part_count")) != (state.part_size, state.part_count):
            raise MultipartError(
                f"{what}: the server's plan ({listed.get('part_size')} B x {listed.get('part_count')}) is not the "
                f"one kept in the state ({state.part_size} B x {state.part_count}): delete the state to start over"
            )
        held: dict[int, str] = {}
        for part in listed["parts"]:
            try:
                number, etag, size = int(part["part_number"]), str(part["etag"]), int(part["size"])
            except (KeyError, TypeError, ValueError):
                raise MultipartError(f"{what}: a part without part_number/etag/size: {part!r:.200}") from None
            if 1 <= number <= state.part_count and size == state.part_range(number)[1]:
                held[number] = etag  # a part of the wrong size is sent again
        return held

    # -------------------------------------------------------------- the API
    def _api(self, method: str, path: str, what: str, body: Any = None, expect: int = 200) -> Any:
        attempt = 0
        while True:
            reason = ""
            try:
                response = self.session.request(
                    method,
                    self.api + path,
                    headers=self.headers,
                    json=body,
                    timeout=self.tuning.api_timeout,
                )
            except requests.RequestException as error:
                reason = f"{type(error).__name__}: {error}"
            else:
                self._last_headers = response.headers
                if response.status_code == expect:
                    try:
                        return response.json()
                    except ValueError:
                        raise MultipartError(f"{what} answered {expect} without JSON: {response.text[:200]}") from None
                if response.status_code < 500 and response.status_code != 429:
                    raise _api_error(what, response)
                reason = f"{response.status_code}: {response.text[:200]}"
            attempt += 1
            if attempt >= self.tuning.attempts:
                raise MultipartError(f"{what}: gave up after {attempt} attempts ({reason})")
            self._backoff(attempt)


class _Presigner:
    """Presigned part URLs, fetched in batches in the order parts are sent — parts_in_flight first, then as
    many as were presigned so far, at most 100 — each batch's SHA-256s computed from disk just before its
    request; a URL close to its expiry (or refused as expired) is presigned again, alone."""

    def __init__(self, uploader: MultipartUploader, state: UploadState, order: list[int]) -> None:
        self._up = uploader
        self._state = state
        self._order = order
        self._next = 0  # index in order of the first part never presigned
        self._urls: dict[int, Presigned] = {}
        self._checksums: dict[int, str] = {}
        # the next batch's SHA-256s, computed while the parts of this one are sent (one thread, in order)
        self._hasher = ThreadPoolExecutor(1, thread_name_prefix="dfd-part-sha256")
        self._hashing: dict[int, Future[str]] = {}

    def close(self) -> None:
        """Stop computing checksums ahead (the one being computed ends; its result is not used)."""
        self._hasher.shutdown(wait=False, cancel_futures=True)

    def get(self, number: int) -> Presigned:
        with self._up._presign_lock:
            signed = self._urls.get(number)
            if signed is not None and signed.deadline > self._up._clock():
                return signed
            if signed is not None or number not in self._order[self._next :]:
                batch = [number]
            else:
                index = self._order.index(number, self._next)
                # small first batches (the first PUTs wait for their SHA-256s), then doubling up to 100; a batch
                # starts at the first part never presigned, whichever worker asks first (the batches do not
                # depend on the threads' timing), and holds the part asked for
                size = min(PRESIGN_BATCH, max(self._up.tuning.parts_in_flight, self._next))
                start = max(self._next, index + 1 - PRESIGN_BATCH)
                end = max(start + size, index + 1)
                batch = self._order[start:end]
                self._next = start + len(batch)
            self._presign(batch)
            self._hash_ahead()
            return self._urls[number]

    def _hash_ahead(self) -> None:
        """Start the SHA-256s of the batch the next request will be (the same one whichever worker asks)."""
        size = min(PRESIGN_BATCH, max(self._up.tuning.parts_in_flight, self._next))
        for number in self._order[self._next : self._next + size]:
            if number not in self._checksums and number not in self._hashing and not self._up._stop.is_set():
                with contextlib.suppress(RuntimeError):  # closed: the upload is over
                    self._hashing[number] = self._hasher.submit(
                        part_checksum, self._state.path, *self._state.part_range(number)
                    )

    def _checksum(self, number: int) -> str:
        ahead = self._hashing.pop(number, None)
        if ahead is not None and not ahead.cancelled():
            return ahead.result()
        return part_checksum(self._state.path, *self._state.part_range(number))

    def expire(self, number: int) -> None:
        with self._up._presign_lock:
            signed = self._urls.get(number)
            if signed is not None:
                signed.deadline = float("-inf")

    def _presign(self, numbers: list[int]) -> None:
        state, what = self._state, "POST /uploads/{id}/parts"
        for number in numbers:
            if number not in self._checksums:
                if self._up._stop.is_set():
                    raise _Cancelled
                self._checksums[number] = self._checksum(number)
        body = {"parts": [{"part_number": n, "checksum_sha256": self._checksums[n]} for n in numbers]}
        answer = self._up._api("POST", f"/uploads/{state.upload_id}/parts", what, body)
        try:
            expires_in = float(answer["expires_in"])
            given = {int(p["part_number"]): p for p in answer["parts"]}
        except (KeyError, TypeError, ValueError):
            raise MultipartError(f"{what} answered an unexpected body: {answer!r:.300}") from None
        if set(given) != set(numbers):
            raise MultipartError(f"{what} presigned parts {sorted(given)}, asked for {sorted(numbers)}")
        deadline = self._up._clock() + expires_in - min(URL_MARGIN, expires_in / 2)
        for number, part in given.items():
            url, headers = part.get("url"), part.get("headers", {})
            if not isinstance(url, str) or not url.startswith(("http://", "https://")) or not isinstance(headers, dict):
                raise MultipartError(f"{what}: part {number} has no usable url/headers: {part!r:.300}")
            if part.get("method", "PUT") != "PUT":
                raise MultipartError(f"{what}: part {number} asks for {part.get('method')}, not PUT")
            self._urls[number] = Presigned(url, {str(k): str(v) for k, v in headers.items()}, deadline)


# ---------------------------------------------------------------------- helpers
COMPLETING = "completing"  # POST /uploads/{id}/complete: S3 is still assembling, repeat after Retry-After


def _retry_after(headers: Mapping[str, str]) -> float:
    """Seconds a Retry-After header asks for (1..60; 5 when absent or not a number of seconds)."""
    try:
        return min(max(float(headers.get("Retry-After", "5")), 1.0), 60.0)
    except ValueError:
        return 5.0


def _api_error(what: str, response: Any) -> ApiError:
    try:
        error = response.json()["error"]
        code, message, details = str(error["code"]), str(error["message"]), error.get("details")
    except (ValueError, KeyError, TypeError):
        code, message, details = "unexpected", response.text[:200], None
    gone = response.status_code == 404 or (response.status_code == 409 and code == "not_pending")
    return (UploadGone if gone else ApiError)(what, response.status_code, code, message, details)


def _text(document: Mapping[str, Any], name: str, what: str) -> str:
    value = document.get(name)
    if not isinstance(value, str) or not value:
        raise MultipartError(f"{what} answered without a {name}: {dict(document)!r:.300}")
    return value


def _positive(document: Mapping[str, Any], name: str, what: str) -> int:
    value = document.get(name)
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise MultipartError(f"{what} answered a bad {name}: {value!r}")
    return value


def _check_plan(state: UploadState, what: str) -> None:
    if (state.part_count - 1) * state.part_size >= state.size or state.part_count * state.part_size < state.size:
        raise MultipartError(
            f"{what}: {state.part_count} parts of {state.part_size} B do not make the file's {state.size} B"
        )
