"""What a new user meets with the tools on the local stack: scripts/users and a first sign-in with a temporary
password, scripts/upload's answers to a missing path, to Ctrl-C at any moment and to a resumed file that is
already the user's own upload, and make run's readable log."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest
import requests

from tests.e2e.e2e_helpers import ROOT, RunningStack, clean_env, launch_stack, stop_stack, wait_until

pytestmark = pytest.mark.e2e


def env_for(stack: RunningStack, tmp_path: Path) -> dict[str, str]:
    """The tools find the stack by its port variables, as a reader's shell would give them."""
    env = clean_env()
    env["DFD_API_PORT"] = stack.api_url.rsplit(":", 1)[1]
    env["DFD_AWS_PORT"] = stack.aws_url.rsplit(":", 1)[1]
    env["DFD_LAMBDA_PORT"] = stack.lambda_url.rsplit(":", 1)[1]
    env["XDG_CACHE_HOME"] = str(tmp_path / "cache")
    return env


def script(name: str, *args: str, env: dict[str, str], cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(ROOT / "scripts" / name), *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=180
    )


def test_a_new_tenant_and_user_sign_in_with_a_temporary_password_then_their_own(
    stack: RunningStack, tmp_path: Path
) -> None:
    env = env_for(stack, tmp_path)
    tenant, user = f"t{uuid.uuid4().hex[:8]}", f"u{uuid.uuid4().hex[:8]}"
    assert script("users", "tenant", tenant, env=env).returncode == 0
    added = script("users", "add", user, "--tenant", tenant, env=env)
    assert added.returncode == 0, added.stderr
    temporary = added.stdout.split("temporary password: ")[1].split()[0]
    listed = script("users", "list", env=env)
    assert f"{user:<24} FORCE_CHANGE_PASSWORD" in listed.stdout and tenant in listed.stdout

    first = script("token", user, "--password", temporary, env=env)
    assert first.returncode == 2 and first.stdout == ""
    assert first.stderr.strip() == (
        f"scripts/token: {user!r} signs in with a temporary password: choose a new one with --new-password "
        "(or run this on a terminal to be asked)"
    )
    chosen = script("token", user, "--password", temporary, "--new-password", "Brand-new-pass-1", env=env)
    assert chosen.returncode == 0, chosen.stderr
    me = requests.get(f"{stack.api_url}/me", headers={"Authorization": f"Bearer {chosen.stdout.strip()}"}, timeout=10)
    assert me.status_code == 200 and me.json()["tenant"] == tenant and me.json()["is_admin"] is False
    assert script("token", user, "--password", "Brand-new-pass-1", env=env).returncode == 0

    assert script("users", "admin", user, env=env).returncode == 0
    again = script("token", user, "--password", "Brand-new-pass-1", env=env).stdout.strip()
    me = requests.get(f"{stack.api_url}/me", headers={"Authorization": f"Bearer {again}"}, timeout=10)
    assert me.json()["is_admin"] is True
    assert script("users", "remove", user, env=env).returncode == 0
    gone = script("token", user, "--password", "Brand-new-pass-1", env=env)
    assert gone.returncode == 2 and "no user" in gone.stderr


def test_a_missing_path_is_one_line_and_a_non_zero_exit(stack: RunningStack, tmp_path: Path) -> None:
    (tmp_path / "real.txt").write_text("real\n")
    result = script("upload", str(tmp_path / "real.txt"), "/nonexistent/file.bin", env=env_for(stack, tmp_path))
    assert result.returncode == 2
    assert result.stderr.splitlines() == ["scripts/upload: no such file or directory: /nonexistent/file.bin"]
    assert result.stdout == ""  # nothing was uploaded, not even the file that exists


@pytest.mark.parametrize("after", [0.05, 0.15, 0.3, 0.6, 1.2])
def test_ctrl_c_at_any_moment_exits_130_without_a_traceback(stack: RunningStack, tmp_path: Path, after: float) -> None:
    data = tmp_path / "data"
    data.mkdir()
    for number in range(30):
        (data / f"f{number}.bin").write_bytes(os.urandom(20_000))
    process = subprocess.Popen(
        [str(ROOT / "scripts" / "upload"), str(data)],
        cwd=tmp_path,
        env=env_for(stack, tmp_path),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    time.sleep(after)
    os.killpg(process.pid, signal.SIGINT)  # as a terminal's Ctrl-C: the whole foreground process group
    out, err = process.communicate(timeout=60)
    assert "Traceback" not in err and "KeyboardInterrupt" not in err, err
    # 0 only when it had already finished its 30 files
    assert process.returncode in (130, -signal.SIGINT) or (process.returncode == 0 and "30 files" in out), (
        process.returncode,
        out,
        err,
    )


def test_resuming_a_file_that_is_already_the_users_own_upload_says_so(stack: RunningStack, tmp_path: Path) -> None:
    env = env_for(stack, tmp_path)
    mine = tmp_path / "mine.bin"
    mine.write_bytes(os.urandom(30_000))
    assert script("upload", str(mine), env=env).returncode == 0
    avoided = stack_stats(stack)["duplicates_avoided"]
    resumed = script("upload", "--resume", str(mine), env=env)
    assert resumed.returncode == 0, resumed.stderr
    assert "yours" in resumed.stdout and "already uploaded by you: upload " in resumed.stdout
    assert "1 already uploaded by you" in resumed.stdout and "0 skipped" in resumed.stdout
    assert "bytes saved by dedup: 0" in resumed.stdout
    assert stack_stats(stack)["duplicates_avoided"] == avoided  # not counted as a duplicate avoided


def stack_stats(stack: RunningStack) -> dict[str, int]:
    answer = requests.get(f"{stack.api_url}/admin/stats", headers=stack.auth("admin"), timeout=10)
    assert answer.status_code == 200
    return dict(answer.json())


def test_make_run_logs_one_readable_line_per_request(tmp_path: Path) -> None:
    # a stack of its own, as `make run` starts: the session's shared stack has served every other test's traffic
    command = [sys.executable, "-m", "dfdlocal", "--host", "127.0.0.1", "--api-port", "0", "--lambda-port", "0"]
    command += ["--aws-port", "0", "--ready-file", str(tmp_path / "ready.json")]
    stack = launch_stack(command, cwd=ROOT, env=clean_env(), workdir=tmp_path)
    try:
        marker = uuid.uuid4().hex
        answer = requests.get(f"{stack.api_url}/metadata/{marker}", headers=stack.auth(), timeout=10)
        assert answer.status_code == 404
        line = wait_until(
            lambda: next((x for x in stack.logs(400).splitlines() if f"GET /metadata/{marker} -> 404" in x), None)
        )
        assert len(line) < 200, line
        # the functions' own records are readable lines too (no JSON, no EMF metrics lines)
        json_lines = [x for x in stack.logs(400).splitlines() if x.lstrip().startswith("{")]
        assert not json_lines, json_lines
    finally:
        stop_stack(stack)
    assert (
        "--json-logs"
        in subprocess.run(
            [sys.executable, "-m", "dfdlocal", "--help"], cwd=ROOT, capture_output=True, text=True, timeout=60
        ).stdout
    )
