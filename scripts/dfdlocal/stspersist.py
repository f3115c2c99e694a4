"""Credentials the emulator's STS issued, kept across a restart (moto keeps them in memory only): an S3 tool
configured with prefix-scoped credentials (hours long) keeps working when ``make run`` restarts, as it would on
AWS. With a data directory, every successful STS call is followed by a save of the sessions not yet expired
(mode 0600: they hold secrets); at start they are put back into moto's STS and IAM as they were, issue time
included (``aws:TokenIssueTime``: a session revoked by scripts/revoke-s3-sessions stays revoked). moto keeps every
session it issued: a save also forgets those expired more than ``FORGET_AFTER`` ago (until then the guard answers
them ExpiredToken, as S3 does), so neither the file nor the emulator's memory grows with the sessions ever issued
(POST /me/s3-credentials bounds the live ones per user)."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING

from dfdlocal import sigv4
from dfdlocal.names import ACCOUNT_ID, REGION
from dfdlocal.persist import _call, read_state, write_whole

if TYPE_CHECKING:
    from _typeshed.wsgi import StartResponse, WSGIApplication, WSGIEnvironment

STS_SESSIONS = "sts-sessions.json"
PARTITION = "aws"
FORGET_AFTER = timedelta(hours=1)


def _naive_utc_now() -> datetime:
    return datetime.now(UTC).replace(tzinfo=None)  # moto's clock: naive UTC


def save_sessions(data_dir: Path) -> None:
    """The emulator's STS sessions that have not expired, to ``data_dir``."""
    from moto.iam.models import iam_backends
    from moto.sts.models import sts_backends

    now = _naive_utc_now()
    backend = sts_backends[ACCOUNT_ID][PARTITION]
    forgotten = [
        role for role in list(backend.assumed_roles) if role.expiration.replace(tzinfo=None) <= now - FORGET_AFTER
    ]
    if forgotten:
        keys = iam_backends[ACCOUNT_ID][PARTITION].access_keys
        for role in forgotten:
            backend.assumed_roles.remove(role)
            keys.pop(role.access_key_id, None)
    sessions = [
        {
            "access_key_id": role.access_key_id,
            "secret_access_key": role.secret_access_key,
            "session_token": role.session_token,
            "expiration": role.expiration.replace(tzinfo=None).isoformat(),
            "issued": role.access_key.create_date.replace(tzinfo=None).isoformat(),
            "role_arn": role.role_arn,
            "session_name": role.session_name,
            "policy": role.policy,
            "external_id": role.external_id,
            "region": role.region_name,
        }
        for role in list(backend.assumed_roles)
        if role.expiration.replace(tzinfo=None) > now
    ]
    write_whole(data_dir / STS_SESSIONS, json.dumps(sessions).encode(), mode=0o600)


def restore_sessions(data_dir: Path) -> int:
    """Put the kept sessions that have not expired back into moto's STS (and their keys into its IAM); how many."""
    path = data_dir / STS_SESSIONS
    if not path.exists():
        return 0
    from moto.iam.models import AccessKey, iam_backends
    from moto.sts.models import AssumedRole, sts_backends

    now = _naive_utc_now()
    backend = sts_backends[ACCOUNT_ID][PARTITION]
    known = {role.access_key_id for role in backend.assumed_roles}
    restored = 0
    for kept in json.loads(read_state(path)):
        expiration = datetime.fromisoformat(kept["expiration"])
        if expiration <= now or kept["access_key_id"] in known:
            continue
        key = AccessKey(user_name=None, prefix="ASIA", account_id=ACCOUNT_ID)  # type: ignore[abstract]
        key.access_key_id, key.secret_access_key = kept["access_key_id"], kept["secret_access_key"]
        key.role_arn = kept["role_arn"]
        if kept.get("issued"):
            key.create_date = datetime.fromisoformat(kept["issued"])
        iam_backends[ACCOUNT_ID][PARTITION].access_keys[key.access_key_id] = key
        role = AssumedRole(
            account_id=ACCOUNT_ID,
            region_name=kept.get("region") or REGION,
            access_key=key,
            role_session_name=kept["session_name"],
            role_arn=kept["role_arn"],
            policy=kept["policy"],
            duration=0,
            external_id=kept["external_id"],
        )
        role.session_token, role.expiration = kept["session_token"], expiration
        backend.assumed_roles.append(role)
        restored += 1
    return restored


def _is_sts(environ: WSGIEnvironment) -> bool:
    authorization = str(environ.get("HTTP_AUTHORIZATION", ""))
    return "/sts/aws4_request" in authorization and sigv4.access_key_of(authorization) is not None


class PersistSts:
    """WSGI middleware: an STS request that succeeded is followed by :func:`save_sessions` (before it is
    answered)."""

    def __init__(self, app: WSGIApplication, data_dir: Path) -> None:
        self.app = app
        self.data_dir = data_dir
        self._lock = threading.Lock()

    def __call__(self, environ: WSGIEnvironment, start_response: StartResponse) -> Iterable[bytes]:
        if not _is_sts(environ):
            return self.app(environ, start_response)
        status, body = _call(self.app, environ, start_response)
        if status.startswith("2"):
            with self._lock:
                save_sessions(self.data_dir)
        return [body]
