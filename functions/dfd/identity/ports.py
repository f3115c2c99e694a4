"""The personal access tokens' ports: their record and store (dfd.adapters.dynamo.pats), and the user directory
each use asks (dfd.adapters.cognito)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol

from dfd.core import clock


@dataclass(frozen=True, slots=True)
class PersonalToken:
    """One personal access token's record (never the secret: its SHA-256)."""

    token_id: str
    owner: str  # the user's sub
    username: str  # the user's name in the user pool (what the directory is asked with)
    name: str
    secret_hash: str
    created_at: datetime
    expires_at: datetime

    def view(self) -> dict[str, Any]:
        return {
            "id": self.token_id,
            "name": self.name,
            "created_at": clock.iso(self.created_at),
            "expires_at": clock.iso(self.expires_at),
        }


@dataclass(frozen=True, slots=True)
class DirectoryUser:
    sub: str
    groups: tuple[str, ...]


class UserDirectory(Protocol):
    def user(self, username: str) -> DirectoryUser | None:
        """The user as the pool knows them now; None when deleted or disabled."""
        ...


class TokenStore(Protocol):
    def add(self, token: PersonalToken, limit: int) -> bool:
        """Writes a new record (its id is new) counted against its owner's tokens, in ONE conditional step: False,
        writing nothing, when the owner holds `limit` tokens unexpired at ``token.created_at``. Repeating the same
        add (a lost response) writes and counts it once. TransactionRetryable: a concurrent write of the count."""
        ...

    def get(self, token_id: str) -> PersonalToken | None: ...

    def list_for(self, owner: str) -> list[PersonalToken]:
        """The owner's tokens, oldest first."""
        ...

    def delete(self, token_id: str, owner: str) -> bool:
        """Deletes the owner's token and uncounts it, in one step; False when there is no such token of this
        owner."""
        ...


@dataclass(frozen=True, slots=True)
class S3Session:
    """One issue of prefix-scoped S3 credentials (dfd.identity.s3sessions): whose, for which tenant, with what."""

    session_id: str  # 16 hex digits, the end of the session's RoleSessionName
    tenant: str  # the tenant whose prefix the session may write
    username: str  # the user's name in the user pool (what the directory is asked with)
    token_id: str | None  # the personal access token it was issued with; None for an access token
    issued_at: datetime
    expires_at: datetime


class S3SessionStore(Protocol):
    def sessions(self, owner: str) -> tuple[list[S3Session], int]:
        """The owner's recorded sessions and the record's version (0: none yet), read consistently."""
        ...

    def replace(self, owner: str, sessions: list[S3Session], version: int) -> bool:
        """Writes the owner's sessions as version ``version + 1`` in ONE conditional step: False, writing nothing,
        when the record is no longer at ``version`` (a concurrent issue wrote it)."""
        ...
