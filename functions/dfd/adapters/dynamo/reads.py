"""Reads and paging: every record as its codec parses it, the ingest's and the precheck's one consistent read."""

from __future__ import annotations

from collections.abc import Callable, Collection
from typing import Any

from dfd.adapters.dynamo.base import Item, Store, to_attr, to_item
from dfd.core import codec as core_codec
from dfd.core import usage
from dfd.core.ids import key_claim, upload_id_of_event
from dfd.core.records import COUNTER_FIELDS, EventRecord, FileRecord, KeyClaim, TenantRef, TenantUsage, UploadRecord
from dfd.ingest import codec as ingest_codec
from dfd.ingest.ports import IngestState
from dfd.uploads import codec as uploads_codec


def _first(items: list[Item], parse: Callable[[Item], Any]) -> Any:
    return parse(items[0]) if items else None


class Reads(Store):
    def get_file(self, digest: str, *, consistent: bool = False) -> FileRecord | None:
        item = self._get(self._s.files_table, ingest_codec.file_key(digest), consistent=consistent)
        return ingest_codec.file_record(item) if item else None

    def get_upload(self, upload_id: str) -> UploadRecord | None:
        item = self._get(self._s.uploads_table, uploads_codec.upload_key(upload_id), consistent=True)
        return uploads_codec.upload_record(item) if item else None

    def get_event(self, event_key: str) -> EventRecord | None:
        """The event record: the one its upload item carries (an object at an upload key), else its own item."""
        upload_id = upload_id_of_event(self._s.upload_prefix, event_key)
        if upload_id is not None:
            event = ingest_codec.upload_event(self._upload_item(upload_id))
            if event is not None and event.event_key == event_key:
                return event
        found = self._get_many(self._s.events_table, [ingest_codec.event_key(event_key)])
        return ingest_codec.event_record(found[0]) if found else None

    def get_claim(self, bucket: str, key: str) -> KeyClaim | None:
        """The key's claim: the one its upload item carries (a key with an upload id), else its own item."""
        upload_id = self._claim_upload(key)
        if upload_id is not None:
            return ingest_codec.upload_claim(self._upload_item(upload_id))
        found = self._get_many(self._s.events_table, [ingest_codec.event_key(key_claim(bucket, key))])
        return ingest_codec.key_claim(found[0]) if found else None

    def _upload_item(self, upload_id: str) -> Item | None:
        """The upload item, read consistently by the call the ingest's state read makes (BatchGetItem: events and
        claims are read with it on both tables, the one read the ingest is granted there)."""
        found = self._get_many(self._s.uploads_table, [uploads_codec.upload_key(upload_id)])
        return found[0] if found else None

    def ingest_state(
        self, event_key: str, digest: str, upload_id: str | None, tenant_hint: str | None = None
    ) -> IngestState:
        """Everything the ingest decision needs, in ONE consistent BatchGetItem (up to three tables): the event
        record is the one the upload item carries (IngestState), or for an object with no upload its own item."""
        s = self._s
        request: dict[str, Any] = {
            s.files_table: {"Keys": [to_item(ingest_codec.file_key(digest))], "ConsistentRead": True}
        }
        if upload_id is not None:
            request[s.uploads_table] = {"Keys": [to_item(uploads_codec.upload_key(upload_id))], "ConsistentRead": True}
            if tenant_hint is not None:
                ref = to_item(ingest_codec.tenant_ref_key(tenant_hint, digest))
                request[s.tenant_files_table] = {"Keys": [ref], "ConsistentRead": True}
        else:
            request[s.events_table] = {"Keys": [to_item(ingest_codec.event_key(event_key))], "ConsistentRead": True}
        found = self._batch_get(request)
        upload = found.get(s.uploads_table, [])
        carried = ingest_codec.upload_event(upload[0]) if upload else None
        return IngestState(
            carried if carried is not None and carried.event_key == event_key
            else _first(found.get(s.events_table, []), ingest_codec.event_record),
            _first(found[s.files_table], ingest_codec.file_record),
            _first(upload, uploads_codec.upload_record),
            _first(found.get(s.tenant_files_table, []), ingest_codec.tenant_ref),
        )  # fmt: skip

    def tenant_file(
        self, tenant: str, digest: str, *, consistent: bool = True
    ) -> tuple[FileRecord | None, TenantRef | None]:
        """The file record and the tenant's reference to it, in ONE BatchGetItem."""
        s = self._s
        found = self._batch_get(
            {
                s.files_table: {"Keys": [to_item(ingest_codec.file_key(digest))], "ConsistentRead": consistent},
                s.tenant_files_table: {
                    "Keys": [to_item(ingest_codec.tenant_ref_key(tenant, digest))],
                    "ConsistentRead": consistent,
                },
            }
        )
        return _first(found[s.files_table], ingest_codec.file_record), _first(
            found[s.tenant_files_table], ingest_codec.tenant_ref
        )

    def counter_totals(self, *, consistent: bool = False) -> dict[str, int]:
        """Sum of every counter shard: ONE BatchGetItem (shards ≤ 100), never a Scan."""
        keys = [to_item({"counter_id": shard}) for shard in self._s.shard_ids]
        found = self._batch_get({self._s.counters_table: {"Keys": keys, "ConsistentRead": consistent}})
        totals = dict.fromkeys(COUNTER_FIELDS, 0)
        for item in found[self._s.counters_table]:
            shard = core_codec.counter_shard(item)
            for name in COUNTER_FIELDS:
                totals[name] += getattr(shard, name)
        return totals

    def tenant_usage(self, tenant: str, *, consistent: bool = True) -> TenantUsage:
        """The sum of the tenant's usage shards (dfd.core.usage): one Query of its item collection."""
        return usage.total(self._usage_shards(tenant, consistent=consistent).values())

    def scan_files(
        self, limit: int, start_key: dict[str, str] | None
    ) -> tuple[list[FileRecord], dict[str, str] | None]:
        """One page of at most `limit` file records, and where the next page starts (None on the last page).

        DynamoDB returns a LastEvaluatedKey whenever a Scan stops at its Limit, even on the table's last item,
        which would give the last full page a token to an empty page. So one item more is read: the next page
        starts after this page's last item only when that item exists. A page cut short by DynamoDB's 1 MB
        limit keeps DynamoDB's own key."""
        kwargs: dict[str, Any] = {"TableName": self._s.files_table}
        items, last = self._page(
            "Scan", self._db.scan, kwargs, limit, start_key, lambda item: {"hash": str(item["hash"])}
        )
        return [ingest_codec.file_record(item) for item in items], last

    def owner_uploads(
        self, owner: str, limit: int, start_key: dict[str, str] | None
    ) -> tuple[list[UploadRecord], dict[str, str] | None]:
        """A Query of the sparse OwnerIndex (owner, created_at), newest first; one item more than `limit` tells
        whether a next page exists (as scan_files does)."""
        kwargs: dict[str, Any] = {
            "TableName": self._s.uploads_table,
            "IndexName": "OwnerIndex",
            "KeyConditionExpression": "#owner = :owner",
            "ExpressionAttributeNames": {"#owner": "owner"},
            "ExpressionAttributeValues": {":owner": to_attr(owner)},
            "ScanIndexForward": False,
        }

        def position(item: Item) -> dict[str, str]:
            return {"owner": owner, "created_at": str(item["created_at"]), "upload_id": str(item["upload_id"])}

        items, last = self._page("Query", self._db.query, kwargs, limit, start_key, position)
        return [uploads_codec.upload_record(item) for item in items], last

    # ---------------------------------------------------------------- many at once (the reconcile's sweep)
    def get_events(self, event_keys: Collection[str]) -> dict[str, EventRecord]:
        """The event records among `event_keys` that exist (consistent BatchGetItems of 100 keys): those the upload
        items carry first (one read per object at an upload key), then the Events items of the rest."""
        uploads = {key: upload_id_of_event(self._s.upload_prefix, key) for key in event_keys}
        events: dict[str, EventRecord] = {}
        ids = [upload_id for upload_id in uploads.values() if upload_id is not None]
        for item in self._get_many(self._s.uploads_table, [uploads_codec.upload_key(upload_id) for upload_id in ids]):
            event = ingest_codec.upload_event(item)
            if event is not None and uploads.get(event.event_key) is not None:
                events[event.event_key] = event
        rest = [ingest_codec.event_key(key) for key in event_keys if key not in events]
        found = self._get_many(self._s.events_table, rest) if rest else []
        return events | {record.event_key: record for record in map(ingest_codec.event_record, found)}

    def get_uploads(self, upload_ids: Collection[str]) -> dict[str, UploadRecord]:
        found = self._get_many(self._s.uploads_table, [uploads_codec.upload_key(upload_id) for upload_id in upload_ids])
        return {record.upload_id: record for record in map(uploads_codec.upload_record, found)}

    def get_claims(self, bucket: str, keys: Collection[str]) -> dict[str, KeyClaim]:
        """The claims of the object keys among `keys` that hold a stored copy, by key."""
        uploads = {upload_id: key for key in keys if (upload_id := self._claim_upload(key)) is not None}
        found: dict[str, KeyClaim] = {}
        for item in self._get_many(
            self._s.uploads_table, [uploads_codec.upload_key(upload_id) for upload_id in uploads]
        ):
            claim = ingest_codec.upload_claim(item)
            if claim is not None:
                found[uploads[str(item["upload_id"])]] = claim
        claims = {key_claim(bucket, key): key for key in keys if self._claim_upload(key) is None}
        if claims:
            for item in self._get_many(self._s.events_table, [ingest_codec.event_key(claim) for claim in claims]):
                found[claims[str(item["event_key"])]] = ingest_codec.key_claim(item)
        return found

    def _get_many(self, table: str, keys: list[Item]) -> list[Item]:
        unique = list({repr(key): key for key in keys}.values())  # BatchGetItem refuses a key twice
        found: list[Item] = []
        for start in range(0, len(unique), usage.READ_BATCH):
            batch = [to_item(key) for key in unique[start : start + usage.READ_BATCH]]
            found += self._batch_get({table: {"Keys": batch, "ConsistentRead": True}})[table]
        return found
