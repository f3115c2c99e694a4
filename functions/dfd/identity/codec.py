"""The personal access tokens' items (LfsTokens table) <-> their records (dfd.core.codec: what an item is).

* a token: ``token_id`` (HASH) -> owner, username, name, the secret's SHA-256, created_at and expires_at (ISO-8601)
  and ``ttl`` (epoch seconds: DynamoDB deletes an expired token's record TTL_GRACE_DAYS after it expired; the
  service refuses it from its expiry on).
* a user's count: ``token_id`` = ``count#<sub>`` -> ``held``, the set of the user's token ids, and ``seeded`` (the
  set was filled from the owner index once).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from dfd.core import clock
from dfd.identity.ports import PersonalToken

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
