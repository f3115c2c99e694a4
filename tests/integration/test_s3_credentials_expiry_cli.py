"""The real AWS CLI with a credential_process profile, against the emulator: credentials its STS issued write
under their prefix until the session expires, then the same command is refused (400 ExpiredToken, as S3 answers),
although the profile's document still claims a later Expiration (the session's expiry is the emulator's, moved
into the past here as 900 seconds passing would)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from dfd.identity.s3credentials import iso8601
from dfdlocal.names import ACCOUNT_ID, BUCKET, REGION
from tests.integration.support import Emulator, s3_credentials
from tests.integration.test_s3_credentials_guard import ALICE, stack, stored

__all__ = ["stack"]  # the fixture, shared


def test_the_cli_is_refused_once_the_session_expired(stack: Emulator, tmp_path: Path) -> None:
    if shutil.which("aws") is None:
        pytest.skip("aws CLI not installed (make aws-cli)")
    credentials = s3_credentials(stack, ALICE)
    document = {
        "Version": 1,
        "AccessKeyId": credentials["AccessKeyId"],
        "SecretAccessKey": credentials["SecretAccessKey"],
        "SessionToken": credentials["SessionToken"],
        "Expiration": iso8601(credentials["Expiration"]),
    }
    (tmp_path / "credentials.json").write_text(json.dumps(document))
    (tmp_path / "config").write_text(
        f"[profile dfd]\ncredential_process = cat {tmp_path / 'credentials.json'}\n"
        f"region = {REGION}\nendpoint_url = {stack.endpoint}\n"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    env.update(AWS_CONFIG_FILE=str(tmp_path / "config"), AWS_PROFILE="dfd", AWS_MAX_ATTEMPTS="1")
    env["AWS_SHARED_CREDENTIALS_FILE"] = str(tmp_path / "none")
    (tmp_path / "f.txt").write_text("before\n")

    def cp(key: str) -> subprocess.CompletedProcess[str]:
        target = f"s3://{BUCKET}/{ALICE}{key}"
        return subprocess.run(
            ["aws", "s3", "cp", str(tmp_path / "f.txt"), target], capture_output=True, text=True, timeout=120, env=env
        )

    done = cp("before.txt")
    assert done.returncode == 0, done.stderr
    assert stored(stack, ALICE + "before.txt") == b"before\n"

    from moto.sts.models import sts_backends

    (session,) = [
        r for r in sts_backends[ACCOUNT_ID]["aws"].assumed_roles if r.access_key_id == credentials["AccessKeyId"]
    ]
    session.expiration = datetime.now(UTC).replace(tzinfo=None) - timedelta(seconds=1)
    refused = cp("after.txt")
    assert refused.returncode != 0
    assert "ExpiredToken" in refused.stderr, refused.stderr
    assert "Contents" not in stack.client("s3").list_objects_v2(Bucket=BUCKET, Prefix=ALICE + "after")
