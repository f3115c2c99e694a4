"""dfd as a Git LFS server, through the real ``git`` and ``git-lfs`` (the local stack; personal access tokens from
POST /me/tokens handed to git by a credential helper)."""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

import pytest
import requests
from boto3.dynamodb.types import TypeDeserializer

from tests.e2e.e2e_helpers import RunningStack, wait_until
from tests.e2e.lfs_git import GitUser, commit_file, commit_pointer, interrupt, new_repo, require_git_lfs

pytestmark = pytest.mark.e2e

_deserialize = TypeDeserializer().deserialize
LFS_JSON = "application/vnd.git-lfs+json"


def uploads_of(stack: RunningStack, oid: str) -> list[dict[str, Any]]:
    """Every upload record of content ``oid`` (pending ones carry sha256, processed ones hash), oldest first."""
    pages = stack.client("dynamodb").get_paginator("scan").paginate(TableName=stack.uploads_table)
    records = [{k: _deserialize(v) for k, v in item.items()} for page in pages for item in page["Items"]]
    return sorted((r for r in records if oid in (r.get("hash"), r.get("sha256"))), key=lambda r: r["created_at"])


def bucket_objects_with(stack: RunningStack, data: bytes) -> int:
    s3 = stack.client("s3")
    count = 0
    for page in s3.get_paginator("list_objects_v2").paginate(Bucket=stack.bucket):
        for entry in page.get("Contents", []):
            if entry["Size"] != len(data):
                continue
            count += s3.get_object(Bucket=stack.bucket, Key=entry["Key"])["Body"].read() == data
    return count


@pytest.fixture
def alice(stack: RunningStack, tmp_path: Path) -> GitUser:
    require_git_lfs()
    return GitUser.make(stack, tmp_path, "alice")


def test_push_then_clone_round_trips_bytes(stack: RunningStack, alice: GitUser, tmp_path: Path) -> None:
    remote, work = new_repo(alice, tmp_path, "game", f"{stack.api_url}/lfs/game")
    data = os.urandom(300_000) + b"round trip"
    oid = commit_file(alice, work, "level.bin", data)
    alice.run(work, "push", "origin", "main")

    clone = tmp_path / "clone"
    alice.run(tmp_path, "clone", str(remote), str(clone))
    assert (clone / "level.bin").read_bytes() == data
    records = uploads_of(stack, oid)
    assert [(r["status"], r["tenant"]) for r in records] == [("stored", "acme")]
    # an ordinary dfd upload: GET /metadata of its upload id answers as for POST /upload's
    metadata = requests.get(f"{stack.api_url}/metadata/{records[0]['upload_id']}", headers=stack.auth(), timeout=30)
    assert metadata.status_code == 200 and metadata.json()["hash"] == oid


def test_two_repos_of_a_tenant_send_shared_content_once(stack: RunningStack, alice: GitUser, tmp_path: Path) -> None:
    """The second repository's push, and the first's pushed again, send nothing and record nothing."""
    data = os.urandom(200_000)
    _, first = new_repo(alice, tmp_path, "one", f"{stack.api_url}/lfs/one")
    oid = commit_file(alice, first, "shared.bin", data)
    alice.run(first, "push", "origin", "main")
    stored = uploads_of(stack, oid)
    remote, second = new_repo(alice, tmp_path, "two", f"{stack.api_url}/lfs/two")
    commit_file(alice, second, "copy.bin", data)
    alice.run(second, "push", "origin", "main")
    alice.run(first, "lfs", "push", "--object-id", "origin", oid)  # the object asked for again

    assert [r["status"] for r in stored] == ["stored"] and "s3_key" in stored[0]
    assert uploads_of(stack, oid) == stored  # no upload record, nothing sent
    assert bucket_objects_with(stack, data) == 1
    clone = tmp_path / "clone-two"
    alice.run(tmp_path, "clone", str(remote), str(clone))
    assert (clone / "copy.bin").read_bytes() == data


def test_another_tenants_push_sends_its_bytes_and_one_object_stays(
    stack: RunningStack, alice: GitUser, tmp_path: Path
) -> None:
    bob = GitUser.make(stack, tmp_path, "bob")
    data = os.urandom(150_000)
    _, mine = new_repo(alice, tmp_path, "assets", f"{stack.api_url}/lfs/assets")
    oid = commit_file(alice, mine, "a.bin", data)
    alice.run(mine, "push", "origin", "main")
    # the same repository name in another tenant is another repository
    remote, theirs = new_repo(bob, tmp_path / "bob", "assets", f"{stack.api_url}/lfs/assets")
    commit_file(bob, theirs, "b.bin", data)
    bob.run(theirs, "push", "origin", "main")

    records = sorted(uploads_of(stack, oid), key=lambda r: r["tenant"])
    # each tenant's first copy is "stored" for that tenant (its own reference); physically there is one object
    assert [(r["tenant"], r["status"]) for r in records] == [("acme", "stored"), ("globex", "stored")]
    assert "s3_key" in records[1]  # bob had to send the bytes (no existence oracle)...
    assert bucket_objects_with(stack, data) == 1  # ...which the verify's ingest deduplicated
    clone = tmp_path / "bob-clone"
    bob.run(tmp_path, "clone", str(remote), str(clone))
    assert (clone / "b.bin").read_bytes() == data


def test_wrong_bytes_put_to_an_upload_href_is_refused_and_never_recorded(stack: RunningStack, alice: GitUser) -> None:
    data = os.urandom(50_000)
    import hashlib

    oid = hashlib.sha256(data).hexdigest()
    auth = ("git", alice.token)
    headers = {"Accept": LFS_JSON, "Content-Type": LFS_JSON}
    batch = requests.post(
        f"{stack.api_url}/lfs/wrong/objects/batch",
        json={"operation": "upload", "objects": [{"oid": oid, "size": len(data)}]},
        headers=headers,
        auth=auth,
        timeout=30,
    )
    assert batch.status_code == 200, batch.text
    actions = batch.json()["objects"][0]["actions"]
    other = bytes(len(data))  # the same length, other bytes
    put = requests.put(actions["upload"]["href"], data=other, headers=actions["upload"]["header"], timeout=30)
    assert put.status_code == 400, put.text  # S3 checks the signed x-amz-checksum-sha256
    verify = requests.post(
        actions["verify"]["href"], json={"oid": oid, "size": len(data)}, headers=headers, auth=auth, timeout=60
    )
    assert verify.status_code == 422 and "not in the store" in verify.json()["message"]
    assert [r["status"] for r in uploads_of(stack, oid)] == ["pending"]
    assert bucket_objects_with(stack, other) == 0
    download = requests.post(
        f"{stack.api_url}/lfs/wrong/objects/batch",
        json={"operation": "download", "objects": [{"oid": oid, "size": len(data)}]},
        headers=headers,
        auth=auth,
        timeout=30,
    )
    assert download.json()["objects"][0]["error"]["code"] == 404


def test_an_object_basic_cannot_carry_shows_the_422_message_in_git(
    stack: RunningStack, alice: GitUser, tmp_path: Path
) -> None:
    _, work = new_repo(alice, tmp_path, "huge", f"{stack.api_url}/lfs/huge")
    commit_pointer(alice, work, "huge.bin", 6 * 1024**3, sparse_object=True)
    pushed = alice.run(work, "push", "origin", "main", check=False)
    assert pushed.returncode != 0
    assert "the basic transfer's largest" in pushed.stdout + pushed.stderr


def test_a_push_over_the_tenants_quota_shows_the_507_message(
    stack: RunningStack, alice: GitUser, tmp_path: Path
) -> None:
    _, work = new_repo(alice, tmp_path, "big", f"{stack.api_url}/lfs/big")
    oid = commit_pointer(alice, work, "big.bin", 1024**3 + 1, sparse_object=True)  # the local quota is 1 GiB
    pushed = alice.run(work, "push", "origin", "main", check=False)
    assert pushed.returncode != 0
    assert "the tenant's quota is 1073741824 bytes" in pushed.stdout + pushed.stderr
    assert uploads_of(stack, oid) == []  # nothing registered


def one_object_sent(progress: Path) -> bool:
    """A line of git-lfs's GIT_LFS_PROGRESS file shows an object sent whole (``<dir> <n>/<m> <sent>/<size> <name>``)."""
    lines = progress.read_text().splitlines() if progress.exists() else []
    for fields in (line.split() for line in lines):
        sent, _, size = fields[2].partition("/") if len(fields) >= 4 else ("", "", "")
        if sent.isdigit() and sent == size and int(sent) > 0:
            return True
    return False


def test_an_interrupted_push_resumes(stack: RunningStack, alice: GitUser, tmp_path: Path) -> None:
    remote, work = new_repo(alice, tmp_path, "resume", f"{stack.api_url}/lfs/resume")
    files = {f"part{i}.bin": os.urandom(3_000_000) for i in range(8)}
    oids = [commit_file(alice, work, name, data) for name, data in files.items()]
    # git-lfs appends a line per transfer step to GIT_LFS_PROGRESS ("upload 1/8 3000000/3000000 part0.bin"): once
    # one object is sent, seven are still to go, one at a time; it is interrupted then (a scan of the uploads
    # table for the batch's records could take longer than the whole push on a fast stack)
    progress = tmp_path / "resume-progress"
    pushing = alice.start(
        work,
        "-c",
        "lfs.concurrenttransfers=1",
        "lfs",
        "push",
        "origin",
        "main",
        env={"GIT_LFS_PROGRESS": str(progress)},
    )
    deadline = time.monotonic() + 60
    while not one_object_sent(progress):
        assert pushing.poll() is None, "the push ended before it could be interrupted"
        assert time.monotonic() < deadline, "the push sent no object within 60 s"
        time.sleep(0.005)
    assert pushing.poll() is None, "the push ended before it could be interrupted"
    interrupt(pushing)  # during the transfers

    def stored() -> set[str]:
        return {oid for oid in oids if any(r["status"] == "stored" for r in uploads_of(stack, oid))}

    assert len(stored()) < len(oids)

    alice.run(work, "push", "origin", "main")
    # the poller ingests the first push's PUTs meanwhile: the table is read until it shows all of them
    wait_until(lambda: stored() == set(oids), timeout=10)
    clone = tmp_path / "resume-clone"
    alice.run(tmp_path, "clone", str(remote), str(clone))
    for name, data in files.items():
        assert (clone / name).read_bytes() == data


def test_lock_unlock_and_locks_and_the_push_time_check(stack: RunningStack, alice: GitUser, tmp_path: Path) -> None:
    carol = GitUser.make(stack, tmp_path / "carol", "carol")  # the same tenant as alice
    remote, work = new_repo(alice, tmp_path, "locked", f"{stack.api_url}/lfs/locked")
    commit_file(alice, work, "map.bin", os.urandom(1000))
    alice.run(work, "push", "origin", "main")
    theirs = tmp_path / "carol-clone"
    carol.run(tmp_path, "clone", str(remote), str(theirs))

    locked = carol.run(theirs, "lfs", "lock", "map.bin")
    assert "Locked map.bin" in locked.stdout
    listed = alice.run(work, "lfs", "locks")
    assert "map.bin" in listed.stdout and "carol" in listed.stdout
    # alice changes the file carol locked: the push is refused by the push-time lock check
    (work / "map.bin").write_bytes(os.urandom(1000))
    alice.run(work, "commit", "-am", "change a locked file")
    refused = alice.run(work, "push", "origin", "main", check=False)
    assert refused.returncode != 0
    assert "Unable to push locked files:\n* map.bin" in refused.stdout + refused.stderr
    # not hers to unlock, even with --force (only the owner or an admin)
    assert alice.run(work, "lfs", "unlock", "map.bin", "--force", check=False).returncode != 0

    unlocked = carol.run(theirs, "lfs", "unlock", "map.bin")
    assert "Unlocked map.bin" in unlocked.stdout
    assert "map.bin" not in alice.run(work, "lfs", "locks").stdout
    pushed = alice.run(work, "push", "origin", "main")
    assert "warning" not in pushed.stderr.lower()  # the locks verify answered: no "locking API" warning


def test_an_admin_of_another_tenant_forces_the_unlock_of_a_tenants_lock(
    stack: RunningStack, alice: GitUser, tmp_path: Path
) -> None:
    """The API says an admin may force an unlock, an admin outside the lock's tenant too: naming the tenant
    (``tenant``) the admin lists the tenant's locks and forces the unlock."""
    _, work = new_repo(alice, tmp_path, "stuck", f"{stack.api_url}/lfs/stuck")
    commit_file(alice, work, "map.bin", os.urandom(1000))
    alice.run(work, "push", "origin", "main")
    assert "Locked map.bin" in alice.run(work, "lfs", "lock", "map.bin").stdout
    locks_url = f"{stack.api_url}/lfs/stuck/locks"
    admin, bob = stack.auth("admin"), stack.auth("bob")  # admins only / globex: neither is of acme

    def get(params: dict[str, str], headers: dict[str, str]) -> requests.Response:
        return requests.get(locks_url, params=params, headers={**headers, "Accept": LFS_JSON}, timeout=30)

    def unlock(lock: str, body: dict[str, Any], headers: dict[str, str]) -> requests.Response:
        return requests.post(
            f"{locks_url}/{lock}/unlock", json=body, headers={**headers, "Accept": LFS_JSON}, timeout=30
        )

    assert get({}, admin).json() == {"locks": []}  # the admin's own tenant has no such lock
    listed = get({"tenant": "acme"}, admin).json()["locks"]
    assert [(lock["path"], lock["owner"]["name"]) for lock in listed] == [("map.bin", "alice")]
    lock_id = listed[0]["id"]
    assert get({"tenant": "acme"}, bob).status_code == 403  # only an admin names another tenant
    assert unlock(lock_id, {"force": True, "tenant": "acme"}, bob).status_code == 403
    assert unlock(lock_id, {"force": True}, admin).status_code == 404  # not in the admin's own tenant
    assert unlock(lock_id, {"tenant": "acme"}, admin).status_code == 403  # another user's lock: force only
    assert "map.bin" in alice.run(work, "lfs", "locks").stdout
    forced = unlock(lock_id, {"force": True, "tenant": "acme"}, admin)
    assert forced.status_code == 200 and forced.json()["lock"]["path"] == "map.bin"
    assert "map.bin" not in alice.run(work, "lfs", "locks").stdout
