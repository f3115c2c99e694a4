"""What moto holds in memory, kept in the local stack's data directory across restarts.

DynamoDB Local keeps the tables itself (``-dbPath``); this module keeps the rest of what a restart must find:

- **S3** (:class:`PersistS3`, WSGI middleware): every S3 request that changes an object, a multipart upload or
  one of its parts is answered only after the change is on disk (``s3/<bucket>/objects`` and ``.../uploads``,
  each file written whole or not at all: a temporary file renamed), so an acknowledged write survives the
  process being killed (SIGKILL leaves the kernel's page cache to the disk; a power cut may not). Objects are
  moto's own ``FakeKey`` pickled (moto makes them picklable), parts one file each (an upload of N parts is written
  once, not N times).
- **Cognito** (:func:`save_cognito` after each change through the API, :func:`restore_cognito` at start): the
  user pools with their clients, groups and users, whose ``sub`` (the owner of every upload) never changes.
- **the signing key** (:func:`signing_key`): tokens issued before a restart verify after it, until they expire.
- **SQS** (:class:`QueueSnapshots`): the queues' messages, written every second (a long queue paced) and at a
  clean stop, put back visible at start. A kill loses at most a queue's last second of messages (a long queue's:
  its last few seconds): the S3 notifications among them are what the reconcile re-drives (a pending upload
  whose object exists), which the stack runs once at every start.

The moto internals used are those of the locked release (dfdlocal.motoversion).
"""

from __future__ import annotations

import hashlib
import logging
import os
import pickle
import re
import threading
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qs

from dfdlocal import motoversion
from dfdlocal.names import ACCOUNT_ID, REGION

motoversion.require_supported()

if TYPE_CHECKING:
    from _typeshed.wsgi import StartResponse, WSGIApplication, WSGIEnvironment

log = logging.getLogger("dfdlocal.persist")

SIGNING_KEY = "signing-key.json"
COGNITO = "cognito.pickle"
S3_DIR = "s3"
SQS = "sqs.pickle"
_UPLOAD_ID = re.compile(rb"<UploadId>([^<]+)</UploadId>")


def write_whole(path: Path, data: bytes | Callable[[Any], None], *, mode: int = 0o644) -> None:
    """Write ``path`` whole or not at all (a temporary file renamed over it); ``data`` bytes or a writer."""
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(f".{path.name}.{threading.get_ident()}.tmp")
    with open(os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode), "wb") as handle:
        if isinstance(data, bytes):
            handle.write(data)
        else:
            data(handle)
    temporary.replace(path)


def _remove(path: Path) -> None:
    path.unlink(missing_ok=True)


# ------------------------------------------------------------------------------------------------ the key
def signing_key(data_dir: Path | None) -> dict[str, Any] | None:
    """The private JWK kept in ``data_dir`` (None: none kept yet, or no data directory)."""
    if data_dir is None or not (data_dir / SIGNING_KEY).exists():
        return None
    import json

    loaded: dict[str, Any] = json.loads((data_dir / SIGNING_KEY).read_text())
    return loaded


def keep_signing_key(data_dir: Path | None, private: dict[str, Any]) -> None:
    if data_dir is not None:
        import json

        write_whole(data_dir / SIGNING_KEY, json.dumps(private).encode(), mode=0o600)


# ---------------------------------------------------------------------------------------------- Cognito
def _cognito_backend() -> Any:
    from moto.cognitoidp.models import cognitoidp_backends

    return cognitoidp_backends[ACCOUNT_ID][REGION]


def save_cognito(data_dir: Path) -> None:
    """Every user pool of the emulator (its key apart: :func:`signing_key` keeps it) to ``data_dir``."""
    pools = {}
    for pool_id, pool in list(_cognito_backend().user_pools.items()):
        state = {name: value for name, value in vars(pool).items() if name != "json_web_key"}
        pools[pool_id] = state
    write_whole(data_dir / COGNITO, pickle.dumps(pools, protocol=pickle.HIGHEST_PROTOCOL), mode=0o600)


def kept_pools(data_dir: Path) -> bool:
    return (data_dir / COGNITO).exists()


def restore_cognito(data_dir: Path) -> list[str]:
    """Put the kept user pools back into the emulator (signing with the key installed now); their ids."""
    path = data_dir / COGNITO
    if not path.exists():
        return []
    from joserfc import jwk
    from moto.cognitoidp.models import CognitoIdpUserPool, load_resource  # type: ignore[attr-defined]

    pools: dict[str, dict[str, Any]] = pickle.loads(path.read_bytes())  # noqa: S301 - our own file, mode 0600
    backend = _cognito_backend()
    for pool_id, state in pools.items():
        pool: Any = CognitoIdpUserPool.__new__(CognitoIdpUserPool)
        vars(pool).update(state)
        pool.json_web_key = jwk.RSAKey.import_key(load_resource("cognitoidp/resources/jwks-private.json"))
        backend.user_pools[pool_id] = pool
    return list(pools)


class PersistCognito:
    """WSGI middleware: a Cognito request that succeeded is followed by :func:`save_cognito` (before it is
    answered): users, groups, passwords and tokens' revocations survive a restart."""

    def __init__(self, app: WSGIApplication, data_dir: Path, prefix: str) -> None:
        self.app = app
        self.data_dir = data_dir
        self.prefix = prefix
        self._lock = threading.Lock()

    def __call__(self, environ: WSGIEnvironment, start_response: StartResponse) -> Iterable[bytes]:
        if not str(environ.get("HTTP_X_AMZ_TARGET", "")).startswith(self.prefix):
            return self.app(environ, start_response)
        status, body = _call(self.app, environ, start_response)
        if status.startswith("2"):
            with self._lock:
                save_cognito(self.data_dir)
        return [body]


def _call(app: WSGIApplication, environ: WSGIEnvironment, start_response: StartResponse) -> tuple[str, bytes]:
    """Run ``app`` to the end of its body (the response is not sent before the caller returns it)."""
    seen: list[str] = []

    def capture(status: str, headers: list[tuple[str, str]], exc_info: Any = None) -> Any:
        seen.append(status)
        return start_response(status, headers, exc_info)

    result = app(environ, capture)
    try:
        body = b"".join(result)
    finally:
        close = getattr(result, "close", None)
        if close is not None:
            close()
    return (seen[-1] if seen else "500"), body


# --------------------------------------------------------------------------------------------------- S3
def _s3_backend() -> Any:
    from moto.s3.models import s3_backends

    return s3_backends[ACCOUNT_ID]["aws"]


def _object_file(root: Path, bucket: str, key: str) -> Path:
    return root / S3_DIR / bucket / "objects" / (hashlib.sha256(key.encode()).hexdigest() + ".pickle")


def _upload_dir(root: Path, bucket: str, upload_id: str) -> Path:
    return root / S3_DIR / bucket / "uploads" / hashlib.sha256(upload_id.encode()).hexdigest()


class PersistS3:
    """WSGI middleware: an S3 request that changed an object or a multipart upload is answered once the change is
    on disk under ``data_dir/s3`` (path-style requests: ``/<bucket>/<key>``, as the stack's clients send)."""

    def __init__(self, app: WSGIApplication, data_dir: Path) -> None:
        self.app = app
        self.root = data_dir
        self._locks = [threading.Lock() for _ in range(64)]  # one writer per key at a time, by the key's hash

    def __call__(self, environ: WSGIEnvironment, start_response: StartResponse) -> Iterable[bytes]:
        method = environ.get("REQUEST_METHOD")
        if method not in ("PUT", "POST", "DELETE") or environ.get("HTTP_X_AMZ_TARGET"):
            return self.app(environ, start_response)
        status, body = _call(self.app, environ, start_response)
        if status.startswith("2"):
            path = str(environ.get("PATH_INFO", "")).lstrip("/")
            bucket, _, key = path.partition("/")
            query = parse_qs(str(environ.get("QUERY_STRING", "")), keep_blank_values=True)
            try:
                self.sync(bucket, key, query, body)
            except Exception:
                log.exception("keeping %s %s/%s on disk failed", method, bucket, key)
                raise
        return [body]

    def sync(self, bucket_name: str, key: str, query: dict[str, list[str]], body: bytes) -> None:
        bucket = _s3_backend().buckets.get(bucket_name)
        if bucket is None:
            return
        if "delete" in query and not key:  # DeleteObjects: every key of the bucket that is gone
            self._forget_deleted(bucket)
            return
        if not key:
            return
        upload_ids = query.get("uploadId") or []
        if "uploads" in query:
            upload_ids = [m.decode() for m in _UPLOAD_ID.findall(body)]
        for upload_id in upload_ids:
            part = "".join(query.get("partNumber") or [])
            self.sync_upload(bucket, upload_id, int(part) if part.isdigit() else None)
        if "partNumber" not in query and "uploads" not in query:
            self.sync_key(bucket, key)

    def _lock(self, name: str) -> threading.Lock:
        return self._locks[hash(name) % len(self._locks)]

    def sync_key(self, bucket: Any, key: str) -> None:
        path = _object_file(self.root, bucket.name, key)
        with self._lock(key):
            versions = bucket.keys.getlist(key, None)
            if not versions:
                _remove(path)
                return
            write_whole(path, lambda handle: pickle.dump((key, list(versions)), handle, protocol=5))

    def sync_upload(self, bucket: Any, upload_id: str, part: int | None) -> None:
        directory = _upload_dir(self.root, bucket.name, upload_id)
        with self._lock(upload_id):
            upload = bucket.multiparts.get(upload_id)
            if upload is None:  # completed or aborted
                if directory.exists():
                    for entry in directory.iterdir():
                        entry.unlink()
                    directory.rmdir()
                return
            if not (directory / "upload.pickle").exists():
                state = {name: value for name, value in vars(upload).items() if name not in ("parts", "partlist")}
                write_whole(directory / "upload.pickle", pickle.dumps(state, protocol=5))
            if part is not None and part in upload.parts:
                write_whole(directory / f"{part}.pickle", lambda h: pickle.dump(upload.parts[part], h, protocol=5))

    def _forget_deleted(self, bucket: Any) -> None:
        directory = self.root / S3_DIR / bucket.name / "objects"
        if not directory.is_dir():
            return
        for path in directory.glob("*.pickle"):
            try:
                key, _ = pickle.loads(path.read_bytes())  # noqa: S301 - our own files
            except (OSError, EOFError, pickle.UnpicklingError):
                continue
            if not bucket.keys.getlist(key, None):
                with self._lock(key):
                    if not bucket.keys.getlist(key, None):
                        _remove(path)


def restore_s3(data_dir: Path) -> tuple[int, int]:
    """Put the kept objects and multipart uploads back into the emulator's buckets: (objects, uploads)."""
    from moto.s3.models import FakeMultipart

    backend = _s3_backend()
    objects = uploads = 0
    root = data_dir / S3_DIR
    if not root.is_dir():
        return 0, 0
    for bucket_dir in sorted(root.iterdir()):
        bucket = backend.buckets.get(bucket_dir.name)
        if bucket is None:
            log.warning("%s: no such bucket in the template any more: its objects stay on disk", bucket_dir)
            continue
        for path in sorted((bucket_dir / "objects").glob("*.pickle")):
            key, versions = pickle.loads(path.read_bytes())  # noqa: S301 - our own files
            bucket.keys.setlist(key, versions)
            objects += 1
        for directory in sorted((bucket_dir / "uploads").glob("*")):
            if not (directory / "upload.pickle").exists():
                continue
            upload: Any = FakeMultipart.__new__(FakeMultipart)
            vars(upload).update(pickle.loads((directory / "upload.pickle").read_bytes()))  # noqa: S301
            upload.parts = {}
            for part_file in directory.glob("[0-9]*.pickle"):
                upload.parts[int(part_file.stem)] = pickle.loads(part_file.read_bytes())  # noqa: S301
            upload.partlist = sorted(upload.parts)
            bucket.multiparts[upload.id] = upload
            uploads += 1
    return objects, uploads


# -------------------------------------------------------------------------------------------------- SQS
def _sqs_backend() -> Any:
    from moto.sqs.models import sqs_backends

    return sqs_backends[ACCOUNT_ID][REGION]


def snapshot_queues() -> dict[str, list[Any]]:
    """Each queue's messages (in flight included: they are delivered again after a restart)."""
    snapshot: dict[str, list[Any]] = {}
    for name, queue in list(_sqs_backend().queues.items()):
        with queue._messages_lock:
            snapshot[name] = list(queue._messages)
    return snapshot


def restore_queues(data_dir: Path) -> int:
    """Put the kept messages back, visible now; how many."""
    path = data_dir / SQS
    if not path.exists():
        return 0
    try:
        kept: dict[str, bytes | list[Any]] = pickle.loads(path.read_bytes())  # noqa: S301 - our own file
    except (OSError, EOFError, pickle.UnpicklingError) as exc:
        log.warning("%s unreadable (%s): the queues start empty", path, exc)
        return 0
    count = 0
    for name, pickled in kept.items():
        queue = _sqs_backend().queues.get(name)
        if queue is None:
            continue
        # each queue pickled on its own (a file of an earlier release: the messages themselves)
        messages = pickle.loads(pickled) if isinstance(pickled, bytes) else pickled  # noqa: S301 - our own file
        for message in messages:
            message.visible_at = 0.0
            message.receipt_handle = None
        with queue._messages_lock:
            queue._messages.extend(messages)
            queue._messages_lock.notify_all()
        count += len(messages)
    return count


class QueueSnapshots:
    """Writes the queues' messages to ``data_dir`` every ``interval`` seconds and at :meth:`stop`."""

    # a queue whose look (its signature and, when changed, its pickle) took D seconds is looked at again after
    # PACE * D at the soonest: the snapshots take at most ~1/PACE of a core, whatever a queue's length
    PACE = 10.0

    def __init__(self, data_dir: Path, interval: float = 1.0, clock: Callable[[], float] = time.monotonic) -> None:
        self.path = data_dir / SQS
        self.interval = interval
        self._clock = clock
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="dfd-sqs-snapshots", daemon=True)
        self._last: bytes | None = None
        self._queues: dict[str, tuple[tuple[tuple[str, int], ...], bytes]] = {}  # name: (signature, pickled)
        self._due: dict[str, float] = {}  # name: when its messages are looked at next (the clock's time)

    def start(self) -> None:
        self._thread.start()

    def save(self, *, whole: bool = False) -> None:
        """One file, every queue in it (written whole: a message moved between queues is in one of them, never
        in both or neither); a queue pickled again only when its messages changed (which ones, or how often
        each was received), and a long one looked at only every PACE times what its last look took (`whole`:
        every queue as it is now). dfd-events, which nobody drains locally, holds every event the stack
        published: looked at every second, it took 115-450 ms of the process's CPU a second at 53,000 events
        (docs/performance.md, target 8); paced, a kill loses at most its last few seconds of events, while a
        short queue (the ingest's) is still kept every second."""
        parts: dict[str, bytes] = {}
        for name, messages in snapshot_queues().items():
            kept = self._queues.get(name)
            started = self._clock()
            if kept is not None and not whole and started < self._due.get(name, started):
                parts[name] = kept[1]  # paced: the bytes of its last look
                continue
            signature = tuple((message.id, message.approximate_receive_count) for message in messages)
            if kept is None or kept[0] != signature:
                kept = self._queues[name] = (signature, pickle.dumps(messages, protocol=5))
            self._due[name] = started + self.PACE * (self._clock() - started)
            parts[name] = kept[1]
        data = pickle.dumps(parts, protocol=5)
        if data != self._last:
            write_whole(self.path, data)
            self._last = data

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            try:
                self.save()
            except Exception as exc:  # a message changing as it is pickled: the next round
                log.debug("queue snapshot skipped: %s", exc)

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(5)
        self.save(whole=True)
