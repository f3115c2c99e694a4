"""Helpers of the Git LFS e2e tests: real ``git`` + ``git-lfs`` against the local stack.

Each user gets its own HOME and global git config (identity, a credential helper answering with the user's
personal access token), so nothing outside the test's temporary directory is read or written.
"""

from __future__ import annotations

import hashlib
import os
import secrets
import shutil
import signal
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest
import requests

from tests.e2e.e2e_helpers import RunningStack


def require_git_lfs() -> None:
    """Skip without git-lfs, unless DFD_REQUIRE_GIT_LFS=1 (set by .ci/run, which installs it): then fail."""
    if shutil.which("git-lfs") is not None:
        return
    if os.environ.get("DFD_REQUIRE_GIT_LFS") == "1":
        pytest.fail("DFD_REQUIRE_GIT_LFS=1 but git-lfs is not installed (apt-get install git-lfs)")
    pytest.skip("git-lfs is not installed (.ci/run installs it)")


def create_token(stack: RunningStack, user: str, name: str = "git") -> dict[str, str]:
    """POST /me/tokens as ``user``: {"id", "name", "token", "expires_at"}."""
    response = requests.post(f"{stack.api_url}/me/tokens", json={"name": name}, headers=stack.auth(user), timeout=30)
    assert response.status_code == 201, response.text
    body: dict[str, str] = response.json()
    return body


@dataclass
class GitUser:
    """A git user of the local stack: ``run`` runs git in ``cwd`` with this user's HOME and credentials."""

    home: Path
    token: str

    @classmethod
    def make(cls, stack: RunningStack, root: Path, user: str) -> GitUser:
        home = root / f"home-{user}"
        home.mkdir(parents=True, exist_ok=True)
        token = create_token(stack, user)["token"]
        user_config = home / ".gitconfig"
        helper = f"!f() {{ echo username={user}; echo password={token}; }}; f"
        user_config.write_text(
            "[user]\n"
            f"\tname = {user}\n\temail = {user}@example.com\n"
            "[init]\n\tdefaultBranch = main\n"
            f'[credential]\n\thelper = "{helper}"\n'
            "[lfs]\n\tlocksverify = true\n"
        )
        git = cls(home, token)
        git.run(home, "lfs", "install", "--skip-repo")
        return git

    def env(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("GIT_", "AWS_"))}
        env.update(HOME=str(self.home), GIT_CONFIG_NOSYSTEM="1", GIT_TERMINAL_PROMPT="0")
        return env

    def run(self, cwd: Path, *args: str, check: bool = True, timeout: float = 120) -> subprocess.CompletedProcess[str]:
        done = subprocess.run(
            ["git", *args], cwd=cwd, env=self.env(), capture_output=True, text=True, timeout=timeout, check=False
        )
        if check and done.returncode != 0:
            raise AssertionError(f"git {' '.join(args)} failed ({done.returncode}):\n{done.stdout}\n{done.stderr}")
        return done

    def start(self, cwd: Path, *args: str, env: dict[str, str] | None = None) -> subprocess.Popen[str]:
        """git in its own process group (``env`` added to its environment): :func:`interrupt` stops it with the
        git-lfs it runs."""
        return subprocess.Popen(
            ["git", *args],
            cwd=cwd,
            env=self.env() | (env or {}),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            text=True,
            start_new_session=True,
        )


def interrupt(process: subprocess.Popen[str]) -> None:
    """Kills a process :meth:`GitUser.start` started, and its children (git runs git-lfs as a child), as a
    closed laptop or a killed CI job would."""
    os.killpg(process.pid, signal.SIGKILL)
    process.wait()


def new_repo(git: GitUser, root: Path, name: str, lfs_url: str) -> tuple[Path, Path]:
    """A bare remote and a clone of it whose .lfsconfig names ``lfs_url`` (committed: clones find it)."""
    root.mkdir(parents=True, exist_ok=True)
    remote = root / f"{name}.git"
    work = root / name
    git.run(root, "init", "--bare", str(remote))
    git.run(root, "clone", str(remote), str(work))
    git.run(work, "lfs", "track", "*.bin")
    (work / ".lfsconfig").write_text(f'[lfs]\n\turl = "{lfs_url}"\n')
    git.run(work, "add", ".gitattributes", ".lfsconfig")
    git.run(work, "commit", "-m", "lfs setup")
    return remote, work


def commit_file(git: GitUser, work: Path, name: str, data: bytes) -> str:
    """Writes, adds and commits ``name``; its oid."""
    (work / name).write_bytes(data)
    git.run(work, "add", name)
    git.run(work, "commit", "-m", f"add {name}")
    return hashlib.sha256(data).hexdigest()


def commit_pointer(git: GitUser, work: Path, name: str, size: int, *, sparse_object: bool = False) -> str:
    """Commits a hand-written LFS pointer of a random oid and ``size`` bytes; with ``sparse_object`` the local
    object is a sparse file of that size (no disk used: its bytes are never sent). The oid."""
    oid = secrets.token_hex(32)
    pointer = f"version https://git-lfs.github.com/spec/v1\noid sha256:{oid}\nsize {size}\n"
    (work / name).write_text(pointer)
    if sparse_object:
        path = work / ".git" / "lfs" / "objects" / oid[:2] / oid[2:4] / oid
        path.parent.mkdir(parents=True, exist_ok=True)
        with path.open("wb") as sparse:
            sparse.truncate(size)
    git.run(work, "add", name)
    git.run(work, "commit", "-m", f"add {name}")
    return oid
