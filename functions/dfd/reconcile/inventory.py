"""The bucket's S3 Inventory report of the upload prefix: which object versions S3 listed, and when.

S3 writes the report once a day (template.yaml, FilesBucket's InventoryConfigurations: CSV, current versions, the
ETag field) under ``<prefix><YYYY-MM-DDTHH-MMZ>/manifest.json``, whose ``files`` are gzipped CSV files of the
``fileSchema`` columns with URL-encoded keys. The reconcile's lost-copy check reads the newest report instead of a
HeadObject per content (docs/design/reconcile.md, "Lost copies"). A version is held as 8 bytes of a BLAKE2b digest
of its key and ETag (a million objects: ~60 MB rather than ~170 MB of strings); two versions sharing a digest, one
in 2^64, would hide one lost copy for as long as both exist.

Hand-written: the manifest and the CSV are read with the standard library (json, gzip, csv); no library reads
S3 Inventory reports without pulling in Athena or pandas.
"""

from __future__ import annotations

import csv
import gzip
import hashlib
import io
import json
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from urllib.parse import unquote_plus

MANIFEST = "manifest.json"
_REPORT_FOLDER = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}-\d{2}Z")


class InventoryError(ValueError):
    """A report that is not an S3 Inventory CSV report with the Key and ETag columns."""


@dataclass(frozen=True)
class Manifest:
    key: str  # the manifest.json object's key
    created: datetime  # when S3 started the listing (creationTimestamp)
    files: tuple[str, ...]  # the data files' keys
    schema: tuple[str, ...]  # the CSV columns


@dataclass(frozen=True)
class Report:
    manifest: Manifest
    versions: frozenset[int]

    @property
    def created(self) -> datetime:
        return self.manifest.created

    def lists(self, key: str, etag: str | None) -> bool:
        """The report lists this version of the object (any version, when `etag` is None)."""
        return version_digest(key, etag) in self.versions


def version_digest(key: str, etag: str | None) -> int:
    """An object version's 64-bit digest (its ETag without quotes)."""
    data = f"{key}\n{(etag or '').strip(chr(34))}".encode()
    return int.from_bytes(hashlib.blake2b(data, digest_size=8).digest(), "big")


def newest_manifest(prefix: str, keys: Iterable[str]) -> str | None:
    """The newest report's manifest among the listed `keys` under `prefix` (reports are dated folders)."""
    found = [
        key
        for key in keys
        if key.startswith(prefix)
        and key.endswith("/" + MANIFEST)
        and _REPORT_FOLDER.fullmatch(key[len(prefix) : -len(MANIFEST) - 1])
    ]
    return max(found, default=None)


def parse_manifest(key: str, raw: bytes) -> Manifest:
    try:
        body = json.loads(raw)
        if str(body.get("fileFormat", "")).upper() != "CSV":
            raise InventoryError(f"{key}: a {body.get('fileFormat')!r} report, not CSV")
        schema = tuple(column.strip() for column in str(body["fileSchema"]).split(","))
        if "Key" not in schema or "ETag" not in schema:
            raise InventoryError(f"{key}: the report has no Key or ETag column ({', '.join(schema)})")
        created = datetime.fromtimestamp(int(body["creationTimestamp"]) / 1000, tz=UTC)
        files = tuple(str(entry["key"]) for entry in body["files"])
    except (ValueError, KeyError, TypeError) as error:
        if isinstance(error, InventoryError):
            raise
        raise InventoryError(f"{key}: not an S3 Inventory manifest ({error})") from None
    return Manifest(key, created, files, schema)


def versions(manifest: Manifest, data: bytes) -> Iterator[int]:
    """The digests of the object versions one gzipped CSV data file of the report lists."""
    key_at, etag_at = manifest.schema.index("Key"), manifest.schema.index("ETag")
    with gzip.open(io.BytesIO(data), "rt", encoding="utf-8", newline="") as text:
        for row in csv.reader(text):
            if len(row) > max(key_at, etag_at):
                yield version_digest(unquote_plus(row[key_at]), row[etag_at])
