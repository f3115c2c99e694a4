"""The personal access tokens' items (LfsTokens table) <-> their records (dfd.core.codec: what an item is).

* a token: ``token_id`` (HASH) -> owner, username, name, the secret's SHA-256, created_at and expires_at (ISO-8601)
  and ``ttl`` (epoch seconds: DynamoDB deletes an expired token's record TTL_GRACE_DAYS after it expired; the
  service refuses it from its expiry on).
* a user's count: ``token_id`` = ``count#<sub>`` -> ``held``, the set of the user's token ids, and ``seeded`` (the
  set was filled from the owner index once).
* a user's S3 sessions: ``token_id`` = ``s3sessions#<sub>`` (below).
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from dfd.core import clock
from dfd.identity.ports import PersonalToken, S3Session

if TYPE_CHECKING:
    from dfd.core.codec import Item

TTL_GRACE_DAYS = 1


def token_item(token: PersonalToken) -> Item:
    return {
        "token_id": token.token_id,
        "owner": token.owner,
        "username": token.username,
        "name": token.name,
        "secret_hash": token.secret_hash,
        "created_at": clock.iso(token.created_at),
        "expires_at": clock.iso(token.expires_at),
        "ttl": clock.epoch(clock.plus(token.expires_at, days=TTL_GRACE_DAYS)),
    }


def token(item: Mapping[str, Any]) -> PersonalToken:
    return PersonalToken(
        token_id=str(item["token_id"]),
        owner=str(item["owner"]),
        username=str(item["username"]),
        name=str(item["name"]),
        secret_hash=str(item["secret_hash"]),
        created_at=clock.parse(str(item["created_at"])),
        expires_at=clock.parse(str(item["expires_at"])),
    )


def count_key(owner: str) -> Item:
    return {"token_id": f"count#{owner}"}


def count(item: Mapping[str, Any] | None) -> tuple[bool, set[str]]:
    """(seeded, the counted token ids) of a user's count item (None: no item)."""
    found = item or {}
    return bool(found.get("seeded")), {str(token_id) for token_id in found.get("held", ())}


# a user's S3 sessions (dfd.identity.s3sessions): ``token_id`` = ``s3sessions#<sub>`` -> ``sessions`` (a list of
# maps), ``version`` (each write conditioned on the one it read) and ``ttl`` (a day after the last one's record
# may be dropped). It has no owner and no created_at: OwnerIndex never lists it.
def sessions_key(owner: str) -> Item:
    return {"token_id": f"s3sessions#{owner}"}


def sessions_item(owner: str, sessions: list[S3Session], version: int, keep_until: datetime) -> Item:
    return {
        **sessions_key(owner),
        "sessions": [
            {
                "id": session.session_id,
                "tenant": session.tenant,
                "username": session.username,
                "token": session.token_id or "",
                "issued": clock.epoch(session.issued_at),
                "expires": clock.epoch(session.expires_at),
            }
            for session in sessions
        ],
        "version": version,
        "ttl": clock.epoch(clock.plus(keep_until, days=TTL_GRACE_DAYS)),
    }


def sessions(item: Mapping[str, Any] | None) -> tuple[list[S3Session], int]:
    """(the sessions, the version) of a user's sessions item (None: no item, version 0)."""
    if not item:
        return [], 0
    found = [
        S3Session(
            session_id=str(raw["id"]),
            tenant=str(raw["tenant"]),
            username=str(raw["username"]),
            token_id=str(raw["token"]) or None,
            issued_at=datetime.fromtimestamp(int(raw["issued"]), UTC),
            expires_at=datetime.fromtimestamp(int(raw["expires"]), UTC),
        )
        for raw in item.get("sessions", ())
    ]
    return found, int(item.get("version", 0))
