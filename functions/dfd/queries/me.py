"""GET /me: who the caller is, its tenant, and the tenant's quota usage and limits."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from dfd.core.config import Settings
    from dfd.core.reads import UsageReads
    from dfd.identity.caller import Caller


def me(caller: Caller, repo: UsageReads, settings: Settings) -> dict[str, Any]:
    """The caller as the API sees it. Limits of 0 mean unlimited (TenantQuotaBytes, TenantPendingLimit)."""
    return {
        "owner": caller.owner,
        "username": caller.username,
        "tenant": caller.tenant,
        "is_admin": caller.is_admin,
        "usage": repo.tenant_usage(caller.tenant, consistent=False).as_dict(),  # shown only: half the read units
        "limits": {"bytes": settings.tenant_quota_bytes, "pending": settings.tenant_pending_limit},
    }
