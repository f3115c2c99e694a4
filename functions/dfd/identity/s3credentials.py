"""POST /me/s3-credentials: temporary S3 credentials that may write only under the caller's own prefix.

The credentials are a session of ``S3CredentialsRole`` (template.yaml) assumed with the session policy of
:mod:`dfd.identity.s3access` for the caller's prefix ``s3/<tenant>/<owner>/``: any S3 tool (the AWS CLI, rclone,
every SDK) writes there with its own multipart and retries, and a key there names its caller
(:func:`dfd.identity.s3access.parse_key`). The answer is the AWS CLI's ``credential_process`` document
(``Version`` 1, the keys, the session token, ``Expiration`` in ISO 8601) plus where to write: ``bucket``,
``prefix``, ``region`` and ``endpoint_url`` (the S3 endpoint to use; ``None`` on AWS, where the SDKs find it
themselves).

Issuance asks the user directory for the caller as the user is NOW (dfd.identity.s3sessions.tenant_now): a user
deleted, disabled or in no usable tenant gets 401 whatever token it holds, and the prefix is the tenant's the user
is in now. Each issue is recorded (dfd.identity.s3sessions: the ingest admits a drop-zone object only while a
session that may have written it is valid) and counted: at most MAX_LIVE_SESSIONS live per user, else 429.
The RoleSessionName ends with the session's record id, so CloudTrail's and S3's logs name the issue.

The secret key and session token are in the answer only: never logged, never stored.
"""

from __future__ import annotations

import contextlib
import json
import re
import secrets
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Protocol

from dfd.core import clock
from dfd.core.errors import DfdError, Unauthorized, ValidationFailed
from dfd.core.text import refuse_unknown
from dfd.identity.ports import S3Session
from dfd.identity.s3access import prefix_for, session_policy
from dfd.identity.s3sessions import S3SessionLedger, tenant_now

if TYPE_CHECKING:
    from dfd.identity.caller import Caller
    from dfd.identity.ports import UserDirectory

# An hour, the longest too: the lifetime is how long a leaked set keeps listing its prefix and writing bytes (which
# the ingest then rejects) before nothing but the role-wide revocation stops it. Tools never notice: the AWS CLI
# and the SDKs run credential_process again 15 minutes before the Expiration, so they hold each set 45 minutes.
DEFAULT_DURATION = 3600
MIN_DURATION = 900  # STS's minimum for AssumeRole
MAX_DURATION = 3600  # S3CredentialsRole's MaxSessionDuration (template.yaml): STS refuses more
BODY_FIELDS = frozenset({"duration_seconds"})
SESSION_NAME_MAX = 64  # RoleSessionName: 2..64 characters of [\w+=,.@-]
_SESSION_NAME_OTHER = re.compile(r"[^\w+=,.@-]", re.ASCII)


@dataclass(frozen=True, slots=True)
class IssuedCredentials:
    access_key_id: str
    secret_access_key: str
    session_token: str
    expiration: datetime  # aware


class Sts(Protocol):
    """AssumeRole (dfd.adapters.sts): ServiceUnavailable (503) when STS throttles or does not answer,
    UpstreamFailed (502) when it refuses."""

    def assume_role(self, role_arn: str, session_name: str, policy: str, duration_seconds: int) -> IssuedCredentials:
        raise NotImplementedError


@dataclass(frozen=True, slots=True)
class S3CredentialsSettings:
    role_arn: str  # S3_CREDENTIALS_ROLE_ARN
    bucket: str
    region: str
    endpoint_url: str | None  # the S3 endpoint clients must use (the local stack's emulator), None on AWS
    kms_key_arn: str = ""  # the bucket's customer-managed key, when there is one

    @property
    def partition(self) -> str:
        """The role's partition (``aws``, ``aws-cn``, ``aws-us-gov``): the bucket's ARN is in the same one."""
        parts = self.role_arn.split(":")
        return parts[1] if len(parts) > 1 and parts[1] else "aws"


def duration_of(body: Any) -> int:
    """The session's duration from the body ``{"duration_seconds": 900..3600}`` (``{}`` when the request has
    none); ValidationFailed (400) for anything else: another type, an unknown field, a number outside the range."""
    if not isinstance(body, Mapping):
        raise ValidationFailed(
            f'the body must be a JSON object: {{"duration_seconds": {MIN_DURATION}..{MAX_DURATION}}}'
        )
    refuse_unknown(body, BODY_FIELDS)  # named bounded and printable, as /me/tokens does (dfd.core.text)
    value = body.get("duration_seconds", DEFAULT_DURATION)
    if isinstance(value, bool) or not isinstance(value, int) or not MIN_DURATION <= value <= MAX_DURATION:
        raise ValidationFailed(f"duration_seconds must be an integer from {MIN_DURATION} to {MAX_DURATION}")
    return value


def session_name(caller: Caller, session_id: str) -> str:
    """The RoleSessionName (CloudTrail names the session by it): ``dfd-``, the caller's id (cut to fit) and the
    session's record id, in STS's charset."""
    owner = _SESSION_NAME_OTHER.sub("-", caller.owner)[: SESSION_NAME_MAX - len(session_id) - 5]
    return f"dfd-{owner}-{session_id}"


def iso8601(moment: datetime) -> str:
    """``2026-11-27T21:00:00Z``: the Expiration credential_process expects (UTC, whole seconds)."""
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


class S3CredentialsService:
    def __init__(
        self,
        sts: Sts,
        settings: S3CredentialsSettings,
        directory: UserDirectory,
        ledger: S3SessionLedger,
        *,
        now: Callable[[], datetime] = clock.now,
    ) -> None:
        self._sts = sts
        self._settings = settings
        self._directory = directory
        self._ledger = ledger
        self._now = now

    def issue(self, caller: Caller, body: Any) -> dict[str, Any]:
        """The caller's credentials (a new session of the role, scoped to its prefix) and where to write."""
        duration = duration_of(body)
        username = caller.username
        tenant = tenant_now(self._directory, caller.owner, username) if username else None
        if username is None or tenant is None:
            raise Unauthorized("the caller is no longer an enabled user of a tenant: sign in again")
        now = self._now()
        session = S3Session(
            session_id=secrets.token_hex(8),
            tenant=tenant,
            username=username,
            token_id=caller.token_id,
            issued_at=now,
            expires_at=clock.plus(now, seconds=duration),
        )
        self._ledger.add(caller.owner, session)  # 429 over the limit, before STS is asked
        settings = self._settings
        prefix = prefix_for(tenant, caller.owner)
        policy = session_policy(settings.bucket, prefix, settings.partition, kms_key_arn=settings.kms_key_arn)
        try:
            issued = self._sts.assume_role(
                settings.role_arn,
                session_name(caller, session.session_id),
                json.dumps(policy, separators=(",", ":")),
                duration,
            )
        except Exception:
            with contextlib.suppress(DfdError):  # the STS error is the answer; an unremoved record only counts
                self._ledger.remove(caller.owner, session.session_id)  # handed out to no one: counts for nothing
            raise
        return {
            "Version": 1,
            "AccessKeyId": issued.access_key_id,
            "SecretAccessKey": issued.secret_access_key,
            "SessionToken": issued.session_token,
            "Expiration": iso8601(issued.expiration),
            "bucket": settings.bucket,
            "prefix": prefix,
            "region": settings.region,
            "endpoint_url": settings.endpoint_url,
        }
