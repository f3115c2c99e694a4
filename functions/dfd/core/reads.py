"""The reads several features share, one narrow port each: a service's own port (its package's `ports`) names
the ones it uses. :class:`dfd.adapters.dynamo.Repository` implements them all."""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from dfd.core.records import FileRecord, TenantRef, TenantUsage, UploadRecord


class FileReads(Protocol):
    """A content's file record."""

    def get_file(self, digest: str, *, consistent: bool = False) -> FileRecord | None: ...


class TenantFileReads(Protocol):
    """A tenant's hold on a content."""

    def tenant_file(
        self, tenant: str, digest: str, *, consistent: bool = True
    ) -> tuple[FileRecord | None, TenantRef | None]:
        """The file record for the content and the tenant's reference to it (each None when absent), in ONE
        read, consistent unless not `consistent` (half the read units; a write of the last second possibly not in
        it yet)."""
        ...


class UploadReads(Protocol):
    """An upload's record."""

    def get_upload(self, upload_id: str) -> UploadRecord | None: ...


class UsageReads(Protocol):
    """A tenant's quota usage."""

    def tenant_usage(self, tenant: str, *, consistent: bool = True) -> TenantUsage:
        """The tenant's quota usage (zeros when it has none yet), read consistently unless not `consistent` (what
        only shows it: half the read units, a write of the last second possibly not in it yet)."""
        ...


class StatsReads(Protocol):
    """The counters and the file table, whole."""

    def counter_totals(self, *, consistent: bool = False) -> dict[str, int]:
        """The sum of every counter shard, one entry per dfd.core.records.COUNTER_FIELDS name."""
        ...

    def scan_files(
        self, limit: int, start_key: dict[str, str] | None
    ) -> tuple[list[FileRecord], dict[str, str] | None]: ...
