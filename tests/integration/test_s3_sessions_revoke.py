"""The role-wide revocation on the local S3 (scripts/revoke-s3-sessions on the emulator's IAM): a session issued
before the date is refused on every request, as S3 refuses it on AWS; sessions issued after it write as before."""

from __future__ import annotations

import json
import time
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from botocore.exceptions import ClientError

from dfd.identity.s3access import prefix_for
from dfdlocal import names
from dfdlocal.names import BUCKET
from dfdtools import revokesessions
from tests.integration.support import Emulator, empty_s3_stack, s3_client, s3_credentials

PREFIX = prefix_for("acme", "alice-sub")


@pytest.fixture
def stack(emulator: Emulator) -> Emulator:
    return empty_s3_stack(emulator)


def writer(stack: Emulator) -> Any:
    return s3_client(stack, s3_credentials(stack, PREFIX, session="dfd-alice-0123456789abcdef"))


def test_sessions_issued_before_the_date_are_refused_and_later_ones_write(stack: Emulator) -> None:
    old = writer(stack)
    old.put_object(Bucket=BUCKET, Key=PREFIX + "before.txt", Body=b"before")
    revokesessions.revoke(
        stack.client("iam"), names.role_name("S3CredentialsRole"), datetime.now(UTC) + timedelta(seconds=1)
    )
    for call in (
        lambda: old.put_object(Bucket=BUCKET, Key=PREFIX + "after.txt", Body=b"after"),
        lambda: old.list_objects_v2(Bucket=BUCKET, Prefix=PREFIX),
    ):
        with pytest.raises(ClientError) as error:
            call()
        assert error.value.response["Error"]["Code"] == "AccessDenied"
    time.sleep(1.5)  # issued after the date (aws:TokenIssueTime has whole seconds)
    new = writer(stack)
    new.put_object(Bucket=BUCKET, Key=PREFIX + "new.txt", Body=b"new")
    assert [o["Key"] for o in new.list_objects_v2(Bucket=BUCKET, Prefix=PREFIX)["Contents"]] == [
        PREFIX + "before.txt",
        PREFIX + "new.txt",
    ]


def _assumed() -> list[Any]:
    from moto.sts.models import sts_backends

    return list(sts_backends[names.ACCOUNT_ID]["aws"].assumed_roles)


def test_a_restart_keeps_each_sessions_issue_time_so_a_revoked_one_stays_revoked(
    stack: Emulator, tmp_path: Any
) -> None:
    from dfdlocal import stspersist

    old = writer(stack)
    revokesessions.revoke(
        stack.client("iam"), names.role_name("S3CredentialsRole"), datetime.now(UTC) + timedelta(seconds=1)
    )
    stspersist.save_sessions(tmp_path)
    empty_s3_stack(stack)  # the restart
    time.sleep(3)  # the restore 3 s after the issue, the date 1 s before the restore: whole seconds apart
    assert stspersist.restore_sessions(tmp_path) == 1
    revokesessions.revoke(
        stack.client("iam"), names.role_name("S3CredentialsRole"), datetime.now(UTC) - timedelta(seconds=1)
    )
    with pytest.raises(ClientError) as error:  # issued before the date: not "issued" at the restart
        old.put_object(Bucket=BUCKET, Key=PREFIX + "after.txt", Body=b"after")
    assert error.value.response["Error"]["Code"] == "AccessDenied"


def test_a_save_forgets_sessions_long_expired_and_keeps_the_rest(stack: Emulator, tmp_path: Any) -> None:
    from dfdlocal import stspersist

    for _ in range(3):
        writer(stack)
    long_ago, recently, live = _assumed()
    now = datetime.now(UTC).replace(tzinfo=None)
    long_ago.expiration = now - stspersist.FORGET_AFTER - timedelta(seconds=1)
    recently.expiration = now - timedelta(seconds=1)
    stspersist.save_sessions(tmp_path)
    assert [role.access_key_id for role in _assumed()] == [recently.access_key_id, live.access_key_id]
    kept = json.loads((tmp_path / stspersist.STS_SESSIONS).read_text())
    assert [session["access_key_id"] for session in kept] == [live.access_key_id]


def test_the_command_on_the_local_stack(stack: Emulator, capsys: pytest.CaptureFixture[str]) -> None:
    assert revokesessions.main(["--endpoint-url", stack.endpoint, "--show"]) == 0
    assert capsys.readouterr().out == "dfd-s3-credentials-role: no S3 session is revoked\n"
    assert revokesessions.main(["--endpoint-url", stack.endpoint, "--before", "2000-01-01T00:00:00Z"]) == 0
    assert "issued before 2000-01-01T00:00:00Z are refused from now on" in capsys.readouterr().out
    assert revokesessions.main(["--endpoint-url", stack.endpoint, "--show"]) == 0
    assert capsys.readouterr().out.endswith("issued before 2000-01-01T00:00:00Z are refused\n")
    writer(stack).put_object(Bucket=BUCKET, Key=PREFIX + "f.txt", Body=b"issued after 2000")
