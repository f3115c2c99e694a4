"""The lock items (LfsLocks table) <-> their records: ``repo_key`` (HASH, ``<tenant>/<repo>``) and ``lock_id``
(RANGE, the SHA-256 of the path) -> path, owner, owner_name, locked_at (dfd.core.codec: what an item is)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from dfd.core import clock
from dfd.lfs.ports import Lock

if TYPE_CHECKING:
    from dfd.core.codec import Item


def lock_key(repo_key: str, lock_id: str) -> Item:
    return {"repo_key": repo_key, "lock_id": lock_id}


def lock_item(lock: Lock) -> Item:
    return lock_key(lock.repo_key, lock.lock_id) | {
        "path": lock.path,
        "owner": lock.owner,
        "owner_name": lock.owner_name,
        "locked_at": clock.iso(lock.locked_at),
    }


def lock(item: Mapping[str, Any]) -> Lock:
    return Lock(
        repo_key=str(item["repo_key"]),
        lock_id=str(item["lock_id"]),
        path=str(item["path"]),
        owner=str(item["owner"]),
        owner_name=str(item["owner_name"]),
        locked_at=clock.parse(str(item["locked_at"])),
    )
