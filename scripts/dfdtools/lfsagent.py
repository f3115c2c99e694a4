"""scripts/lfs-agent: dfd's git-lfs custom transfer agent (``dfd-multipart``), and its one-command setup.

``scripts/lfs-agent install`` (in a repository; ``--global`` for every repository of the user) writes
``lfs.customtransfer.dfd-multipart.path`` (this script), ``.args`` (``transfer``), ``.concurrent`` (false: the
agent sends the parts of an object in parallel itself) and ``.direction`` (upload). git-lfs then offers
``dfd-multipart`` in its upload batches; dfd answers it for a batch with an object above the single-PUT limit or
the multipart threshold (``functions/dfd/lfs/batch.py``), and downloads stay ``basic`` (one presigned GET).

``scripts/lfs-agent transfer`` is what git-lfs runs: git-lfs's docs/custom-transfers.md over stdin/stdout, one
JSON object a line — ``init`` (answered ``{}``), ``upload``/``download`` (``progress`` events, then ``complete``,
with an ``error`` for that object alone), ``terminate``. An upload action whose ``header`` carries
``Upload-Id`` is a dfd multipart upload: :class:`dfdtools.multipart.MultipartUploader` presigns its parts with
their SHA-256 (S3 checks every part; the ingest hashes the object, whose oid is its SHA-256), sends
``concurrenttransfers`` parts at a time and completes it at ``<href>/uploads/<id>``, with the action's
``Authorization`` on those calls only (part PUTs carry their presigned headers). Its state is kept under
``<git dir>/lfs/dfd-multipart/`` until the upload is complete: a push run again after a kill gets a new
registration from the batch, and the agent resumes the earlier upload instead (only the parts S3 does not hold
are sent) and aborts the new one, whose verify git-lfs then finds held. A completed upload's verify is repeated
(429 + Retry-After) until its ingest has recorded the object, before the agent says complete. Any other
upload action is basic's presigned PUT, sent as git-lfs would send it.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import replace
from pathlib import Path
from typing import IO, Any

import requests

from dfdtools.multipart import (
    ApiError,
    HttpSession,
    MultipartError,
    MultipartUploader,
    StateStore,
    Tuning,
    UploadGone,
    UploadInterrupted,
    _retry_after,
    part_session,
)

NAME = "dfd-multipart"
LFS_JSON = "application/vnd.git-lfs+json"
AGENT = Path(__file__).resolve().parents[1] / "lfs-agent"
READ_CHUNK = 1024 * 1024
# seconds a completed upload's verify is repeated while its ingest hashes it: at least VERIFY_WAIT, and for an object
# hashed across invocations (above SegmentThresholdBytes: docs/design/segments.md) its size at VERIFY_RATE, a
# quarter of the measured 400 MB/s, so that failed segments' retries and a restarted execution fit (48.8 TiB: ~6 days)
VERIFY_WAIT = 6 * 3600.0
VERIFY_RATE = 100e6  # bytes per second


def verify_wait_for(size: int) -> float:
    """How long the verify of a completed upload of `size` bytes is repeated while it is ingested."""
    return max(VERIFY_WAIT, size / VERIFY_RATE)


ERROR_CODE = 2  # a failed transfer's code in its complete event (git-lfs prints the message)


class Progress:
    """One object's progress events: bytesSoFar only grows (a part sent again after a failure is not counted
    twice), the last one says the whole size."""

    def __init__(self, emit: Callable[[dict[str, Any]], None], oid: str, size: int) -> None:
        self._emit, self._oid, self._size = emit, oid, size
        self._sent = 0  # bytes handed over, less those of abandoned attempts
        self._shown = 0  # the last bytesSoFar reported
        self._lock = threading.Lock()

    def update(self, amount: int) -> None:
        with self._lock:
            self._sent = min(max(self._sent + amount, 0), self._size)
            if self._sent > self._shown:
                self._report(self._sent)

    def close(self) -> None:
        """(The uploader's sink protocol: nothing to release.)"""

    def finish(self) -> None:
        with self._lock:
            if self._shown < self._size:
                self._report(self._size)

    def _report(self, so_far: int) -> None:
        self._emit(
            {"event": "progress", "oid": self._oid, "bytesSoFar": so_far, "bytesSinceLast": so_far - self._shown}
        )
        self._shown = so_far


class TransferError(Exception):
    """One object's transfer failed: its message goes into the complete event."""


def header_value(header: Mapping[str, Any], name: str) -> str | None:
    """A header of an action, by name in any case (git-lfs passes the batch's header object as it came)."""
    for key, value in header.items():
        if key.lower() == name.lower():
            return str(value)
    return None


class Agent:
    """The protocol's state for one git-lfs run: ``handle`` takes one request, answers through ``emit``."""

    def __init__(
        self,
        emit: Callable[[dict[str, Any]], None],
        *,
        lfs_dir: Path,
        session: HttpSession | None = None,
        tuning: Tuning | None = None,
        sleep: Callable[[float], object] = time.sleep,
        clock: Callable[[], float] = time.monotonic,
        verify_wait: float | None = None,
    ) -> None:
        self._emit = emit
        self._sleep, self._clock, self._verify_wait = sleep, clock, verify_wait
        self._lfs_dir = lfs_dir
        self._session: HttpSession = session or part_session()
        self._tuning = tuning or Tuning()
        self.states = StateStore(lfs_dir / "dfd-multipart")
        self.operation = ""

    def handle(self, request: Mapping[str, Any]) -> bool:
        """Handles one request; False once it was ``terminate``."""
        event = request.get("event")
        if event == "init":
            self.operation = str(request.get("operation", ""))
            parallel = request.get("concurrenttransfers")
            if isinstance(parallel, int) and not isinstance(parallel, bool) and parallel >= 1:
                self._tuning = replace(self._tuning, parts_in_flight=parallel)
            self._emit({})
            return True
        if event == "terminate":
            return False
        if event not in ("upload", "download"):
            raise ValueError(f"unknown event {event!r}")
        oid, size = str(request.get("oid", "")), request.get("size")
        if not isinstance(size, int) or isinstance(size, bool) or size < 0:
            self._failed(oid, f"the {event} request has no size")
            return True
        action = request.get("action")
        if not isinstance(action, Mapping) or not isinstance(action.get("href"), str):
            self._failed(oid, f"the {event} request has no action href")
            return True
        progress = Progress(self._emit, oid, size)
        try:
            if event == "upload":
                self._upload(oid, size, Path(str(request.get("path", ""))), action, progress)
                progress.finish()
                self._emit({"event": "complete", "oid": oid})
            else:
                path = self._download(oid, size, action, progress)
                progress.finish()
                self._emit({"event": "complete", "oid": oid, "path": str(path)})
        except (TransferError, MultipartError, UploadInterrupted, requests.RequestException, OSError) as error:
            self._failed(oid, str(error))
        return True

    def _failed(self, oid: str, message: str) -> None:
        self._emit({"event": "complete", "oid": oid, "error": {"code": ERROR_CODE, "message": message[:1000]}})

    # ---------------------------------------------------------------- uploads
    def _upload(self, oid: str, size: int, path: Path, action: Mapping[str, Any], progress: Progress) -> None:
        header = action.get("header") or {}
        if not isinstance(header, Mapping):
            raise TransferError("the upload action's header is not an object")
        upload_id = header_value(header, "Upload-Id")
        if upload_id is None:
            self._put(path, size, str(action["href"]), header, progress)
            return
        try:
            part_size = int(header_value(header, "Part-Size") or "")
            part_count = int(header_value(header, "Part-Count") or "")
        except ValueError:
            raise TransferError("the multipart upload action has no Part-Size/Part-Count") from None
        api = str(action["href"]).rstrip("/")
        headers = {"Accept": LFS_JSON}
        authorization = header_value(header, "Authorization")
        if authorization:
            headers["Authorization"] = authorization
        uploader = MultipartUploader(
            api, session=self._session, headers=headers, tuning=self._tuning, states=self.states
        )
        kept = self.states.load(path)
        if kept is not None and kept.api == api:
            try:
                done = uploader.resume(kept, progress)
            except (UploadGone, ApiError):  # no longer pending (expired, aborted): this batch's upload instead
                self.states.delete(kept)
            else:
                self._verify(api, headers, done, oid, size)
                if done != upload_id:
                    self._abort(api, headers, upload_id)
                return
        plan = {"upload_id": upload_id, "part_size": part_size, "part_count": part_count}
        uploader.start(path, plan, progress)
        self._verify(api, headers, upload_id, oid, size)

    def _verify(self, api: str, headers: Mapping[str, str], upload_id: str, oid: str, size: int) -> None:
        """The completed upload's verify, repeated after its Retry-After while the ingest has not recorded the
        object (429): the oid is the tenant's before the agent says complete, and git-lfs's own verify of the
        batch's link then answers at once."""
        wait = verify_wait_for(size) if self._verify_wait is None else self._verify_wait
        deadline = self._clock() + wait
        while True:
            response = self._session.request(
                "POST",
                f"{api}/verify/{upload_id}",
                headers={**headers, "Content-Type": LFS_JSON},
                json={"oid": oid, "size": size},
                timeout=self._tuning.api_timeout,
            )
            if response.status_code == 200:
                return
            if response.status_code != 429:
                raise TransferError(f"the verify answered {response.status_code}: {response.text[:300]}")
            if self._clock() >= deadline:
                raise TransferError(
                    f"the object was still being ingested after {wait:.0f} s: push again later "
                    "(nothing is sent again once it is stored)"
                )
            self._sleep(_retry_after(response.headers))

    def _abort(self, api: str, headers: Mapping[str, str], upload_id: str) -> None:
        """Aborts the batch's own registration that the resumed upload replaced (its quota bytes come back at once;
        one left pending would only expire)."""
        with contextlib.suppress(requests.RequestException):
            self._session.request(
                "DELETE", f"{api}/uploads/{upload_id}", headers=dict(headers), timeout=self._tuning.api_timeout
            )

    def _put(self, path: Path, size: int, href: str, header: Mapping[str, Any], progress: Progress) -> None:
        """basic's presigned PUT, with exactly the signed headers."""
        with path.open("rb") as body:
            response = self._session.request(
                "PUT",
                href,
                headers={str(k): str(v) for k, v in header.items()},
                data=_Reading(body, size, progress.update),
                timeout=self._tuning.timeout,
            )
        if response.status_code not in (200, 201):
            raise TransferError(f"the upload PUT answered {response.status_code}: {response.text[:300]}")

    # ---------------------------------------------------------------- downloads
    def _download(self, oid: str, size: int, action: Mapping[str, Any], progress: Progress) -> Path:
        """basic's presigned GET into a file under <git dir>/lfs/tmp, which git-lfs checks and moves into place."""
        header = action.get("header") or {}
        tmp = self._lfs_dir / "tmp"
        tmp.mkdir(parents=True, exist_ok=True)
        handle, name = tempfile.mkstemp(prefix=f"{oid[:16]}-", dir=tmp)
        try:
            with os.fdopen(handle, "wb") as out:
                self._get(str(action["href"]), dict(header), out, progress)
        except BaseException:
            Path(name).unlink(missing_ok=True)
            raise
        return Path(name)

    def _get(self, href: str, header: dict[str, str], out: IO[bytes], progress: Progress) -> None:
        streaming = getattr(self._session, "get", None)
        if streaming is None:  # a session without streaming (the tests'): the body at once
            response = self._session.request("GET", href, headers=header, timeout=self._tuning.timeout)
            if response.status_code != 200:
                raise TransferError(f"the download GET answered {response.status_code}")
            data = response.content
            out.write(data)
            progress.update(len(data))
            return
        with streaming(href, headers=header, stream=True, timeout=self._tuning.timeout) as response:
            if response.status_code != 200:
                raise TransferError(f"the download GET answered {response.status_code}")
            for chunk in response.iter_content(READ_CHUNK):
                out.write(chunk)
                progress.update(len(chunk))


class _Reading:
    """A file object for requests' streamed body that reports what was read."""

    def __init__(self, body: IO[bytes], size: int, report: Callable[[int], None]) -> None:
        self._body, self._size, self._report = body, size, report

    def __len__(self) -> int:
        return self._size

    def read(self, size: int = -1) -> bytes:
        data = self._body.read(READ_CHUNK if size is None or size < 0 else size)
        self._report(len(data))
        return data


def run(lines: Iterable[str], out: IO[str], agent_for: Callable[[Callable[[dict[str, Any]], None]], Agent]) -> int:
    """The protocol loop: each line of ``lines`` a request, each answer a line on ``out`` (flushed)."""
    lock = threading.Lock()

    def emit(message: dict[str, Any]) -> None:
        with lock:
            out.write(json.dumps(message, separators=(",", ":")) + "\n")
            out.flush()

    agent = agent_for(emit)
    for line in lines:
        if not line.strip():
            continue
        try:
            request = json.loads(line)
        except ValueError:
            print(f"lfs-agent: not a JSON line: {line[:200]!r}", file=sys.stderr)
            return 1
        if not isinstance(request, dict):
            print(f"lfs-agent: not a JSON object: {line[:200]!r}", file=sys.stderr)
            return 1
        try:
            if not agent.handle(request):
                return 0
        except ValueError as error:
            print(f"lfs-agent: {error}", file=sys.stderr)
            return 1
    return 0


def git_lfs_dir(cwd: Path | None = None) -> Path:
    """<git dir>/lfs of the repository git-lfs runs the agent in."""
    done = subprocess.run(
        ["git", "rev-parse", "--git-common-dir"], cwd=cwd, capture_output=True, text=True, check=True, timeout=30
    )
    return (Path(cwd or ".") / done.stdout.strip()).resolve() / "lfs"


def install(global_: bool, cwd: Path | None = None) -> list[str]:
    """Writes the agent's git config; the settings written (name=value)."""
    settings = {
        f"lfs.customtransfer.{NAME}.path": str(AGENT),
        f"lfs.customtransfer.{NAME}.args": "transfer",
        f"lfs.customtransfer.{NAME}.concurrent": "false",
        f"lfs.customtransfer.{NAME}.direction": "upload",
    }
    scope = ["--global"] if global_ else ["--local"]
    for name, value in settings.items():
        subprocess.run(["git", "config", *scope, name, value], cwd=cwd, check=True, timeout=30)
    return [f"{name}={value}" for name, value in settings.items()]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="scripts/lfs-agent", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    commands = parser.add_subparsers(dest="command", required=True)
    setup = commands.add_parser("install", help="set up the agent for this repository (or --global)")
    setup.add_argument("--global", dest="global_", action="store_true", help="for every repository of the user")
    commands.add_parser("transfer", help="what git-lfs runs: the custom transfer protocol on stdin/stdout")
    args = parser.parse_args(argv)
    if args.command == "install":
        try:
            written = install(args.global_)
        except subprocess.CalledProcessError as error:
            print(f"lfs-agent: git config failed ({error.returncode}): not in a git repository?", file=sys.stderr)
            return 1
        print("\n".join(written))
        return 0
    try:
        lfs_dir = git_lfs_dir()
    except (subprocess.CalledProcessError, OSError) as error:
        print(f"lfs-agent: not run in a git repository: {error}", file=sys.stderr)
        return 1
    return run(sys.stdin, sys.stdout, lambda emit: Agent(emit, lfs_dir=lfs_dir))


if __name__ == "__main__":
    sys.exit(main())
