"""Git LFS's ports: what the Batch API and verify read and write through the repository
(dfd.adapters.dynamo.reads, .uploads), and the locks' record and store (dfd.adapters.dynamo.locks)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol

from dfd.core import clock
from dfd.core.reads import TenantFileReads, UploadReads, UsageReads
from dfd.uploads.ports import UploadCancels


class LfsStore(UploadReads, TenantFileReads, UsageReads, UploadCancels, Protocol):
    """What dfd.lfs.batch reads and writes (its upload service's own slice apart)."""


# ---------------------------------------------------------------------------------------------- locks
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
