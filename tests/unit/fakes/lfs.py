"""In-memory stores of the LFS ports (dfd.identity.ports.TokenStore, dfd.lfs.ports.LockStore) for the unit tests."""

from __future__ import annotations

from dataclasses import dataclass, field

from dfd.identity.ports import DirectoryUser, PersonalToken, S3Session
from dfd.lfs.ports import Lock, LockExists
from tests.support import USERS


@dataclass
class FakeTokenStore:
    tokens: dict[str, PersonalToken] = field(default_factory=dict)
    reads: int = 0

    def add(self, token: PersonalToken, limit: int) -> bool:
        assert token.token_id not in self.tokens
        live = [t for t in self.tokens.values() if t.owner == token.owner and t.expires_at > token.created_at]
        if len(live) >= limit:
            return False
        self.tokens[token.token_id] = token
        return True

    def get(self, token_id: str) -> PersonalToken | None:
        self.reads += 1
        return self.tokens.get(token_id)

    def list_for(self, owner: str) -> list[PersonalToken]:
        return sorted((t for t in self.tokens.values() if t.owner == owner), key=lambda t: t.created_at)

    def delete(self, token_id: str, owner: str) -> bool:
        token = self.tokens.get(token_id)
        if token is None or token.owner != owner:
            return False
        del self.tokens[token_id]
        return True


@dataclass
class FakeLockStore:
    locks: dict[tuple[str, str], Lock] = field(default_factory=dict)

    def create(self, lock: Lock) -> None:
        key = (lock.repo_key, lock.lock_id)
        if key in self.locks:
            raise LockExists(self.locks[key])
        self.locks[key] = lock

    def get(self, repo_key: str, lock_id: str) -> Lock | None:
        return self.locks.get((repo_key, lock_id))

    def page(self, repo_key: str, limit: int, after: str | None) -> tuple[list[Lock], str | None]:
        ids = sorted(lock_id for key, lock_id in self.locks if key == repo_key and (after is None or lock_id > after))
        page = [self.locks[(repo_key, lock_id)] for lock_id in ids[:limit]]
        return page, (page[-1].lock_id if len(ids) > limit else None)

    def delete(self, lock: Lock) -> bool:
        key = (lock.repo_key, lock.lock_id)
        if self.locks.get(key) != lock:
            return False
        del self.locks[key]
        return True


@dataclass
class FakeDirectory:
    """The user pool as tests/support.USERS has it; tests move users between groups or delete them."""

    users: dict[str, DirectoryUser] = field(
        default_factory=lambda: {name: DirectoryUser(user.sub, user.groups) for name, user in USERS.items()}
    )

    def user(self, username: str) -> DirectoryUser | None:
        return self.users.get(username)


@dataclass
class FakeS3SessionStore:
    """A user's S3 sessions record (dfd.identity.ports.S3SessionStore) in memory; `conflicts` makes the next
    replaces lose to a concurrent one."""

    records: dict[str, tuple[list[S3Session], int]] = field(default_factory=dict)
    conflicts: int = 0

    def sessions(self, owner: str) -> tuple[list[S3Session], int]:
        sessions, version = self.records.get(owner, ([], 0))
        return list(sessions), version

    def replace(self, owner: str, sessions: list[S3Session], version: int) -> bool:
        if self.conflicts:
            self.conflicts -= 1
            current, at = self.records.get(owner, ([], 0))
            self.records[owner] = (current, at + 1)
            return False
        if self.records.get(owner, ([], 0))[1] != version:
            return False
        self.records[owner] = (list(sessions), version + 1)
        return True
