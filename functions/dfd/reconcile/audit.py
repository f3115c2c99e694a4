"""The counters' invariant, recounted from the records: one implementation for the reconcile's audit
(dfd.reconcile.service, page by page) and scripts/audit (all at once).

Every counter shard field but `deleted_uploads` is a sum over the file records plus, for contents the reaper
removed, the history it moved into the shards' `reaped_*` fields (docs/design.md, "Counters")."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from dfd.core.records import FileRecord


@dataclass
class Recount:
    """The counters as the file records say they should be, added up one record at a time."""

    total_files: int = 0
    total_bytes_stored: int = 0
    total_uploads: int = 0
    duplicates_avoided: int = 0  # each generation's first upload stored its bytes: the others are duplicates
    total_s3_size_saved: int = 0

    def add(self, files: Iterable[FileRecord]) -> Recount:
        for file in files:
            self.total_files += 1
            self.total_bytes_stored += file.size
            self.total_uploads += file.upload_count
            self.duplicates_avoided += file.duplicates
            self.total_s3_size_saved += file.saved_bytes
        return self

    def with_reaped(self, reaped: Mapping[str, int]) -> dict[str, int]:
        """The totals once the reaped contents' history (the shards' REAPED_FIELDS) is added back."""
        totals = asdict(self)
        totals["total_uploads"] += reaped.get("reaped_uploads", 0)
        totals["duplicates_avoided"] += reaped.get("reaped_duplicates", 0)
        totals["total_s3_size_saved"] += reaped.get("reaped_saved", 0)
        return totals

    def as_dict(self) -> dict[str, int]:
        return asdict(self)


def proven_drift(before: int, after: int, recount: int) -> int:
    """Counters minus the recount, when proven: the counters were read before and after a recount made while
    writes went on, and only grow meanwhile (the reaper, which shrinks them, is the run itself), so a correct
    recount lies between the two readings; outside them, the drift is the gap to the nearer one (0 inside)."""
    low, high = before - recount, after - recount
    if low > 0:
        return low
    return high if high < 0 else 0
