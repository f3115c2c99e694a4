"""Git LFS file locks (git-lfs docs/api/locking.md), per repository of a tenant.

A repository is ``(tenant, name)``: another tenant's same-named repository is another repository, so a lock is
never seen or broken across tenants — but by an admin, who names the tenant (``tenant`` in the query or the
unlock body) to list its locks and force an unlock. The requests' fields are checked by dfd.lfs.request.

A lock's id is the SHA-256 of its path (hex): one path has at most one lock, and creating one is a conditional
put on that id (DynamoDB refuses a second); ``GET /locks?path=`` and the unlock by id are single GetItems.
Answers that succeed carry no ``message`` (git-lfs reads one as an error).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from datetime import datetime
from typing import TYPE_CHECKING, Any

from dfd.core import clock
from dfd.lfs.ports import Lock, LockExists

if TYPE_CHECKING:
    from dfd.identity.caller import Caller
    from dfd.lfs.ports import LockStore
    from dfd.lfs.request import LockQuery, Page


class LockError(Exception):
    """A locking request refused: ``status`` and the git-lfs ``message``; ``lock`` is the lock in the way (409)."""

    def __init__(self, status: int, message: str, lock: Lock | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.lock = lock


def repo_key(tenant: str, repo: str) -> str:
    return f"{tenant}/{repo}"


def lock_id(path: str) -> str:
    return hashlib.sha256(path.encode()).hexdigest()


def owner_name(caller: Caller) -> str:
    return caller.username or caller.owner


class LockService:
    def __init__(self, store: LockStore, *, now: Callable[[], datetime] = clock.now) -> None:
        self._store = store
        self._now = now

    def create(self, caller: Caller, repo: str, path: str) -> tuple[int, dict[str, Any]]:
        lock = Lock(repo_key(caller.tenant, repo), lock_id(path), path, caller.owner, owner_name(caller), self._now())
        try:
            self._store.create(lock)
        except LockExists as exists:
            if exists.existing is None:  # deleted between the refused put and its read: the caller may retry
                raise LockError(409, "the lock changed meanwhile: try again") from None
            return 409, {"lock": exists.existing.view(), "message": "already created lock"}
        return 201, {"lock": lock.view()}

    def list(self, caller: Caller, repo: str, query: LockQuery) -> dict[str, Any]:
        key = repo_key(_tenant(caller, query.tenant), repo)
        if query.path is not None or query.lock_id is not None:
            ident = lock_id(query.path) if query.path is not None else str(query.lock_id)
            lock = self._store.get(key, ident) if len(ident) == 64 else None
            if lock is not None and query.lock_id is not None and lock.lock_id != query.lock_id:
                lock = None
            if lock is not None and query.path is not None and lock.path != query.path:
                lock = None
            return {"locks": [lock.view()] if lock else []}
        locks, after = self._store.page(key, query.page.limit, query.page.cursor)
        answer: dict[str, Any] = {"locks": [lock.view() for lock in locks]}
        if after:
            answer["next_cursor"] = after
        return answer

    def verify(self, caller: Caller, repo: str, page: Page) -> dict[str, Any]:
        locks, after = self._store.page(repo_key(caller.tenant, repo), page.limit, page.cursor)
        answer: dict[str, Any] = {
            "ours": [lock.view() for lock in locks if lock.owner == caller.owner],
            "theirs": [lock.view() for lock in locks if lock.owner != caller.owner],
        }
        if after:
            answer["next_cursor"] = after
        return answer

    def unlock(
        self, caller: Caller, repo: str, ident: str, *, force: bool = False, tenant: str | None = None
    ) -> dict[str, Any]:
        """The caller's own lock; another user's with ``force`` by an admin — of any tenant, named by ``tenant``
        (git-lfs's ``--force``; the lock API's 403 for anyone else)."""
        lock = self._store.get(repo_key(_tenant(caller, tenant), repo), ident)
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


def _tenant(caller: Caller, named: str | None) -> str:
    """The tenant whose repository a request reads: the caller's, or the one an admin names (403 for others)."""
    if named is None or named == caller.tenant:
        return caller.tenant
    if not caller.is_admin:
        raise LockError(403, "only an admin may name another tenant")
    return named
