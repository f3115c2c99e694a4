"""The deterministic simulation (tests/sim, docs/design/simulation.md) in CI: episodes from a seed derived from the
commit (git HEAD), for a bounded budget (SIM_BUDGET seconds, default 75); a failure names its seed and its shrunk
trace (`make sim SEED=...` replays it). Then: the run is deterministic; the checks fail on a planted bug; and the
named regressions of what the simulation found, each a shrunk trace replayed."""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path

import pytest

from dfd.events import outcomes
from tests.sim.runner import Episode, Failure, explore, report

ROOT = Path(__file__).resolve().parents[2]


def commit_seed() -> int:
    """A seed that changes with every commit (its hash), fixed for one."""
    try:
        head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True, check=True)
        return int(head.stdout.strip()[:8], 16)
    except (OSError, subprocess.CalledProcessError, ValueError):
        return 4242


def test_the_simulation_of_this_commit_holds_every_invariant() -> None:
    budget = float(os.environ.get("SIM_BUDGET", "75"))
    first = commit_seed()
    started = time.monotonic()
    coverage, failure = explore(iter(range(first, first + 10**6)), deadline=started + budget)
    summary = coverage.summary() | {"first_seed": first, "seconds": round(time.monotonic() - started, 1)}
    print(json.dumps(summary, indent=1))  # pytest -s shows what the run reached
    assert failure is None, report(failure)
    assert coverage.episodes >= 1 and coverage.races and coverage.reached


def fingerprint(episode: Episode) -> tuple[object, ...]:
    world = episode.world
    return (
        episode.trace,
        sorted(world.repo.uploads),
        sorted(world.repo.files),
        [event.event_id for event in world.events],
        sorted(world.reached),
    )


def test_one_seed_is_one_run() -> None:
    first, second = Episode(7, steps=120), Episode(7, steps=120)
    assert first.run() is None and second.run() is None
    assert fingerprint(first) == fingerprint(second)
    script = Episode(7, script=first.trace)  # its trace, replayed as a script: the same run again
    assert script.run() is None and fingerprint(script) == fingerprint(first)


def steps(label: str, count: int) -> list[tuple[object, ...]]:
    return [("step", label, None)] * count


# alice's multipart upload of content 1 (80 bytes: parts of 64 and 16), completed; its notification delivered
MULTIPART_COMPLETED = [("multipart", "o0", 0, 1, 0), *steps("o0", 30), ("deliver", "d1", "o0.n1"), *steps("d1", 20)]


def test_a_multipart_upload_completes_and_is_stored() -> None:
    episode = Episode(15, script=MULTIPART_COMPLETED)
    assert episode.run() is None
    world = episode.world
    (upload,) = world.repo.uploads.values()
    assert upload["via"] == "multipart" and upload["status"] == "stored" and upload["part_count"] == 2
    assert world.issued[0].acked and episode.ops["o0"].result == "completed pending"
    assert not world.objects.multiparts  # S3 assembled it: no multipart upload left


@pytest.mark.parametrize("calls", range(1, 14))
def test_a_delete_racing_a_multipart_completion_leaves_nothing_stored(calls: int) -> None:
    """alice's DELETE after `calls` port calls of her multipart upload (its parts' presigns and PUTs, the complete,
    S3's assembly, the record's mark): the upload ends deleted, no content stored, no object or S3 upload left."""
    race = [("multipart", "o0", 0, 1, 0), *steps("o0", calls), ("delete", "o1", 0, 0), *steps("o1", 10)]
    episode = Episode(15, script=[*race, *MULTIPART_COMPLETED[1:]])
    assert episode.run() is None
    world = episode.world
    assert [u["status"] for u in world.repo.uploads.values()] == ["deleted"]
    assert not world.repo.files and not world.objects.objects and not world.objects.multiparts


# an upload stored, deleted, reaped; the same content uploaded again and stored anew (a new record, generation 1)
REAP_AND_STORE_AGAIN = [
    ("upload", "o0", 0, 0, False),
    *steps("o0", 6),
    ("deliver", "d1", "o0.n1"),
    *steps("d1", 12),
    ("delete", "o2", 0, 0),
    *steps("o2", 6),
    ("tick", 7200),
    ("reconcile", "o3"),
    *steps("o3", 80),
    ("upload", "o4", 0, 0, False),
    *steps("o4", 6),
    ("deliver", "d5", "o4.n1"),
    *steps("d5", 12),
]


def test_the_checks_catch_a_planted_bug(monkeypatch: pytest.MonkeyPatch) -> None:
    """Event ids derived without the record's incarnation: the reaped content's second File Stored repeats the
    first's id, and the simulation says so."""
    assert Episode(11, script=REAP_AND_STORE_AGAIN).run() is None
    monkeypatch.setattr(outcomes, "_incarnation", lambda _marker: ())
    failure = Episode(11, script=REAP_AND_STORE_AGAIN).run()
    assert isinstance(failure, Failure) and failure.check == "event ids: unique", failure


# Regressions: what the simulation found, each shrunk to the decisions that show it (docs/design/simulation.md).

# Two deliveries of one drop-zone object register its upload (one id, derived from the object's version): the
# second's registration is refused and it reads the first's record. The fake refuses as the adapter does
# (CommitRefused), never asserts, so the drop zone's retry is exercised.
TWO_DELIVERIES_OF_ONE_DROP = [
    ("drop", "o0", 2, 2),
    ("step", "o0", None),
    ("deliver", "d1", "o0.n1"),
    ("deliver", "d2", "o0.n1"),
    *[entry for _ in range(8) for entry in (("step", "d1", None), ("step", "d2", None))],
]


def test_regression_two_deliveries_of_one_drop_zone_object_register_one_upload() -> None:
    episode = Episode(12, script=[("drop", "o0", 2, 2), ("step", "o0", None)])
    assert episode.run() is None
    # the object's notification, delivered twice at once (S3 sends it at least once)
    script = [*TWO_DELIVERIES_OF_ONE_DROP[:2], ("deliver", "d1", "o0.n1"), ("deliver", "d2", "o0.n1d")]
    script += TWO_DELIVERIES_OF_ONE_DROP[4:]
    episode = Episode(12, script=script)
    episode.world.rng.random = lambda: 0.0  # type: ignore[method-assign]  # every notification sent twice
    assert episode.run() is None, "two deliveries of one drop-zone object"
    drops = [u for u in episode.world.repo.uploads.values() if u.get("via") == "s3"]
    assert len(drops) == 1 and drops[0]["status"] == "stored"


def test_regression_a_content_reaped_and_stored_again_is_audited_from_its_new_record() -> None:
    """scripts/audit recounts a content's upload_count from the processed uploads of its hash since its record's
    creation, not the earlier (reaped) record's: after a reap and a new store, upload_count 1 recounts as 1."""
    episode = Episode(13, script=REAP_AND_STORE_AGAIN)
    assert episode.run() is None
    (file,) = episode.world.repo.files.values()
    assert file["upload_count"] == 1 and file["generation"] == 1
    kinds = [event.detail_type.value for event in episode.world.events if event.upload_id is None]
    assert kinds == ["File Stored", "File Removed", "File Stored"]


def _reconcile(label: str) -> list[tuple[object, ...]]:
    return [("tick", 400), ("reconcile", label, False), *steps(label, 120)]


# acme's upload whose notification waits in the queue: the reconcile re-drives it 3 times, then fails it (its
# quota bytes released); acme registers 3 uploads in that room; the first upload's message is delivered at last
FAILED_THEN_INGESTED = [
    ("upload", "o0", 0, 4, False),
    *steps("o0", 6),
    *_reconcile("r1"),
    *_reconcile("r2"),
    *_reconcile("r3"),
    *_reconcile("r4"),
    *[entry for n in (1, 2, 3) for entry in (("upload", f"o1{n}", 0, 4, False), *steps(f"o1{n}", 6))],
    ("deliver", "d1", "o0.n1"),
    *steps("d1", 12),
]


def test_regression_an_upload_failed_then_ingested_keeps_its_tenant_within_its_quota() -> None:
    episode = Episode(14, script=FAILED_THEN_INGESTED)
    failure = episode.run()
    assert failure is None, failure.message  # acme: 3 x 230 pending + 230 stored would be > 700
    first = episode.world.repo.uploads[episode.world.issued[0].upload_id]
    assert first.get("failed_at") and not first.get("processed_at")  # failed; its late object refused, not stored


@pytest.mark.xfail(
    strict=True,
    reason="open: seed 3302949462 (make sim SEED=3302949462) settles with an object at an upload key that was never "
    "ingested (check 4); not yet diagnosed. Strict: the test fails once the cause is fixed, to be made a regression.",
)
def test_open_seed_3302949462_settles_with_every_upload_key_ingested() -> None:
    assert Episode(3302949462).run() is None


def test_regression_a_completion_naming_a_part_s3_lacks_is_refused_not_a_500() -> None:
    """Seed 1140330726: a multipart completion named a part the fake S3 did not hold, and the fake raised KeyError
    where S3 answers InvalidPart (the adapter's PartsRejected)."""
    assert Episode(1140330726).run() is None
