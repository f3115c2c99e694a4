"""Target 13: a Git LFS push of N objects of which the tenant already holds K (pushed before from
another of its repositories), through the real ``git`` + ``git-lfs`` on the local stack — the HTTP requests and
the object bytes git sends — against a plain LFS store, which knows no other repository and sends all N: the
same push by a user of another tenant, measured in the same run (dfd gives it nothing for free: no existence
oracle across tenants, so it sends every object, exactly as a plain store would have it)."""

from __future__ import annotations

import os
import re
import subprocess
import tempfile
from pathlib import Path
from typing import Any

import requests

from dfdbench.harness import Options, Row
from dfdbench.mpupload import auth_headers, local_stack

OBJECT_SIZE = 256 * 1024
_HTTP = re.compile(r"HTTP: (GET|POST|PUT) (\S+)")


class Git:
    """git with its own HOME: identity, LFS filters and a credential helper answering with a personal token."""

    def __init__(self, home: Path, api: str, headers: dict[str, str], user: str) -> None:
        home.mkdir(parents=True)
        self.home = home
        answer = requests.post(f"{api}/me/tokens", json={"name": "bench"}, headers=headers, timeout=30)
        answer.raise_for_status()
        token = answer.json()["token"]
        helper = f"!f() {{ echo username={user}; echo password={token}; }}; f"
        (home / ".gitconfig").write_text(
            f'[user]\n\tname = {user}\n\temail = {user}@example.com\n[credential]\n\thelper = "{helper}"\n'
        )
        self.run(home, "lfs", "install", "--skip-repo")

    def run(self, cwd: Path, *args: str, trace: bool = False) -> str:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("GIT_", "AWS_"))}
        env.update(HOME=str(self.home), GIT_CONFIG_NOSYSTEM="1", GIT_TERMINAL_PROMPT="0")
        if trace:
            env["GIT_TRACE"] = "1"  # git-lfs then logs every HTTP request it makes ("HTTP: PUT <url>")
        done = subprocess.run(["git", *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=600)
        if done.returncode != 0:
            raise RuntimeError(f"git {' '.join(args)} failed: {done.stderr[-2000:]}")
        return done.stdout + done.stderr

    def push(self, root: Path, repo: str, api: str, blobs: list[bytes]) -> dict[str, int]:
        """A new repository with `blobs` as LFS files, pushed: git-lfs's requests by kind and the bytes it PUT."""
        root.mkdir(parents=True, exist_ok=True)
        remote, work = root / f"{repo}.git", root / repo
        self.run(root, "init", "-q", "--bare", str(remote))
        self.run(root, "clone", "-q", str(remote), str(work))
        self.run(work, "lfs", "track", "*.bin")
        self.run(work, "config", "-f", ".lfsconfig", "lfs.url", f"{api}/lfs/{repo}")
        for index, blob in enumerate(blobs):
            (work / f"{index:04d}.bin").write_bytes(blob)
        self.run(work, "add", ".")
        self.run(work, "commit", "-qm", "objects")
        log = self.run(work, "push", "-q", "origin", "HEAD", trace=True)
        calls = _HTTP.findall(log)
        lfs = [(method, url) for method, url in calls if "/lfs/" in url]
        puts = [url for method, url in calls if method == "PUT"]
        return {
            "requests": len(calls),
            "lfs_api_requests": len(lfs),
            "verify_requests": sum("/verify/" in url for _, url in lfs),
            "puts": len(puts),
            "bytes_sent": len(puts) * OBJECT_SIZE,
        }


def lfs_push(options: Options) -> list[Row]:
    total, held = (20, 15) if options.quick else (40, 30)
    blobs = [os.urandom(OBJECT_SIZE) for _ in range(total)]
    with tempfile.TemporaryDirectory() as scratch, local_stack(Path(scratch), {}) as ready:
        root, api = Path(scratch), ready["api_url"]
        alice = Git(root / "alice", api, auth_headers(ready, "alice"), "alice")
        bob = Git(root / "bob", api, auth_headers(ready, "bob"), "bob")
        alice.push(root / "a", "earlier", api, blobs[:held])  # the tenant holds K objects from another repo
        dfd = alice.push(root / "a", "game", api, blobs)
        plain = bob.push(root / "b", "game", api, blobs)
    new = total - held
    measured: dict[str, Any] = {"objects": total, "held": held, "object_size": OBJECT_SIZE, "dfd": dfd, "plain": plain}
    return [
        Row(
            "14",
            f"Git LFS push of {total} objects ({OBJECT_SIZE // 1024} KiB) of which the tenant holds {held}: bytes sent",
            dfd["bytes_sent"],
            "bytes",
            plain["bytes_sent"],
            "a plain LFS store (all N sent)",
            dfd["bytes_sent"] / plain["bytes_sent"],
            f"= (N-K)/N = {new / total:.2f}",
            dfd["puts"] == new and plain["puts"] == total,
            f"HTTP requests {dfd['requests']} vs {plain['requests']} (LFS API {dfd['lfs_api_requests']} vs "
            f"{plain['lfs_api_requests']}, S3 PUTs {dfd['puts']} vs {plain['puts']}, verifies "
            f"{dfd['verify_requests']} vs {plain['verify_requests']}); real git + git-lfs on the local stack",
            measured,
        )
    ]
