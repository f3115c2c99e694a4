"""Upload files or whole directories through the API: hash first (a 409 skips the transfer), stream the PUT
with exactly the returned headers and a progress bar, wait for ingest, then print a summary.

  scripts/upload photos/ notes.txt                       # as alice on make run's stack
  scripts/upload --user bob notes.txt                    # another local user ($DFD_LOCAL_PASSWORD)
  scripts/upload --api https://abc.execute-api.eu-west-1.amazonaws.com --token "$TOKEN" big.iso
  scripts/upload --list                                  # my uploads, newest first (GET /uploads, every page)
  scripts/upload --delete 0123456789abcdef0123456789abcdef   # DELETE /uploads/{id}, repeatable

Every API call carries ``Authorization: Bearer <access token>``: ``--token`` (or ``$DFD_TOKEN``) when given,
else a token signed in as ``--user`` (default ``alice``, make run's first user) on the local user pool, as
``scripts/token USER`` does. Against a deployed API pass ``--token "$(scripts/token --aws ... USER)"``.

Large files (when POST /upload answers "multipart": true) go in parts, --parts-in-flight at a time, each
retried on its own; Ctrl-C keeps the upload (state under --state-dir) and `--resume` sends only what is missing.
"""

from __future__ import annotations

import argparse
import hashlib
import mimetypes
import os
import sys
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import requests

from dfdtools import multipart
from dfdtools.token import TokenError, add_local_sign_in_args, local_token
from dfdtools.tools import LOCAL_API, interruptible, reports_unreachable

CHUNK = 1024 * 1024
TOKEN_ENV = "DFD_TOKEN"  # noqa: S105 - the variable's name


@dataclass
class Result:
    path: Path
    # stored | duplicate | skipped (409 precheck) | uploaded (not awaited) | yours (--resume found the caller's
    # own upload of it: nothing sent, nothing counted) | failed
    outcome: str
    size: int
    uploaded: int = 0
    detail: str = ""


class Progress:
    """One line per file on a terminal (\\r updates); plain lines otherwise."""

    def __init__(self, label: str, total: int, enabled: bool) -> None:
        self.label, self.total, self.enabled = label, max(total, 1), enabled
        self.done = 0
        self.started = time.monotonic()
        self.last = 0.0

    def update(self, amount: int) -> None:
        self.done += amount
        now = time.monotonic()
        if self.enabled and (now - self.last > 0.1 or self.done >= self.total):
            self.last = now
            width = 30
            filled = int(width * self.done / self.total)
            rate = self.done / max(now - self.started, 1e-6) / 1e6
            sys.stderr.write(
                f"\r  {self.label[:40]:40} [{'#' * filled}{'.' * (width - filled)}] "
                f"{100 * self.done // self.total:3d}% {rate:7.1f} MB/s"
            )
            sys.stderr.flush()

    def close(self) -> None:
        if self.enabled:
            sys.stderr.write("\n")


def sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        while chunk := handle.read(CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


class ProgressReader:
    """The file as a request body with a known length (so the PUT carries Content-Length, never chunked
    encoding, which S3 refuses) that reports progress as it is read."""

    def __init__(self, path: Path, progress: Progress) -> None:
        self._handle = path.open("rb")
        self._size = path.stat().st_size
        self._progress = progress

    def __len__(self) -> int:
        return self._size

    def read(self, size: int = -1) -> bytes:
        chunk = self._handle.read(size)
        self._progress.update(len(chunk))
        return chunk

    def close(self) -> None:
        self._handle.close()


def files_of(paths: list[Path]) -> Iterator[Path]:
    for path in paths:
        if path.is_dir():
            yield from sorted(p for p in path.rglob("*") if p.is_file())
        else:
            yield path


def missing_paths(paths: list[Path]) -> list[Path]:
    """What cannot be uploaded at all (checked before anything is sent): neither a file nor a directory."""
    return [path for path in paths if not (path.is_file() or path.is_dir())]


class ListError(Exception):
    """GET /uploads refused a page (the API's error, one line)."""


def list_uploads(session: requests.Session, api: str) -> Iterator[dict[str, Any]]:
    """The caller's uploads, newest first: GET /uploads page by page (100 a page), each page fetched as the
    previous one is consumed. ListError when a page is refused."""
    token: str | None = None
    while True:
        params = {"limit": "100"} | ({"last_evaluated_key": token} if token else {})
        response = session.get(f"{api}/uploads", params=params, timeout=30)
        if response.status_code != 200:
            raise ListError(error_text(response))
        page = response.json()
        yield from (dict(item) for item in page["items"])
        token = page.get("last_evaluated_key")
        if not token:
            return


def own_upload(session: requests.Session, api: str, path: Path, digest: str) -> dict[str, Any] | None:
    """The caller's own upload of this file, if it has one: processed with this content, or still pending under
    this name and size (its hash is known once it is processed). Newest first, as GET /uploads lists them."""
    try:
        for item in list_uploads(session, api):
            if item.get("status") in ("stored", "duplicate") and item.get("hash") == digest:
                return item
            if item.get("status") == "pending" and (item.get("filename"), item.get("size")) == (
                path.name,
                path.stat().st_size,
            ):
                return item
    except ListError:
        return None
    return None


def error_text(response: requests.Response) -> str:
    try:
        error = response.json()["error"]
        return f"{response.status_code} {error['code']}: {error['message']}"
    except (ValueError, KeyError, TypeError):
        return f"{response.status_code} {response.text[:200]}"


@dataclass
class PartsOptions:
    """Multipart uploads: parts in flight, where interrupted uploads are kept, whether to resume them."""

    parts_in_flight: int = 4
    resume: bool = False
    states: multipart.StateStore = field(default_factory=multipart.StateStore)
    headers: Mapping[str, str] = field(default_factory=dict)  # on every API call of the multipart upload


def upload_one(
    api: str, path: Path, *, wait: float, bar: bool, session: requests.Session, parts: PartsOptions | None = None
) -> Result:
    parts = parts or PartsOptions()
    size = path.stat().st_size
    if size == 0:
        return Result(path, "failed", 0, detail="empty files are not accepted (size must be >= 1)")
    kept = parts.states.load(path) if parts.resume else None
    kept_gone: str | None = None  # why the kept upload could not be continued
    if kept is not None and kept.api == api:
        try:
            return upload_parts(api, path, None, kept, wait=wait, bar=bar, session=session, parts=parts)
        except multipart.UploadGone as gone:
            kept_gone = str(gone)
    digest = sha256_file(path)
    if parts.resume:
        # an interrupted upload may have finished: the precheck would answer 409 and count the caller's own
        # bytes as a duplicate avoided
        mine = own_upload(session, api, path, digest)
        if mine is not None and mine.get("status") == "pending":
            return await_ingest(session, api, mine["upload_id"], Result(path, "uploaded", size), wait)
        if mine is not None:
            detail = f"already uploaded by you: upload {mine['upload_id']}, {mine['status']}; nothing sent"
            return Result(path, "yours", size, detail=detail)
    if kept_gone is not None:
        print(f"{path}: the interrupted upload is gone ({kept_gone}); starting a new one", file=sys.stderr)
    content_type = mimetypes.guess_type(path.name)[0] or "application/octet-stream"
    body: dict[str, Any] = {"filename": path.name, "size": size, "content_type": content_type, "sha256": digest}
    answer = session.post(f"{api}/upload", json=body, timeout=30)
    if answer.status_code == 409:
        return Result(path, "skipped", size, detail="already stored: 0 bytes uploaded")
    if answer.status_code != 201:
        return Result(path, "failed", size, detail=error_text(answer))
    issued: dict[str, Any] = answer.json()
    if issued.get("multipart") is True:
        return upload_parts(api, path, issued, None, wait=wait, bar=bar, session=session, parts=parts)
    progress = Progress(path.name, size, bar)
    body_reader = ProgressReader(path, progress)
    try:
        put = requests.put(issued["upload_url"], data=body_reader, headers=issued["headers"], timeout=3600)
    finally:
        body_reader.close()
        progress.close()
    if put.status_code != 200:
        return Result(path, "failed", size, detail=f"PUT {put.status_code}: {put.text[:200]}")
    return await_ingest(session, api, issued["upload_id"], Result(path, "uploaded", size, uploaded=size), wait)


def upload_parts(
    api: str,
    path: Path,
    issued: dict[str, Any] | None,
    kept: multipart.UploadState | None,
    *,
    wait: float,
    bar: bool,
    session: requests.Session,
    parts: PartsOptions,
) -> Result:
    """A multipart upload: `issued` (POST /upload's answer) starts one, `kept` (its state on disk) resumes one."""
    tuning = multipart.Tuning(parts_in_flight=parts.parts_in_flight)
    uploader = multipart.MultipartUploader(api, headers=parts.headers, tuning=tuning, states=parts.states)
    size = path.stat().st_size
    progress = Progress(path.name + (" (resumed)" if kept else ""), size, bar)
    upload_id = uploader.resume(kept, progress) if kept else uploader.start(path, issued or {}, progress)
    return await_ingest(session, api, upload_id, Result(path, "uploaded", size, uploaded=uploader.sent), wait)


def await_ingest(session: requests.Session, api: str, upload_id: str, result: Result, wait: float) -> Result:
    deadline = time.monotonic() + wait
    while time.monotonic() < deadline:
        meta = session.get(f"{api}/metadata/{upload_id}", timeout=30)
        status = meta.json().get("status") if meta.ok else None
        if status in ("stored", "duplicate", "failed", "expired"):
            result.outcome = status
            return result
        time.sleep(0.2)
    if wait:
        result.outcome = "failed"
        result.detail = f"still pending after {wait:.0f}s"
    return result


def delete_and_list(
    api: str, session: requests.Session, upload_ids: list[str], *, listing: bool, ids_only: bool = False
) -> int:
    """DELETE /uploads/{id} for each id (204: deleted, or deleted before), then GET /uploads page by page."""
    failed = 0
    for upload_id in upload_ids:
        response = session.delete(f"{api}/uploads/{upload_id}", timeout=30)
        if response.status_code == 204:
            print(f"deleted   {upload_id}")
        else:
            failed += 1
            print(f"failed    {upload_id}  ({error_text(response)})")
    if not listing:
        return 1 if failed else 0
    try:
        for item in list_uploads(session, api):
            size = item.get("size")
            if ids_only:
                print(item["upload_id"])
                continue
            print(
                f"{item['upload_id']}  {item.get('status', ''):9} {size if size is not None else '':>12}  "
                f"{item.get('created_at', '')}  {item.get('filename', '')}"
            )
    except ListError as error:
        print(f"scripts/upload: GET /uploads: {error}", file=sys.stderr)
        return 1
    return 1 if failed else 0


@interruptible
@reports_unreachable
def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="scripts/upload", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("paths", nargs="*", type=Path, help="files or directories")
    parser.add_argument(
        "--delete", action="append", default=[], metavar="UPLOAD_ID", help="delete this upload (repeatable)"
    )
    parser.add_argument("--list", action="store_true", help="list my uploads, newest first")
    parser.add_argument("--ids", action="store_true", help="with --list: only the upload ids, one a line")
    parser.add_argument("--api", default=LOCAL_API, help=f"API base URL (default: make run's, {LOCAL_API})")
    parser.add_argument("--stack", help="a deployed stack: the API URL from its outputs (instead of --api)")
    parser.add_argument("--region", help="the stack's region (with --stack)")
    parser.add_argument("--wait", type=float, default=60.0, help="seconds to wait for each ingest (0: don't)")
    parser.add_argument("--no-progress", action="store_true", help="no progress bars")
    parser.add_argument(
        "--token", default=os.environ.get(TOKEN_ENV) or None, help=f"access token to send (default: ${TOKEN_ENV})"
    )
    add_local_sign_in_args(parser)
    parser.add_argument(
        "--parts-in-flight", type=int, default=4, help="multipart uploads: parts sent at once (default 4)"
    )
    parser.add_argument(
        "--resume", action="store_true", help="continue interrupted multipart uploads of these files (same size/mtime)"
    )
    parser.add_argument(
        "--state-dir",
        type=Path,
        default=multipart.default_state_dir(),
        help="where interrupted multipart uploads are kept (default: %(default)s)",
    )
    args = parser.parse_args(argv)
    if args.parts_in_flight < 1:
        parser.error("--parts-in-flight must be >= 1")
    if args.stack:
        import boto3

        from dfdtools.tools import StackError, require_output, stack_outputs

        try:
            cloudformation = boto3.Session(region_name=args.region).client("cloudformation")
            (args.api,) = require_output(stack_outputs(cloudformation, args.stack), "ApiUrl")
        except StackError as error:
            parser.error(str(error))
    if args.token and args.user:
        parser.error("give --token or --user, not both")
    if not (args.paths or args.delete or args.list):
        parser.error("give files or directories to upload, --delete UPLOAD_ID or --list")
    missing = missing_paths(args.paths)
    if missing:
        print(f"scripts/upload: no such file or directory: {', '.join(map(str, missing))}", file=sys.stderr)
        return 2
    api = args.api.rstrip("/")
    bar = not args.no_progress and sys.stderr.isatty()
    token = args.token
    if not token:
        try:
            token = local_token(args.user, args.password, args.endpoint_url)
        except TokenError as error:
            print(f"scripts/upload: {error}", file=sys.stderr)
            return 2
    session = requests.Session()
    session.headers["Authorization"] = f"Bearer {token}"
    if args.delete or args.list:
        return delete_and_list(api, session, args.delete, listing=args.list, ids_only=args.ids)
    # multipart calls carry the same header (their part PUTs carry only the presigned ones)
    parts = PartsOptions(
        args.parts_in_flight, args.resume, multipart.StateStore(args.state_dir), {"Authorization": f"Bearer {token}"}
    )
    results: list[Result] = []
    for path in files_of(args.paths):
        try:
            result = upload_one(api, path, wait=args.wait, bar=bar, session=session, parts=parts)
        except multipart.UploadInterrupted as stopped:
            print(f"\n{path}: {stopped}", file=sys.stderr)
            return 130
        except KeyboardInterrupt:
            print(f"\n{path}: interrupted", file=sys.stderr)
            return 130
        except (requests.RequestException, multipart.MultipartError) as error:
            result = Result(path, "failed", path.stat().st_size, detail=str(error))
        results.append(result)
        print(f"{result.outcome:9} {result.size:>12,d} B  {path}" + (f"  ({result.detail})" if result.detail else ""))
    counts = {
        name: sum(1 for r in results if r.outcome == name)
        for name in ("stored", "duplicate", "skipped", "uploaded", "yours")
    }
    failed = sum(1 for r in results if r.outcome not in counts)
    saved = sum(r.size for r in results if r.outcome in ("duplicate", "skipped"))
    sent = sum(r.uploaded for r in results)
    print(
        f"\n{len(results)} files: {counts['stored']} stored, {counts['duplicate']} duplicate, "
        f"{counts['skipped']} skipped by the hash precheck, {failed} failed"
        + (f", {counts['uploaded']} uploaded (ingest not awaited)" if counts["uploaded"] else "")
        + (f", {counts['yours']} already uploaded by you" if counts["yours"] else "")
    )
    print(f"bytes uploaded: {sent:,d}   bytes saved by dedup: {saved:,d}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
