"""Personal access tokens: credentials a user can keep for months, for the /lfs routes and POST /me/s3-credentials.

``POST /me/tokens`` makes one for the caller: ``dfd_pat_<id>_<secret>`` — the prefix lets secret scanners find
leaked ones, the id (16 hex digits) finds its record with one GetItem, the secret is 256 random bits. The token
is shown once; only its SHA-256 is stored (a fast hash is right for 256 random bits: nothing to brute-force).
The record keeps whose token it is (the user's ``sub`` and username); each use asks the user directory (the
Cognito pool, dfd.adapters.cognito) for the user's CURRENT groups, so a token acts as its user as the user is now
(tenant, admin) and stops working when the user is deleted or disabled — a change of groups applies within the
directory's short cache. ``DELETE /me/tokens/{id}`` deletes the record: the next request with the token is
refused (the record is read at every use, never cached), and the objects the S3 credentials issued with it write
from then on are rejected (dfd.identity.s3sessions).

A user holds at most ``MAX_TOKENS_PER_USER`` live tokens: the store counts a token and writes it in ONE conditional
step (TokenStore.add), so concurrent creates cannot pass the limit together; a delete uncounts it in the same
step as it removes it. Expired tokens are not counted. A create that meets a concurrent one on the count (a
TransactionConflict) is tried again after dfd.core.retry's pause.
"""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets
import time
from collections.abc import Callable, Mapping
from dataclasses import replace
from datetime import datetime
from typing import TYPE_CHECKING, Any

from dfd.core import clock
from dfd.core.errors import Conflict, NotFound, TransactionRetryable, ValidationFailed
from dfd.core.retry import CONFLICT_ATTEMPTS, Backoff
from dfd.core.text import refuse_unknown
from dfd.identity.caller import Caller, caller_from_claims
from dfd.identity.ports import PersonalToken

if TYPE_CHECKING:
    from dfd.identity.ports import TokenStore, UserDirectory

PREFIX = "dfd_pat_"
TOKEN_ID = re.compile(r"[0-9a-f]{16}")
_TOKEN = re.compile(PREFIX + r"(?P<id>[0-9a-f]{16})_(?P<secret>[A-Za-z0-9_-]{43})")
DEFAULT_DAYS = 90
MAX_DAYS = 365
MAX_TOKENS_PER_USER = 50
MAX_NAME = 100
_FIELDS = {"name", "expires_in_days"}


def secret_hash(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def looks_like_pat(secret: str) -> bool:
    return secret.startswith(PREFIX)


def parse_create(body: Any) -> tuple[str, int]:
    """A POST /me/tokens body → (name, days); ValidationFailed (400) for anything else."""
    if not isinstance(body, Mapping):
        raise ValidationFailed("request body must be a JSON object")
    refuse_unknown(body, _FIELDS)  # echoed bounded and printable, as POST /upload does (dfd.core.text)
    name = body.get("name")
    if not isinstance(name, str) or not 1 <= len(name.strip()) <= MAX_NAME or not name.isprintable():
        raise ValidationFailed(f"name must be 1 to {MAX_NAME} printable characters", details={"field": "name"})
    days = body.get("expires_in_days", DEFAULT_DAYS)
    if isinstance(days, bool) or not isinstance(days, int) or not 1 <= days <= MAX_DAYS:
        raise ValidationFailed(
            f"expires_in_days must be an integer from 1 to {MAX_DAYS}", details={"field": "expires_in_days"}
        )
    return name.strip(), days


class PatService:
    def __init__(
        self,
        store: TokenStore,
        directory: UserDirectory,
        *,
        now: Callable[[], datetime] = clock.now,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self._store = store
        self._directory = directory
        self._now = now
        self._backoff = Backoff(sleep)

    def create(self, caller: Caller, body: Any) -> dict[str, Any]:
        name, days = parse_create(body)
        token_id = secrets.token_hex(8)
        token = f"{PREFIX}{token_id}_{secrets.token_urlsafe(32)}"
        now = self._now()
        record = PersonalToken(
            token_id=token_id,
            owner=caller.owner,
            username=caller.username or caller.owner,
            name=name,
            secret_hash=secret_hash(token),
            created_at=now,
            expires_at=clock.plus(now, days=days),
        )
        for attempt in range(1, CONFLICT_ATTEMPTS + 1):
            try:
                added = self._store.add(record, MAX_TOKENS_PER_USER)
            except TransactionRetryable:  # a concurrent create or delete wrote the count: pause, then again
                if attempt == CONFLICT_ATTEMPTS:
                    raise
                self._backoff(attempt)
                continue
            if not added:
                raise Conflict(
                    f"a user has at most {MAX_TOKENS_PER_USER} tokens: delete one first", code="too_many_tokens"
                )
            break
        view = record.view()
        return {"id": view["id"], "name": view["name"], "token": token, "expires_at": view["expires_at"]}

    def list(self, caller: Caller) -> dict[str, Any]:
        return {"tokens": [token.view() for token in self._store.list_for(caller.owner)]}

    def revoke(self, caller: Caller, token_id: str) -> None:
        if not TOKEN_ID.fullmatch(token_id) or not self._store.delete(token_id, caller.owner):
            raise NotFound(f"no token has id {token_id[:32]}")

    def authenticate(self, token: str) -> Caller | None:
        """The caller a token acts as; None for anything but a live token this API issued."""
        found = _TOKEN.fullmatch(token)
        if found is None:
            return None
        record = self._store.get(found["id"])
        if record is None or not hmac.compare_digest(record.secret_hash, secret_hash(token)):
            return None
        if record.expires_at <= self._now():
            return None
        user = self._directory.user(record.username)
        if user is None or user.sub != record.owner:  # deleted, disabled, or the name is someone else's now
            return None
        claims: dict[str, Any] = {"sub": record.owner, "username": record.username, "cognito:groups": list(user.groups)}
        return replace(caller_from_claims(claims), token_id=record.token_id)
