"""Real S3 clients with dfd's own credentials: POST /me/s3-credentials against the local stack, then the AWS CLI
with a profile whose ``credential_process`` is scripts/s3-credentials (a small file and an 80 MiB file, the CLI's
own multipart) and rclone (``env_auth`` through the same profile: a file and a directory) writing under the
caller's prefix; writes outside it and reads refused."""

from __future__ import annotations

import base64
import hashlib
import json
import os
import shutil
import subprocess
import uuid
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
import requests

from dfd.identity.s3access import parse_key, prefix_for
from dfdtools.s3credentials import aws_profile
from tests.e2e.e2e_helpers import ROOT, RunningStack, wait_until

pytestmark = pytest.mark.e2e

USER = "carol"  # her prefix is written by these tests only
MIB = 1024 * 1024
FIELDS = {
    "Version",
    "AccessKeyId",
    "SecretAccessKey",
    "SessionToken",
    "Expiration",
    "bucket",
    "prefix",
    "region",
    "endpoint_url",
}


def sub_of(stack: RunningStack, user: str) -> str:
    answer = requests.get(f"{stack.api_url}/me", headers=stack.auth(user), timeout=30)
    assert answer.status_code == 200, answer.text
    return str(answer.json()["owner"])


@pytest.fixture(scope="module")
def prefix(stack: RunningStack) -> str:
    return prefix_for("acme", sub_of(stack, USER))


@pytest.fixture(scope="module")
def profile(stack: RunningStack, tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """The environment of a shell whose ~/.aws/config has the README's profile (AWS_PROFILE=dfd)."""
    home = tmp_path_factory.mktemp("home")
    command = [str(ROOT / "scripts" / "s3-credentials"), "--user", USER, "--api", stack.api_url]
    command += ["--endpoint-url", stack.aws_url]
    # rclone refuses to start with AWS_CA_BUNDLE set: no AWS_* of this process reaches either client
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "DFD_", "RCLONE_"))}
    env.update(aws_profile(home / ".aws", command, region=stack.region, endpoint_url=stack.aws_url))
    env.update(HOME=str(home), AWS_MAX_ATTEMPTS="1", DFD_LOCAL_PASSWORD=stack.password)
    return env


def aws(env: Mapping[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    if shutil.which("aws", path=env.get("PATH")) is None:
        pytest.skip("aws CLI not installed (make aws-cli)")
    return subprocess.run(["aws", "s3", *args], capture_output=True, text=True, timeout=300, env=dict(env))


def landed(stack: RunningStack, key: str) -> dict[str, Any]:
    """The processed upload of the object written at `key` (the drop zone moves it to its upload key and ingests it
    there: docs/design/dropzone.md): its owner and filename are the key's, its `hash` the ingest's of the bytes."""
    parsed = parse_key(key)
    assert parsed is not None, key
    _, owner, filename = parsed

    def processed() -> dict[str, Any] | None:
        for page in stack.client("dynamodb").get_paginator("scan").paginate(TableName=stack.uploads_table):
            for item in page["Items"]:
                found = {k: next(iter(v.values())) for k, v in item.items()}
                mine = found.get("owner") == owner and found.get("filename") == filename
                if mine and found["status"] in ("stored", "duplicate"):
                    return found
        return None

    return wait_until(processed, timeout=60)


def stored(stack: RunningStack, key: str) -> bytes:
    """The bytes dfd keeps of the object written at `key` (its content's stored copy, wherever the upload put it)."""
    upload = landed(stack, key)
    body: bytes = stack.client("s3").get_object(Bucket=stack.bucket, Key=str(upload["s3_key"]))["Body"].read()
    assert hashlib.sha256(body).hexdigest() == upload["hash"]
    return body


def test_the_route_answers_credential_process_s_document_for_a_personal_token(stack: RunningStack, prefix: str) -> None:
    created = requests.post(f"{stack.api_url}/me/tokens", json={"name": "laptop"}, headers=stack.auth(USER), timeout=30)
    assert created.status_code == 201, created.text
    pat = created.json()["token"]
    basic = "Basic " + base64.b64encode(f"{USER}:{pat}".encode()).decode()
    for headers, body in (
        ({"Authorization": basic}, None),
        ({"Authorization": f"Bearer {pat}"}, {"duration_seconds": 900}),
    ):
        answer = requests.post(f"{stack.api_url}/me/s3-credentials", json=body, headers=headers, timeout=30)
        assert answer.status_code == 201, answer.text
        issued = answer.json()
        assert set(issued) == FIELDS and issued["Version"] == 1
        assert issued["AccessKeyId"].startswith("ASIA")
        assert (issued["bucket"], issued["prefix"], issued["region"]) == (stack.bucket, prefix, stack.region)
        assert issued["endpoint_url"] == stack.aws_url  # where presigned URLs point too
    refused = requests.post(f"{stack.api_url}/me/s3-credentials", headers={"Authorization": "Bearer nope"}, timeout=30)
    assert refused.status_code == 401 and refused.json()["error"]["code"] == "unauthorized"
    bad = requests.post(
        f"{stack.api_url}/me/s3-credentials",
        json={"duration_seconds": 60},
        headers={"Authorization": basic},
        timeout=30,
    )
    assert bad.status_code == 400 and bad.json()["error"]["code"] == "validation_error"


def test_the_script_prints_the_document(stack: RunningStack, profile: dict[str, str], prefix: str) -> None:
    done = subprocess.run(
        [str(ROOT / "scripts" / "s3-credentials"), "--api", stack.api_url, "--token", stack.token(USER)],
        capture_output=True,
        text=True,
        timeout=60,
        env=profile,
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["prefix"] == prefix
    refused = subprocess.run(
        [str(ROOT / "scripts" / "s3-credentials"), "--api", stack.api_url, "--token", "dfd_pat_0123456789abcdef_x"],
        capture_output=True,
        text=True,
        timeout=60,
        env=profile,
    )
    assert refused.returncode == 2 and refused.stdout == ""
    assert "answered 401" in refused.stderr, refused.stderr


def test_aws_s3_cp_with_credential_process(
    stack: RunningStack, profile: dict[str, str], prefix: str, tmp_path: Path
) -> None:
    small = tmp_path / "small.txt"
    small.write_bytes(f"{uuid.uuid4()} through credential_process\n".encode())
    result = aws(profile, "cp", str(small), f"s3://{stack.bucket}/{prefix}small.txt")
    assert result.returncode == 0, result.stderr
    assert stored(stack, prefix + "small.txt") == small.read_bytes()

    big = tmp_path / "big.bin"
    block = hashlib.sha256(uuid.uuid4().bytes).digest() * (MIB // 32)
    with big.open("wb") as out:
        for index in range(80):
            out.write(index.to_bytes(4, "big") + block[4:])
    result = aws(profile, "cp", str(big), f"s3://{stack.bucket}/{prefix}big.bin")
    assert result.returncode == 0, result.stderr
    upload = landed(stack, prefix + "big.bin")
    assert int(upload["size"]) == 80 * MIB and upload["hash"] == hashlib.sha256(big.read_bytes()).hexdigest()


@pytest.mark.parametrize(
    "args",
    [
        ("cp", "{file}", "s3://{bucket}/" + prefix_for("acme", "someone-else") + "x.txt"),
        ("cp", "{file}", "s3://{bucket}/uploads/x.txt"),
        ("cp", "s3://{bucket}/{prefix}small.txt", "{file}.back"),
    ],
    ids=["another-prefix", "upload-prefix", "read"],
)
def test_aws_s3_outside_the_prefix_is_refused(
    stack: RunningStack, profile: dict[str, str], prefix: str, tmp_path: Path, args: Any
) -> None:
    file = tmp_path / "f.txt"
    file.write_text("x")
    stack.client("s3").put_object(Bucket=stack.bucket, Key=prefix + "small.txt", Body=b"mine")
    result = aws(profile, *(arg.format(file=file, bucket=stack.bucket, prefix=prefix) for arg in args))
    assert result.returncode != 0
    assert "AccessDenied" in result.stderr or "403" in result.stderr, result.stderr
    assert not (tmp_path / "f.txt.back").exists()


# -- rclone ------------------------------------------------------------------------------------------------------
def rclone_remote(stack: RunningStack) -> dict[str, str]:
    """The README's remote, as rclone's environment variables (RCLONE_CONFIG_<NAME>_<OPTION>)."""
    return {
        "RCLONE_CONFIG_DFD_TYPE": "s3",
        "RCLONE_CONFIG_DFD_PROVIDER": "Other",
        "RCLONE_CONFIG_DFD_ENV_AUTH": "true",
        "RCLONE_CONFIG_DFD_ENDPOINT": stack.aws_url,
        "RCLONE_CONFIG_DFD_REGION": stack.region,
        "RCLONE_CONFIG_DFD_FORCE_PATH_STYLE": "true",
        "RCLONE_CONFIG_DFD_NO_CHECK_BUCKET": "true",  # the bucket exists; creating it is not allowed
        "RCLONE_CONFIG_DFD_NO_HEAD": "true",
        # rclone before 1.61 sends an ACL on every write: the one the bucket accepts (a no-op there)
        "RCLONE_CONFIG_DFD_ACL": "bucket-owner-full-control",  # no HeadObject after a write: reads are not allowed
        "RCLONE_CONFIG": os.devnull,
    }


def rclone(stack: RunningStack, env: Mapping[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    if shutil.which("rclone", path=env.get("PATH")) is None:
        if os.environ.get("DFD_REQUIRE_RCLONE") == "1":
            pytest.fail("DFD_REQUIRE_RCLONE=1 but rclone is not installed (apt-get install rclone)")
        pytest.skip("rclone is not installed (.ci/run installs it)")
    return subprocess.run(
        ["rclone", "--retries", "1", "--low-level-retries", "1", *args],
        capture_output=True,
        text=True,
        timeout=300,
        env={**env, **rclone_remote(stack)},
    )


def test_rclone_copies_a_file_and_a_directory_into_the_prefix(
    stack: RunningStack, profile: dict[str, str], prefix: str, tmp_path: Path
) -> None:
    tag = uuid.uuid4().hex
    one = tmp_path / "one.txt"
    one.write_text(f"{tag} one\n")
    # a single file's destination is looked up with HeadObject, a read the credentials do not allow: not checked
    result = rclone(stack, profile, "copyto", "--no-check-dest", str(one), f"dfd:{stack.bucket}/{prefix}rclone/one.txt")
    assert result.returncode == 0, result.stderr
    assert stored(stack, prefix + "rclone/one.txt") == one.read_bytes()

    folder = tmp_path / "dir"
    (folder / "sub").mkdir(parents=True)
    for index in range(4):
        (folder / ("sub" if index % 2 else "") / f"f{index}.txt").write_text(f"{tag} {index}\n")
    result = rclone(stack, profile, "copy", str(folder), f"dfd:{stack.bucket}/{prefix}rclone/dir")
    assert result.returncode == 0, result.stderr
    for name in ("f0.txt", "f2.txt", "sub/f1.txt", "sub/f3.txt"):  # each an upload of its own
        assert landed(stack, prefix + "rclone/dir/" + name)["status"] in ("stored", "duplicate")
    assert stored(stack, prefix + "rclone/dir/sub/f3.txt") == f"{tag} 3\n".encode()


def test_rclone_outside_the_prefix_is_refused(
    stack: RunningStack, profile: dict[str, str], prefix: str, tmp_path: Path
) -> None:
    file = tmp_path / "x.txt"
    file.write_text("x")
    other = prefix_for("acme", "someone-else") + "x.txt"
    result = rclone(stack, profile, "copyto", "--no-check-dest", str(file), f"dfd:{stack.bucket}/{other}")
    assert result.returncode != 0
    assert "AccessDenied" in result.stderr or "403" in result.stderr, result.stderr
    assert stack.client("s3").list_objects_v2(Bucket=stack.bucket, Prefix=other).get("KeyCount", 0) == 0
