"""The read side's port: what the queries read through the repository (dfd.adapters.dynamo.reads)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

from dfd.core.reads import FileReads, StatsReads, TenantFileReads, UploadReads

if TYPE_CHECKING:
    from dfd.core.records import UploadRecord


class QueryStore(FileReads, TenantFileReads, UploadReads, StatsReads, Protocol):
    """What dfd.queries.service reads."""

    def owner_uploads(
        self, owner: str, limit: int, start_key: dict[str, str] | None
    ) -> tuple[list[UploadRecord], dict[str, str] | None]:
        """One page of the owner's uploads, newest first, and where the next page starts (owner, created_at,
        upload_id; None on the last page)."""
        ...
