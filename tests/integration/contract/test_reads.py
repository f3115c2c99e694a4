"""The shared reads' contract (dfd.core.reads, dfd.queries.ports; dfd.adapters.dynamo.reads): reads and pages."""

from __future__ import annotations

import dataclasses

from dfd.ingest.ports import TenantShare
from tests.integration.contract.support import (
    DIGEST,
    OTHER,
    Repository,
    commit,
    registered,
    version,
)


def test_reads_and_pages(repo: Repository) -> None:
    for n, digest in enumerate((OTHER, DIGEST, "c" * 64), start=1):
        _, v = registered(repo, n)
        commit(repo, "stored", dataclasses.replace(v, hash=digest), TenantShare("acme", False, False, 100))
    state = repo.ingest_state(version(1, upload_id=f"{1:032x}").event_key, OTHER, f"{1:032x}", "acme")
    assert state.event is not None and state.file is not None and state.upload is not None
    assert state.tenant_ref is not None and state.tenant_ref.hash == OTHER
    bare = repo.ingest_state("ev#none", "d" * 64, None, "acme")
    assert (bare.event, bare.file, bare.upload, bare.tenant_ref) == (None, None, None, None)
    seen: list[str] = []
    start: dict[str, str] | None = None
    for _ in range(3):
        page, start = repo.scan_files(2, start)
        seen += [f.hash for f in page]
        if start is None:
            break
    assert sorted(seen) == [DIGEST, OTHER, "c" * 64] and start is None
    mine, start = repo.owner_uploads("alice", 2, None)
    assert len(mine) == 2 and start is not None
    rest, start = repo.owner_uploads("alice", 2, start)
    assert len(rest) == 1 and start is None
    assert {u.upload_id for u in mine + rest} == {f"{n:032x}" for n in (1, 2, 3)}
