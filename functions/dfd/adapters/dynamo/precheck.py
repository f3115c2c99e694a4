"""The precheck's duplicate (dfd.uploads.service): an upload answered 409 before any byte is sent, recorded in ONE
transaction with the content's and the tenant reference's counts, one counter shard and, when bounded, the
tenant's precheck bound."""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING

from dfd.adapters import limits
from dfd.adapters.dynamo.base import Plan
from dfd.adapters.dynamo.references import References
from dfd.core import clock
from dfd.core.conflicts import FileVanished, PrecheckLimited, TenantRefChanged
from dfd.ingest.ports import TenantShare
from dfd.uploads import codec as uploads_codec

if TYPE_CHECKING:
    from dfd.uploads.ports import PrecheckDuplicate


class Precheck(References):
    def commit_precheck_duplicate(self, upload: PrecheckDuplicate, *, counter_shard: int, now: datetime) -> None:
        stamp = clock.iso(now)
        plan = Plan(identity="upload")
        plan.add(
            "upload",
            self._put_new(self._s.uploads_table, uploads_codec.precheck_upload_item(upload, stamp), "upload_id"),
        )
        plan.add("file", self._count_duplicate_file_item(upload.hash, None, stamp), FileVanished)
        # the reference exists (the tenant holds the content): +1 upload and last_upload_at, nothing else
        held = TenantShare(upload.tenant, held=True, counted=True)
        plan.add("tenant", self._tenant_ref_item(held, upload.hash, {}, stamp), TenantRefChanged)
        deltas = {"total_uploads": 1, "duplicates_avoided": 1, "total_s3_size_saved": upload.size}
        plan.add("counters", self._add_counters_item(counter_shard, deltas))
        if upload.bound is not None:  # counted against the tenant's precheck bound (dfd.adapters.limits)
            plan.add(
                "bound",
                limits.precheck_bound_update(self._s.counters_table, upload.tenant, upload.bound),
                PrecheckLimited,
            )
        self._run(plan)
