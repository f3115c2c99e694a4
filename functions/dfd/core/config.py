"""Settings for every function, read once from the environment and validated at init (fail fast).

One place for table, bucket and key names: the template sets the same variables for every function
(Globals), the local stack sets them from the resources it creates. Each tunable setting is written once, as
a field of :class:`Settings`: its default, its environment variable and its allowed range (field metadata);
:meth:`Settings.from_env` reads every such field generically.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from functools import cache
from typing import Any

GIB = 1024**3
MIB = 1024**2
TIB = 1024**4
# S3 multipart limits: parts of 5 MiB..5 GiB (the last may be smaller), at most 10,000 parts, so objects up to
# 10,000 x 5 GiB (48.8 TiB); one PUT carries at most 5 GiB
S3_MIN_PART = 5 * MIB
S3_MAX_PUT = 5 * GIB
S3_MAX_OBJECT = 10_000 * S3_MAX_PUT

# ranged parallel reads above 16 MiB: 8 connections x 6 MiB parts = 48 MiB in flight at most
# (docs/performance.md: target 2's 64 MiB bound and target 4's speedup); dfd.adapters.s3.ReadTuning's defaults
PARALLEL_THRESHOLD = 16 * MIB
PARALLEL_PART_SIZE = 6 * MIB
PARALLEL_WORKERS = 8

_ORIGIN = re.compile(r"https?://[A-Za-z0-9.-]+(:[0-9]{1,5})?")


class ConfigError(RuntimeError):
    """The environment does not describe a usable deployment: raised at import, never per request."""


def _integer(env: str, default: int, low: int, high: int) -> Any:
    """An integer setting read from `env`, `default` when unset, valid from `low` to `high`."""
    return field(default=default, metadata={"env": env, "range": (low, high)})


def required_env(name: str, env: Mapping[str, str] | None = None) -> str:
    """A variable the deployment must set (ConfigError when it is missing or blank)."""
    value = (os.environ if env is None else env).get(name, "").strip()
    if not value:
        raise ConfigError(f"environment variable {name} is required")
    return value


@dataclass(frozen=True)
class Settings:
    files_table: str
    counters_table: str
    uploads_table: str
    events_table: str
    tenant_files_table: str  # the tenant view: one reference per (tenant, content)
    bucket: str
    upload_prefix: str = "uploads/"
    # the counters' history (dfd.history; "": not configured, only the functions that read or write it have it)
    history_table: str = ""
    # where S3 Inventory writes the daily reports of the upload prefix (the reconcile's lost-copy check reads the
    # newest; "": none, a HeadObject per content)
    inventory_prefix: str = ""
    # stats reads the counter shards in ONE BatchGetItem (<= 100 keys)
    counter_shards: int = _integer("COUNTER_SHARDS", 16, 1, 100)
    pending_shards: int = _integer("PENDING_SHARDS", 4, 1, 64)
    # the largest accepted upload: S3's largest object unless lowered (docs/performance.md, "The largest object")
    max_upload_bytes: int = _integer("MAX_UPLOAD_BYTES", S3_MAX_OBJECT, 1, S3_MAX_OBJECT)
    upload_url_expires: int = _integer("UPLOAD_URL_EXPIRES", 900, 60, 7 * 24 * 3600)
    download_url_expires: int = _integer("DOWNLOAD_URL_EXPIRES", 300, 10, 7 * 24 * 3600)
    upload_ttl_days: int = _integer("UPLOAD_TTL_DAYS", 7, 1, 3650)
    event_ttl_days: int = _integer("EVENT_TTL_DAYS", 30, 1, 3650)
    reconcile_grace_seconds: int = _integer("RECONCILE_GRACE_SECONDS", 900, 0, 7 * 24 * 3600)
    # re-drives of a pending upload whose object exists before the reconcile marks it failed
    reconcile_max_redrives: int = _integer("RECONCILE_MAX_REDRIVES", 3, 1, 100)
    # a tombstoned content's bytes are reaped this long after its last reference was deleted
    delete_grace_seconds: int = _integer("DELETE_GRACE_SECONDS", 3600, 0, 30 * 24 * 3600)
    parallel_threshold: int = _integer("PARALLEL_THRESHOLD_BYTES", PARALLEL_THRESHOLD, 1, 5 * 1024**4)
    parallel_part_size: int = _integer("PARALLEL_PART_BYTES", PARALLEL_PART_SIZE, MIB, GIB)
    parallel_workers: int = _integer("PARALLEL_WORKERS", PARALLEL_WORKERS, 1, 64)
    # per-tenant quotas (0 = unlimited): bytes of pending + stored uploads, pending uploads at once
    tenant_quota_bytes: int = _integer("TENANT_QUOTA_BYTES", 0, 0, 2**53)
    tenant_pending_limit: int = _integer("TENANT_PENDING_LIMIT", 0, 0, 10**9)
    # precheck duplicates (409s) a tenant gets per window (0 = unbounded): docs/design.md, "Prechecks bounded"
    precheck_limit: int = _integer("PRECHECK_LIMIT", 1000, 0, 10**9)
    precheck_window_seconds: int = _integer("PRECHECK_WINDOW_SECONDS", 3600, 1, 7 * 24 * 3600)
    # multipart uploads (dfd.uploads.multipart): from this size on (or when asked), parts of at least this many bytes;
    # a size above 5 GiB (S3's largest PUT) is always multipart; the upload expires (and is aborted) after
    # MULTIPART_EXPIRES seconds
    multipart_threshold: int = _integer("MULTIPART_THRESHOLD_BYTES", 64 * MIB, S3_MIN_PART, S3_MAX_PUT)
    multipart_min_part: int = _integer("MULTIPART_MIN_PART_BYTES", 8 * MIB, S3_MIN_PART, S3_MAX_PUT)
    multipart_expires: int = _integer("MULTIPART_EXPIRES", 24 * 3600, 900, 7 * 24 * 3600)
    # browser origins the HTTP API answers CORS for: "*" alone, or http(s)://host[:port] origins
    allowed_origins: tuple[str, ...] = ("*",)

    def __post_init__(self) -> None:
        for name in ("files_table", "counters_table", "uploads_table", "events_table", "tenant_files_table", "bucket"):
            if not getattr(self, name):
                raise ConfigError(f"{name} must not be empty")
        if not self.upload_prefix.endswith("/") or self.upload_prefix.startswith("/"):
            raise ConfigError("UPLOAD_PREFIX must end with '/' and not start with '/'")
        if self.inventory_prefix and (
            not self.inventory_prefix.endswith("/")
            or self.inventory_prefix.startswith("/")
            or self.inventory_prefix.startswith(self.upload_prefix)
        ):
            raise ConfigError("INVENTORY_PREFIX must end with '/', not start with '/' and lie outside UPLOAD_PREFIX")
        for spec in fields(self):
            if "range" in spec.metadata:
                value, (low, high) = getattr(self, spec.name), spec.metadata["range"]
                if not low <= value <= high:
                    raise ConfigError(f"{spec.metadata['env']}={value} is outside {low}..{high}")
        origins = self.allowed_origins
        if origins != ("*",) and (not origins or not all(_ORIGIN.fullmatch(origin) for origin in origins)):
            raise ConfigError(
                f"ALLOWED_ORIGINS={','.join(origins)!r}: '*' alone, or comma-separated http(s)://host[:port] origins"
            )

    @property
    def shard_ids(self) -> list[str]:
        return [counter_id(i) for i in range(self.counter_shards)]

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> Settings:
        env = os.environ if env is None else env

        values: dict[str, Any] = {
            "files_table": required_env("DDB_TABLE", env),
            "counters_table": required_env("DDB_COUNTERS_TABLE", env),
            "uploads_table": required_env("UPLOADS_TABLE", env),
            "events_table": required_env("EVENTS_TABLE", env),
            "tenant_files_table": required_env("TENANT_FILES_TABLE", env),
            "bucket": required_env("S3_BUCKET", env),
        }
        if prefix := env.get("UPLOAD_PREFIX", "").strip():
            values["upload_prefix"] = prefix
        if history := env.get("STATS_HISTORY_TABLE", "").strip():
            values["history_table"] = history
        if inventory := env.get("INVENTORY_PREFIX", "").strip():
            values["inventory_prefix"] = inventory
        if origins := [origin.strip() for origin in env.get("ALLOWED_ORIGINS", "").split(",") if origin.strip()]:
            values["allowed_origins"] = tuple(origins)
        for spec in fields(cls):
            name = spec.metadata.get("env")
            raw = env.get(name, "").strip() if name else ""
            if raw:
                try:
                    values[spec.name] = int(raw)
                except ValueError:
                    raise ConfigError(f"environment variable {name}={raw!r} is not an integer") from None
        return cls(**values)


def counter_id(index: int) -> str:
    return f"shard#{index:03d}"


@cache
def settings() -> Settings:
    """The process-wide settings (handlers call this at import so a bad deployment fails at init)."""
    return Settings.from_env()
