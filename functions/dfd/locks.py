"""Git LFS file locks (git-lfs docs/api/locking.md), per repository of a tenant.

A repository is ``(tenant, name)``: another tenant's same-named repository is another repository, so a lock is
never seen or broken across tenants. A lock's id is the SHA-256 of its path (hex): one path has at most one lock,
and creating one is a conditional put on that id (DynamoDB refuses a second); ``GET /locks?path=`` and the
unlock by id are single GetItems. Answers that succeed carry no ``message`` (git-lfs reads one as an error).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any, Protocol

from dfd import clock

if TYPE_CHECKING:
    from dfd.identity import Caller

DEFAULT_LIMIT = 100
MAX_LIMIT = 1000
MAX_PATH = 1024


class LockError(Exception):
    """A locking request refused: ``status`` and the git-lfs ``message``; ``lock`` is the lock in the way (409)."""

    def __init__(self, status: int, message: str, lock: Lock | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.lock = lock


@dataclass(frozen=True, slots=True)
class Lock:
    repo_key: str  # <tenant>/<repo>
    lock_id: str  # sha256 of the path (hex)
    path: str
    owner: str  # the locker's sub
    owner_name: str
    locked_at: datetime

    def view(self) -> dict[str, Any]:
        return {
            "id": self.lock_id,
            "path": self.path,
            "locked_at": clock.iso(self.locked_at),
            "owner": {"name": self.owner_name},
        }


class LockExists(Exception):
    def __init__(self, existing: Lock | None) -> None:
        super().__init__("lock exists")
        self.existing = existing


class LockStore(Protocol):
    def create(self, lock: Lock) -> None:
        """Puts the lock unless one exists with its id: LockExists (with the existing lock) then."""
        ...

    def get(self, repo_key: str, lock_id: str) -> Lock | None: ...

    def page(self, repo_key: str, limit: int, after: str | None) -> tuple[list[Lock], str | None]:
        """Locks of a repository in id order after ``after``: (at most ``limit`` locks, the next cursor)."""
        ...

    def delete(self, lock: Lock) -> bool:
        """Deletes the lock if it is still this very lock (same owner and time); False when it is not."""
        ...


def repo_key(tenant: str, repo: str) -> str:
    return f"{tenant}/{repo}"


def lock_id(path: str) -> str:
    return hashlib.sha256(path.encode()).hexdigest()


def _path(body: Mapping[str, Any]) -> str:
    path = body.get("path")
    if not isinstance(path, str) or not 1 <= len(path) <= MAX_PATH or not path.isprintable():
        raise LockError(422, f"path must be a file path of 1 to {MAX_PATH} printable characters")
    return path


def _limit(raw: Any) -> int:
    if raw is None or raw == "":
        return DEFAULT_LIMIT
    try:
        limit = int(raw)
    except (TypeError, ValueError):
        raise LockError(422, f"limit must be an integer from 1 to {MAX_LIMIT}") from None
    if isinstance(raw, bool) or not 1 <= limit <= MAX_LIMIT:
        raise LockError(422, f"limit must be an integer from 1 to {MAX_LIMIT}")
    return limit


def _cursor(raw: Any) -> str | None:
    if raw is None or raw == "":
        return None
    if not isinstance(raw, str) or len(raw) != 64 or any(c not in "0123456789abcdef" for c in raw):
        raise LockError(422, "cursor is not one this server issued")
    return raw


def _body(body: Any) -> Mapping[str, Any]:
    if body is None:
        return {}
    if not isinstance(body, Mapping):
        raise LockError(422, "the request body must be a JSON object")
    return body


def owner_name(caller: Caller) -> str:
    return caller.username or caller.owner


class LockService:
    def __init__(self, store: LockStore, *, now: Callable[[], datetime] = clock.now) -> None:
        self._store = store
        self._now = now

    def create(self, caller: Caller, repo: str, body: Any) -> tuple[int, dict[str, Any]]:
        path = _path(_body(body))
        lock = Lock(repo_key(caller.tenant, repo), lock_id(path), path, caller.owner, owner_name(caller), self._now())
        try:
            self._store.create(lock)
        except LockExists as exists:
            if exists.existing is None:  # deleted between the refused put and its read: the caller may retry
                raise LockError(409, "the lock changed meanwhile: try again") from None
            return 409, {"lock": exists.existing.view(), "message": "already created lock"}
        return 201, {"lock": lock.view()}

    def list(self, caller: Caller, repo: str, query: Mapping[str, str]) -> dict[str, Any]:
        key = repo_key(caller.tenant, repo)
        # checked whether or not a path or id filter makes them moot: a malformed request is a 422 either way
        limit, cursor = _limit(query.get("limit")), _cursor(query.get("cursor"))
        path, wanted_id = query.get("path"), query.get("id")
        if path is not None or wanted_id is not None:
            ident = lock_id(path) if path is not None else str(wanted_id)
            lock = self._store.get(key, ident) if len(ident) == 64 else None
            if lock is not None and wanted_id is not None and lock.lock_id != wanted_id:
                lock = None
            if lock is not None and path is not None and lock.path != path:
                lock = None
            return {"locks": [lock.view()] if lock else []}
        locks, after = self._store.page(key, limit, cursor)
        answer: dict[str, Any] = {"locks": [lock.view() for lock in locks]}
        if after:
            answer["next_cursor"] = after
        return answer

    def verify(self, caller: Caller, repo: str, body: Any) -> dict[str, Any]:
        request = _body(body)
        locks, after = self._store.page(
            repo_key(caller.tenant, repo), _limit(request.get("limit")), _cursor(request.get("cursor"))
        )
        answer: dict[str, Any] = {
            "ours": [lock.view() for lock in locks if lock.owner == caller.owner],
            "theirs": [lock.view() for lock in locks if lock.owner != caller.owner],
        }
        if after:
            answer["next_cursor"] = after
        return answer

    def unlock(self, caller: Caller, repo: str, ident: str, body: Any) -> dict[str, Any]:
        request = _body(body)
        force = request.get("force", False)
        if not isinstance(force, bool):
            raise LockError(422, "force must be true or false")
        lock = self._store.get(repo_key(caller.tenant, repo), ident) if len(ident) == 64 else None
        if lock is None:
            raise LockError(404, "no such lock")
        if lock.owner != caller.owner:
            if not force:
                raise LockError(403, f"the lock on {lock.path} is {lock.owner_name}'s: unlock it with --force")
            if not caller.is_admin:
                raise LockError(403, f"only {lock.owner_name} or an admin may unlock {lock.path}")
        if not self._store.delete(lock):
            raise LockError(404, "no such lock")
        return {"lock": lock.view()}
