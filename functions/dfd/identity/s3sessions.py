"""What prefix-scoped S3 credentials are worth once issued: a record of each issue, its limit, and the ingest's check
of the writer of a drop-zone object.

STS credentials cannot be recalled one by one, so dfd revokes what they WRITE: every issue is recorded (the user's
sessions record, :class:`S3SessionLedger`), and an object under ``s3/<tenant>/<owner>/`` becomes an upload only
when :meth:`S3Writers.admits` finds a recorded session of that owner for that tenant that is still valid:

* its user still exists, is enabled, has the same sub and is still in that tenant (the user directory, as
  personal access tokens ask it);
* the personal access token it was issued with, if any, still exists (``DELETE /me/tokens/{id}`` revokes it);
* it is live, or expired less than ``KEEP_SECONDS`` ago (the window in which a late event or the daily sweep
  brings its last object).

An object no such session admits is rejected by the drop zone (deleted, Upload Rejected, counted rejected): never
content of a tenant its writer has left. The check holds on AWS as locally: it needs the key (its owner and
tenant) and the record, not the writer's principal.

A user holds at most ``MAX_LIVE_SESSIONS`` live sessions: a further issue is 429 with Retry-After, the seconds
until the oldest live one expires. The record keeps live sessions one by one and, for each (tenant, user, token)
of the expired ones younger than ``KEEP_SECONDS``, the latest: its size is bounded by the limit and the user's
tokens, however often the user asks.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from datetime import datetime
from typing import TYPE_CHECKING, Protocol

from dfd.core import clock
from dfd.core.errors import Forbidden, ServiceUnavailable, TooManyRequests, Unauthorized
from dfd.core.retry import CONFLICT_ATTEMPTS, Backoff
from dfd.identity.caller import caller_from_claims

if TYPE_CHECKING:
    from dfd.identity.ports import PersonalToken, S3Session, S3SessionStore, UserDirectory

# The AWS CLI runs credential_process once per command (the SDKs once per process) and each run is a session: 50
# one-hour sessions leave a user's scripts and machines 50 commands an hour, and stop a flood (thousands) at 50.
MAX_LIVE_SESSIONS = 50
# a session's record outlives its expiry this long: the daily sweep re-drives an object written in the session's
# last second within it, a day to spare
KEEP_SECONDS = 2 * 24 * 3600


class TokenReader(Protocol):
    def get(self, token_id: str) -> PersonalToken | None: ...


def compact(sessions: list[S3Session], now: datetime) -> list[S3Session]:
    """The sessions worth keeping at `now`: every live one, and of the expired ones younger than KEEP_SECONDS the
    latest-expiring of each (tenant, user, token); oldest first."""
    live = [session for session in sessions if session.expires_at > now]
    latest: dict[tuple[str, str, str | None], S3Session] = {}
    for session in sessions:
        if session.expires_at > now or clock.plus(session.expires_at, seconds=KEEP_SECONDS) <= now:
            continue
        source = (session.tenant, session.username, session.token_id)
        if source not in latest or latest[source].expires_at < session.expires_at:
            latest[source] = session
    return sorted([*live, *latest.values()], key=lambda session: (session.issued_at, session.session_id))


def retry_after(sessions: list[S3Session], now: datetime) -> int | None:
    """None when one more session may be issued at `now`; else the seconds until the oldest live one expires."""
    live = sorted(session.expires_at for session in sessions if session.expires_at > now)
    if len(live) < MAX_LIVE_SESSIONS:
        return None
    return max(1, math.ceil((live[len(live) - MAX_LIVE_SESSIONS] - now).total_seconds()))


class S3SessionLedger:
    """The record of a user's sessions: one conditional write per change, tried again when a concurrent one came
    first."""

    def __init__(
        self,
        store: S3SessionStore,
        *,
        now: Callable[[], datetime] = clock.now,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self._store = store
        self._now = now
        self._backoff = Backoff(sleep)

    def add(self, owner: str, session: S3Session) -> None:
        """Records `session`; TooManyRequests (429, retry_after) when the owner holds MAX_LIVE_SESSIONS live ones."""

        def change(sessions: list[S3Session], now: datetime) -> list[S3Session]:
            wait = retry_after(sessions, now)
            if wait is not None:
                raise TooManyRequests(
                    f"a user holds at most {MAX_LIVE_SESSIONS} live S3 sessions: try again in {wait} s",
                    details={"retry_after": wait},
                )
            return [*sessions, session]

        self._change(owner, change)

    def remove(self, owner: str, session_id: str) -> None:
        """Forgets a session whose credentials were never handed out (STS refused them)."""
        self._change(owner, lambda sessions, _: [s for s in sessions if s.session_id != session_id])

    def _change(self, owner: str, change: Callable[[list[S3Session], datetime], list[S3Session]]) -> None:
        for attempt in range(1, CONFLICT_ATTEMPTS + 1):
            sessions, version = self._store.sessions(owner)
            now = self._now()
            if self._store.replace(owner, change(compact(sessions, now), now), version):
                return
            if attempt < CONFLICT_ATTEMPTS:
                self._backoff(attempt)
        raise ServiceUnavailable("the S3 sessions record is busy: try again")


class S3Writers:
    """The ingest's check of a drop-zone object's writer (see the module's docstring)."""

    def __init__(
        self,
        sessions: S3SessionStore,
        tokens: TokenReader,
        directory: UserDirectory,
        *,
        now: Callable[[], datetime] = clock.now,
    ) -> None:
        self._sessions = sessions
        self._tokens = tokens
        self._directory = directory
        self._now = now

    def admits(self, tenant: str, owner: str) -> bool:
        """Whether a still-valid session of `owner` for `tenant` may have written an object under their prefix."""
        recorded, _ = self._sessions.sessions(owner)
        now = self._now()
        candidates = [
            session
            for session in recorded
            if session.tenant == tenant and clock.plus(session.expires_at, seconds=KEEP_SECONDS) > now
        ]
        return any(self._valid(owner, session) for session in candidates)

    def _valid(self, owner: str, session: S3Session) -> bool:
        if session.token_id is not None:
            token = self._tokens.get(session.token_id)
            if token is None or token.owner != owner:
                return False  # revoked (or expired and dropped)
        return tenant_now(self._directory, owner, session.username) == session.tenant


def tenant_now(directory: UserDirectory, owner: str, username: str) -> str | None:
    """The tenant the user `username` with sub `owner` belongs to now; None when the directory has no such
    enabled user, or its groups name no usable tenant."""
    user = directory.user(username)
    if user is None or user.sub != owner:
        return None
    try:
        caller = caller_from_claims({"sub": owner, "username": username, "cognito:groups": list(user.groups)})
    except (Unauthorized, Forbidden):
        return None
    return caller.tenant
