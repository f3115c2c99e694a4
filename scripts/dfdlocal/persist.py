"""What moto holds in memory, kept in the local stack's data directory across restarts.

DynamoDB Local keeps the tables itself (``-dbPath``); this module keeps the rest of what a restart must find:

- **S3** (:class:`PersistS3`, WSGI middleware): every S3 request that changes an object, a multipart upload or
  one of its parts is answered only after the change is on disk (``s3/<bucket>/objects`` and ``.../uploads``,
  each file written whole or not at all: a temporary file renamed), so an acknowledged write survives the
  process being killed (SIGKILL leaves the kernel's page cache to the disk; a power cut may not). Objects are
  moto's own ``FakeKey`` pickled (moto makes them picklable), parts one file each (an upload of N parts is written
  once, not N times). An object's file holds the S3 notifications its write sent (a PutObject, a CopyObject, a
  CompleteMultipartUpload): they reach their queue only once that file is written, and a start puts back those
  its queue's last snapshot did not hold (:func:`redeliver`). A write's key is not read meanwhile: a GetObject
  or HeadObject of it, a CopyObject from it and a listing of its bucket wait until the write is on disk, so
  nothing is seen before it would survive a kill.
- **Cognito** (:func:`save_cognito` after each change through the API, :func:`restore_cognito` at start): the
  user pools with their clients, groups and users, whose ``sub`` (the owner of every upload) never changes.
- **the signing key** (:func:`signing_key`): tokens issued before a restart verify after it, until they expire.
- **SQS** (:class:`QueueSnapshots`): the queues' messages, written every second (a long queue paced) and at a
  clean stop, put back visible at start. A kill loses at most a queue's last second of messages (a long queue's:
  its last few seconds), S3 notifications apart: those are kept with their objects (above).

The moto internals used are those of the locked release (dfdlocal.motoversion).
"""

from __future__ import annotations

import errno
import hashlib
import json
import logging
import os
import pickle
import re
import stat
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qs, unquote, urlsplit

from dfdlocal import motoversion, s3store
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


class UnsafeStateError(RuntimeError):
    """A file or directory of the data directory that others could have written: not loaded (the message names it
    and says what to do)."""


def _unsafe(path: Path, status: os.stat_result) -> str | None:
    """Why ``path`` (its lstat) may not be loaded back: not a plain file or directory of this user, or writable
    by its group or others; None when it may."""
    if stat.S_ISLNK(status.st_mode):
        return "is a symbolic link"
    if status.st_uid != os.geteuid():
        return f"is owned by uid {status.st_uid}, not by this user (uid {os.geteuid()})"
    if status.st_mode & 0o022:
        return f"is writable by its group or others (mode {stat.S_IMODE(status.st_mode):04o})"
    return None


def _refuse(path: Path, reason: str) -> UnsafeStateError:
    return UnsafeStateError(
        f"{path} {reason}: the local stack loads back only its user's own state, writable by that user alone "
        f"(check who changed it; `chown`/`chmod go-w` it if it is yours, or start empty with make run RESET=1)"
    )


def read_state(path: Path) -> bytes:
    """The bytes of a state file, when this user owns it and nobody else may write it (else UnsafeStateError)."""
    try:
        descriptor = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise _refuse(path, "is a symbolic link") from None
        raise
    with open(descriptor, "rb") as handle:
        reason = _unsafe(path, os.fstat(handle.fileno()))
        if reason is not None:
            raise _refuse(path, reason)
        return handle.read()


def private_dir(path: Path) -> None:
    """``path`` and its missing parents created readable by this user alone (0700)."""
    if path.is_dir():
        return
    if path.parent != path:
        private_dir(path.parent)
    with suppress(FileExistsError):
        path.mkdir(mode=0o700)


def secure_data_dir(data_dir: Path, entries: Iterable[str], prefixes: tuple[str, ...] = ()) -> None:
    """Make ``data_dir`` (created if need be) and what the stack keeps in it (``entries``, names starting with
    ``prefixes``) private to this user: directories 0700, files 0600. Refused (UnsafeStateError) when any of them
    is another user's, a symbolic link, or writable by group or others (someone else could have changed it)."""
    private_dir(data_dir)
    names = set(entries)
    reason = _unsafe(data_dir, data_dir.lstat())
    if reason is not None:
        raise _refuse(data_dir, reason)
    _tighten(data_dir, 0o700, data_dir.lstat())
    for entry in sorted(data_dir.iterdir()):
        if entry.name in names or entry.name.startswith(prefixes):
            _secure_tree(entry)


def _secure_tree(top: Path) -> None:
    status = top.lstat()
    reason = _unsafe(top, status)
    if reason is not None:
        raise _refuse(top, reason)
    if not stat.S_ISDIR(status.st_mode):
        _tighten(top, 0o600, status)
        return
    _tighten(top, 0o700, status)
    for entry in sorted(top.iterdir()):
        _secure_tree(entry)


def _tighten(path: Path, mode: int, status: os.stat_result) -> None:
    if stat.S_IMODE(status.st_mode) != mode:
        os.chmod(path, mode, follow_symlinks=False)


def write_whole(path: Path, data: bytes | Callable[[Any], None], *, mode: int = 0o600) -> None:
    """Write ``path`` whole or not at all (a temporary file renamed over it); ``data`` bytes or a writer. The
    file is its user's alone (``mode``), as are the directories made for it."""
    private_dir(path.parent)
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
    loaded: dict[str, Any] = json.loads(read_state(data_dir / SIGNING_KEY))
    return loaded


def keep_signing_key(data_dir: Path | None, private: dict[str, Any]) -> None:
    if data_dir is not None:
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

    pools: dict[str, dict[str, Any]] = pickle.loads(read_state(path))  # noqa: S301 - checked by read_state
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


@dataclass(frozen=True)
class Notification:
    """An S3 notification moto sent to a queue, as kept in its object's file: ``sequence`` orders it against the
    queue snapshots (:class:`NotificationJournal`)."""

    sequence: int
    account_id: str
    region: str
    queue: str
    body: str  # the message body (JSON)


class NotificationJournal:
    """Numbers the S3 notifications (increasing across restarts: the clock's nanoseconds, or one more than the last)
    and knows which are held back (numbered, not yet in their queue): every number up to :meth:`covered` is in its
    queue, or was received from it, by the time the call returns."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._last = 0
        self._held: set[int] = set()

    def take(self) -> int:
        with self._lock:
            self._last = max(time.time_ns(), self._last + 1)
            self._held.add(self._last)
            return self._last

    def release(self, sequences: Iterable[int]) -> None:
        """These are in their queues now, or never will be."""
        with self._lock:
            self._held.difference_update(sequences)

    def covered(self) -> int:
        with self._lock:
            return min(self._held) - 1 if self._held else self._last

    def advance(self, sequence: int) -> None:
        """Number every later notification past ``sequence`` (one kept from an earlier run)."""
        with self._lock:
            self._last = max(self._last, sequence)


JOURNAL = NotificationJournal()
_HELD = threading.local()  # .notifications: a list while a write request of this thread holds its notifications


def _hold_or_send(original: Callable[..., None]) -> Callable[..., None]:
    def send(account_id: str, event_body: Any, queue_name: str, region_name: str) -> None:
        held: list[Notification] | None = getattr(_HELD, "notifications", None)
        if held is None:
            original(account_id, event_body, queue_name, region_name)
        else:
            body = json.dumps(event_body)
            held.append(Notification(JOURNAL.take(), account_id, region_name, queue_name, body))

    return send


_notifications_patched: list[Callable[..., None]] = []
_installed = threading.Lock()


def _patch_notifications() -> None:
    """moto's S3 sends each notification to its queue through ``_send_sqs_message``: within a write request that
    :class:`PersistS3` handles, it is held until the request's object file is written."""
    with _installed:
        if not _notifications_patched:
            from moto.s3 import notifications

            _notifications_patched.append(notifications._send_sqs_message)
            notifications._send_sqs_message = _hold_or_send(notifications._send_sqs_message)


def _send(notification: Notification) -> None:
    from moto.sqs.models import sqs_backends

    try:
        backend = sqs_backends[notification.account_id][notification.region]
        backend.send_message(queue_name=notification.queue, message_body=notification.body)
    except Exception as exc:  # moto's own: a notification to a queue that is gone is dropped
        log.warning("S3 notification to %s not sent: %s", notification.queue, exc)


@dataclass
class _Writes:
    """The object writes under way: a key's reader waits for its write, a listing for the writes of its bucket
    under way when it came, a second writer of a key for the first."""

    _changed: threading.Condition = field(default_factory=threading.Condition)
    _writing: dict[tuple[str, str], object] = field(default_factory=dict)

    @contextmanager
    def writing(self, bucket: str, key: str) -> Iterator[None]:
        token = object()
        with self._changed:
            while (bucket, key) in self._writing:
                self._changed.wait()
            self._writing[(bucket, key)] = token
        try:
            yield
        finally:
            with self._changed:
                del self._writing[(bucket, key)]
                self._changed.notify_all()

    def wait(self, bucket: str, key: str) -> None:
        with self._changed:
            if key:
                while (bucket, key) in self._writing:
                    self._changed.wait()
                return
            under_way = {token for (name, _), token in self._writing.items() if name == bucket}
            while under_way and under_way & set(self._writing.values()):
                self._changed.wait()


def _is_bucket(name: str) -> bool:
    """A path's first segment names one of the emulator's buckets (not another service's path)."""
    return bool(name) and name in _s3_backend().buckets


def _copy_source(environ: WSGIEnvironment) -> tuple[str, str] | None:
    source = environ.get("HTTP_X_AMZ_COPY_SOURCE")
    if not source:
        return None
    bucket, _, key = unquote(urlsplit(str(source)).path).lstrip("/").partition("/")
    return bucket, key


class PersistS3:
    """WSGI middleware: an S3 request that changed an object or a multipart upload is answered once the change is
    on disk under ``data_dir/s3`` (path-style requests: ``/<bucket>/<key>``, as the stack's clients send); an
    object's notifications reach their queues once its file (which holds them) is written; a reader of a key
    being written waits until it is on disk."""

    def __init__(self, app: WSGIApplication, data_dir: Path) -> None:
        self.app = app
        self.root = data_dir
        self._locks = [threading.Lock() for _ in range(64)]  # one writer per key at a time, by the key's hash
        self._writes = _Writes()
        _patch_notifications()

    def __call__(self, environ: WSGIEnvironment, start_response: StartResponse) -> Iterable[bytes]:
        method = environ.get("REQUEST_METHOD")
        if environ.get("HTTP_X_AMZ_TARGET"):
            return self.app(environ, start_response)
        path = str(environ.get("PATH_INFO", "")).lstrip("/")
        bucket, _, key = path.partition("/")
        if method in ("GET", "HEAD") and _is_bucket(bucket):
            self._writes.wait(bucket, key)
            return self.app(environ, start_response)
        if method not in ("PUT", "POST", "DELETE"):
            return self.app(environ, start_response)
        query = parse_qs(str(environ.get("QUERY_STRING", "")), keep_blank_values=True)
        source = _copy_source(environ) if method == "PUT" else None
        if source is not None:
            self._writes.wait(*source)
        changes_object = bool(key) and not {"partNumber", "uploads"} & set(query) and _is_bucket(bucket)
        changes_object = changes_object and not (method == "DELETE" and "uploadId" in query)
        if not changes_object:
            return [self._handle(environ, start_response, bucket, key, query)]
        with self._writes.writing(bucket, key):
            return [self._handle(environ, start_response, bucket, key, query)]

    def _handle(
        self,
        environ: WSGIEnvironment,
        start_response: StartResponse,
        bucket: str,
        key: str,
        query: dict[str, list[str]],
    ) -> bytes:
        held: list[Notification] = []
        _HELD.notifications = held
        try:
            try:
                status, body = _call(self.app, environ, start_response)
            finally:
                _HELD.notifications = None
            if status.startswith("2"):
                try:
                    self.sync(bucket, key, query, body, held)
                except Exception:
                    log.exception("keeping %s %s/%s on disk failed", environ.get("REQUEST_METHOD"), bucket, key)
                    raise
            for notification in held:  # on disk with their object now (or with no object to keep them)
                _send(notification)
            return body
        finally:
            JOURNAL.release(n.sequence for n in held)

    def sync(
        self,
        bucket_name: str,
        key: str,
        query: dict[str, list[str]],
        body: bytes,
        notifications: list[Notification] | None = None,
    ) -> None:
        """Write what the request changed, an object's file with the notifications its write sent."""
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
            self.sync_key(bucket, key, notifications)

    def _lock(self, name: str) -> threading.Lock:
        return self._locks[hash(name) % len(self._locks)]

    def sync_key(self, bucket: Any, key: str, notifications: list[Notification] | None = None) -> None:
        """The key's versions and the notifications its write sent to its file (the file removed: no versions)."""
        path = _object_file(self.root, bucket.name, key)
        kept = list(notifications or [])
        with self._lock(key):
            versions = bucket.keys.getlist(key, None)
            if not versions:
                _remove(path)
                return
            write_whole(path, lambda handle: pickle.dump((key, list(versions), kept), handle, protocol=5))

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
                key = pickle.loads(read_state(path))[0]  # noqa: S301 - our own files
            except (OSError, EOFError, pickle.UnpicklingError):
                continue
            if not bucket.keys.getlist(key, None):
                with self._lock(key):
                    if not bucket.keys.getlist(key, None):
                        _remove(path)


@dataclass
class RestoredS3:
    objects: int
    uploads: int
    notifications: list[Notification]  # those the objects' files hold


def restore_s3(data_dir: Path) -> RestoredS3:
    """Put the kept objects and multipart uploads back into the emulator's buckets."""
    from moto.s3.models import FakeMultipart

    backend = _s3_backend()
    restored = RestoredS3(0, 0, [])
    root = data_dir / S3_DIR
    if not root.is_dir():
        return restored
    for bucket_dir in sorted(root.iterdir()):
        bucket = backend.buckets.get(bucket_dir.name)
        if bucket is None:
            log.warning("%s: no such bucket in the template any more: its objects stay on disk", bucket_dir)
            continue
        for path in sorted((bucket_dir / "objects").glob("*.pickle")):
            kept = pickle.loads(read_state(path))  # noqa: S301 - our own files, checked by read_state
            key, versions = kept[0], kept[1]
            bucket.keys.setlist(key, versions)
            for version in versions:
                s3store.settle(version)
            restored.notifications.extend(kept[2] if len(kept) > 2 else [])
            restored.objects += 1
        for directory in sorted((bucket_dir / "uploads").glob("*")):
            if not (directory / "upload.pickle").exists():
                continue
            upload: Any = FakeMultipart.__new__(FakeMultipart)
            vars(upload).update(pickle.loads(read_state(directory / "upload.pickle")))  # noqa: S301
            upload.parts = {}
            for part_file in directory.glob("[0-9]*.pickle"):
                upload.parts[int(part_file.stem)] = pickle.loads(read_state(part_file))  # noqa: S301
            upload.partlist = sorted(upload.parts)
            bucket.multiparts[upload.id] = upload
            restored.uploads += 1
    for notification in restored.notifications:
        JOURNAL.advance(notification.sequence)
    return restored


def redeliver(data_dir: Path, notifications: Iterable[Notification]) -> int:
    """Send again each kept S3 notification its queue's last snapshot (put back by :func:`restore_queues`) did not
    cover and does not hold; how many."""
    covered = _covered(data_dir)
    sent = 0
    bodies: dict[str, set[str]] = {}
    for notification in sorted(notifications, key=lambda n: n.sequence):
        if notification.sequence <= covered.get(notification.queue, 0):
            continue
        if notification.queue not in bodies:
            queue = _sqs_backend().queues.get(notification.queue)
            messages = list(queue._messages) if queue is not None else []
            bodies[notification.queue] = {message.body for message in messages}
        if notification.body in bodies[notification.queue]:
            continue
        _send(notification)
        sent += 1
    JOURNAL.advance(max(covered.values(), default=0))
    return sent


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
        kept: dict[str, bytes | list[Any]] = pickle.loads(read_state(path))  # noqa: S301 - checked by read_state
    except (OSError, EOFError, pickle.UnpicklingError) as exc:
        log.warning("%s unreadable (%s): the queues start empty", path, exc)
        return 0
    count = 0
    for name, pickled in kept.items():
        queue = _sqs_backend().queues.get(name)
        if queue is None or name == COVERED:
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


COVERED = ":covered"  # the snapshot file's entry (no queue's name) of each queue's covered notifications


def _covered(data_dir: Path) -> dict[str, int]:
    """Each queue's last snapshot's :meth:`NotificationJournal.covered` (none: no snapshot)."""
    path = data_dir / SQS
    if not path.exists():
        return {}
    try:
        kept = pickle.loads(read_state(path))  # noqa: S301 - our own file, checked by read_state
        covered: dict[str, int] = pickle.loads(kept[COVERED]) if COVERED in kept else {}  # noqa: S301
    except (OSError, EOFError, pickle.UnpicklingError, TypeError):
        return {}
    return covered


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
        self._covered: dict[str, int] = {}  # name: the notifications its kept messages cover (JOURNAL.covered)

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
        covered = JOURNAL.covered()  # before the look: every notification it covers is in its queue, or was
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
            self._covered[name] = covered
            parts[name] = kept[1]
        parts[COVERED] = pickle.dumps(dict(self._covered), protocol=5)
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
