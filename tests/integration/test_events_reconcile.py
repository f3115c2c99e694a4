"""Events out for what the reconcile workflow and its reaper write (ReconcileFunction, through the repository):
the tables' streams carry their changes like any other, so an expired upload, a failed one and a reaped content
are published once, and a run (or a re-drive) that changes no outcome publishes nothing."""

from __future__ import annotations

from dfdlocal.template import TEMPLATE, load_template
from tests.integration.outbox import Outbox, kinds
from tests.integration.support import Local, delete, later


def test_expired_uploads_and_reaped_contents_are_published_once(local: Local) -> None:
    outbox = Outbox(local.model, local.emulator.client)
    answer = local.upload(b"reaped, then published\n" * 40)
    local.deliver()
    assert delete(answer["upload_id"])[0] == 204
    abandoned = local.register(b"never uploaded")
    assert kinds(outbox.publish()) == {"Upload Stored": 1, "File Stored": 1, "Upload Deleted": 1}

    summary = local.run(now=later(hours=2))  # past the URL's expiry and the delete's grace period
    assert summary["expired"] == 1, summary
    assert local.upload_item(abandoned["upload_id"])["status"] == "expired"
    assert kinds(outbox.publish()) == {"Upload Expired": 1, "File Removed": 1}
    local.assert_invariants()

    local.run(now=later(hours=3))  # nothing left to do: nothing published
    assert outbox.publish() == []


def test_an_upload_the_reconcile_gives_up_on_is_published_failed_once(local: Local) -> None:
    outbox = Outbox(local.model, local.emulator.client)
    max_redrives = int(load_template(TEMPLATE)["Parameters"]["ReconcileMaxRedrives"]["Default"])
    answer = local.upload(b"never ingested\n" * 50, "poison.bin")
    local.drain()  # the notification is lost, and every re-drive dead-lettered
    for attempt in range(1, max_redrives + 1):
        assert local.run(now=later(hours=attempt))["redriven"] == 1
        local.drain()
    assert outbox.publish() == []  # re-drives change no outcome
    assert local.run(now=later(hours=max_redrives + 1))["failed"] == 1
    events = outbox.publish()
    assert kinds(events) == {"Upload Failed": 1}
    assert events[0]["detail"]["upload_id"] == answer["upload_id"]
    assert events[0]["detail"]["occurred_at"] == local.upload_item(answer["upload_id"])["failed_at"]
