"""Settings for every function, read once from the environment and validated at init (fail fast).

One place for table, bucket and key names: the template sets the same variables for every function
(Globals), the local stack sets them from the resources it creates.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cache

GIB = 1024**3


class ConfigError(RuntimeError):
    """The environment does not describe a usable deployment: raised at import, never per request."""


@dataclass(frozen=True)
class Settings:
    files_table: str
    counters_table: str
    uploads_table: str
    events_table: str
    bucket: str
    upload_prefix: str = "uploads/"
    counter_shards: int = 16
    pending_shards: int = 4
    max_upload_bytes: int = 5 * GIB
    upload_url_expires: int = 900
    download_url_expires: int = 300
    upload_ttl_days: int = 7
    event_ttl_days: int = 30
    reconcile_grace_seconds: int = 900
    token_secret: str = field(default="", repr=False)
    # ranged parallel reads above 16 MiB: 8 connections x 6 MiB parts = 48 MiB in flight at most
    # (docs/performance.md: target 2's 64 MiB bound and target 4's speedup)
    parallel_threshold: int = 16 * 1024**2
    parallel_part_size: int = 6 * 1024**2
    parallel_workers: int = 8

    def __post_init__(self) -> None:
        for name in ("files_table", "counters_table", "uploads_table", "events_table", "bucket"):
            if not getattr(self, name):
                raise ConfigError(f"{name} must not be empty")
        if not self.upload_prefix.endswith("/") or self.upload_prefix.startswith("/"):
            raise ConfigError("UPLOAD_PREFIX must end with '/' and not start with '/'")
        checks = {
            "COUNTER_SHARDS": (
                self.counter_shards,
                1,
                100,
            ),  # stats reads them in ONE BatchGetItem (<=100 keys)
            "PENDING_SHARDS": (self.pending_shards, 1, 64),
            "MAX_UPLOAD_BYTES": (self.max_upload_bytes, 1, 5 * 1024**4),
            "UPLOAD_URL_EXPIRES": (self.upload_url_expires, 60, 7 * 24 * 3600),
            "DOWNLOAD_URL_EXPIRES": (self.download_url_expires, 10, 7 * 24 * 3600),
            "UPLOAD_TTL_DAYS": (self.upload_ttl_days, 1, 3650),
            "EVENT_TTL_DAYS": (self.event_ttl_days, 1, 3650),
            "RECONCILE_GRACE_SECONDS": (self.reconcile_grace_seconds, 0, 7 * 24 * 3600),
            "PARALLEL_THRESHOLD_BYTES": (self.parallel_threshold, 1, 5 * 1024**4),
            "PARALLEL_PART_BYTES": (self.parallel_part_size, 1024 * 1024, 1024**3),
            "PARALLEL_WORKERS": (self.parallel_workers, 1, 64),
        }
        for name, (value, low, high) in checks.items():
            if not low <= value <= high:
                raise ConfigError(f"{name}={value} is outside {low}..{high}")

    @property
    def shard_ids(self) -> list[str]:
        return [counter_id(i) for i in range(self.counter_shards)]

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> Settings:
        env = os.environ if env is None else env

        def required(name: str) -> str:
            value = env.get(name, "").strip()
            if not value:
                raise ConfigError(f"environment variable {name} is required")
            return value

        def integer(name: str, default: int) -> int:
            raw = env.get(name, "").strip()
            if not raw:
                return default
            try:
                return int(raw)
            except ValueError:
                raise ConfigError(f"environment variable {name}={raw!r} is not an integer") from None

        defaults = cls.__dataclass_fields__
        return cls(
            files_table=required("DDB_TABLE"),
            counters_table=required("DDB_COUNTERS_TABLE"),
            uploads_table=required("UPLOADS_TABLE"),
            events_table=required("EVENTS_TABLE"),
            bucket=required("S3_BUCKET"),
            upload_prefix=env.get("UPLOAD_PREFIX", "").strip() or "uploads/",
            counter_shards=integer("COUNTER_SHARDS", defaults["counter_shards"].default),  # type: ignore[arg-type]
            pending_shards=integer("PENDING_SHARDS", defaults["pending_shards"].default),  # type: ignore[arg-type]
            max_upload_bytes=integer("MAX_UPLOAD_BYTES", 5 * GIB),
            upload_url_expires=integer("UPLOAD_URL_EXPIRES", 900),
            download_url_expires=integer("DOWNLOAD_URL_EXPIRES", 300),
            upload_ttl_days=integer("UPLOAD_TTL_DAYS", 7),
            event_ttl_days=integer("EVENT_TTL_DAYS", 30),
            reconcile_grace_seconds=integer("RECONCILE_GRACE_SECONDS", 900),
            token_secret=env.get("TOKEN_SECRET", ""),
            parallel_threshold=integer("PARALLEL_THRESHOLD_BYTES", defaults["parallel_threshold"].default),  # type: ignore[arg-type]
            parallel_part_size=integer("PARALLEL_PART_BYTES", defaults["parallel_part_size"].default),  # type: ignore[arg-type]
            parallel_workers=integer("PARALLEL_WORKERS", defaults["parallel_workers"].default),  # type: ignore[arg-type]
        )


def counter_id(index: int) -> str:
    return f"shard#{index:03d}"


@cache
def settings() -> Settings:
    """The process-wide settings (handlers call this at import so a bad deployment fails at init)."""
    return Settings.from_env()
