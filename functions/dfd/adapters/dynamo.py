"""DynamoDB adapter: the only module that knows item layouts and turns ClientError into domain errors."""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from boto3.dynamodb.types import TypeDeserializer, TypeSerializer
from botocore.exceptions import BotoCoreError, ClientError

from dfd.config import Settings
from dfd.errors import DfdError, ServiceUnavailable, TransactionRetryable

_serializer = TypeSerializer()
_deserializer = TypeDeserializer()

Item = dict[str, Any]

_RETRYABLE_CODES = {
    "ProvisionedThroughputExceededException",
    "ThrottlingException",
    "RequestLimitExceeded",
    "InternalServerError",
    "ServiceUnavailable",
    "TransactionInProgressException",
}
_RETRYABLE_REASONS = {
    "TransactionConflict",
    "ThrottlingError",
    "ProvisionedThroughputExceeded",
    "InternalError",
}


def to_attr(value: Any) -> dict[str, Any]:
    attr: dict[str, Any] = dict(_serializer.serialize(value))
    return attr


def to_item(values: Mapping[str, Any]) -> dict[str, Any]:
    return {k: to_attr(v) for k, v in values.items() if v is not None}


def from_item(raw: Mapping[str, Any]) -> Item:
    out: Item = {}
    for key, attr in raw.items():
        value = _deserializer.deserialize(attr)
        if isinstance(value, Decimal):
            value = int(value) if value == value.to_integral_value() else float(value)
        out[key] = value
    return out


class CancelledTransaction(DfdError):
    """A TransactWriteItems was cancelled by failed conditions; `reasons[i]` speaks of item i."""

    status = 409
    code = "transaction_cancelled"

    def __init__(self, reasons: Sequence[tuple[str, Item | None]]) -> None:
        super().__init__("transaction cancelled: " + ", ".join(code for code, _ in reasons))
        self.reasons = list(reasons)

    def failed(self, index: int) -> bool:
        return index < len(self.reasons) and self.reasons[index][0] == "ConditionalCheckFailed"

    def item(self, index: int) -> Item | None:
        return self.reasons[index][1] if index < len(self.reasons) else None


def translate(error: ClientError | BotoCoreError, action: str) -> DfdError:
    """ClientError → domain error (the one place this mapping lives)."""
    if isinstance(error, BotoCoreError):
        return ServiceUnavailable(f"DynamoDB {action} failed: {error}")
    code = error.response.get("Error", {}).get("Code", "")
    if code == "TransactionCanceledException":
        reasons: list[tuple[str, Item | None]] = []
        for reason in error.response.get("CancellationReasons", []) or []:
            raw = reason.get("Item")
            reasons.append((reason.get("Code", "None") or "None", from_item(raw) if raw else None))
        if any(code in _RETRYABLE_REASONS for code, _ in reasons):
            return TransactionRetryable(f"DynamoDB {action} cancelled: {[c for c, _ in reasons]}")
        return CancelledTransaction(reasons)
    if code in _RETRYABLE_CODES:
        return ServiceUnavailable(f"DynamoDB {action} is throttled or unavailable ({code})")
    return DfdError(f"DynamoDB {action} failed ({code})", code="storage_error")


@dataclass(frozen=True)
class IngestState:
    event: Item | None
    file: Item | None
    upload: Item | None


class Repository:
    """Reads and writes of the four tables. Receives its client; knows table and attribute names."""

    def __init__(self, client: Any, settings: Settings) -> None:
        self._db = client
        self._s = settings

    # ---------------------------------------------------------------- reads
    def _get(self, table: str, key: Item, *, consistent: bool = False) -> Item | None:
        try:
            response = self._db.get_item(TableName=table, Key=to_item(key), ConsistentRead=consistent)
        except (ClientError, BotoCoreError) as error:
            raise translate(error, "GetItem") from error
        raw = response.get("Item")
        return from_item(raw) if raw else None

    def get_file(self, digest: str, *, consistent: bool = False) -> Item | None:
        return self._get(self._s.files_table, {"hash": digest}, consistent=consistent)

    def get_upload(self, upload_id: str) -> Item | None:
        return self._get(self._s.uploads_table, {"upload_id": upload_id}, consistent=True)

    def get_event(self, event_key: str) -> Item | None:
        return self._get(self._s.events_table, {"event_key": event_key}, consistent=True)

    def _batch_get(self, request: dict[str, Any]) -> dict[str, list[Item]]:
        """BatchGetItem with UnprocessedKeys retried (bounded, with backoff)."""
        found: dict[str, list[Item]] = {table: [] for table in request}
        pending = request
        for attempt in range(8):
            try:
                response = self._db.batch_get_item(RequestItems=pending)
            except (ClientError, BotoCoreError) as error:
                raise translate(error, "BatchGetItem") from error
            for table, items in response.get("Responses", {}).items():
                found[table].extend(from_item(item) for item in items)
            pending = response.get("UnprocessedKeys") or {}
            if not pending:
                return found
            time.sleep(min(0.05 * 2**attempt, 1.0))
        raise ServiceUnavailable("DynamoDB BatchGetItem left keys unprocessed after retries")

    def ingest_state(self, event_key: str, digest: str, upload_id: str | None) -> IngestState:
        """Everything the ingest decision needs, in ONE consistent BatchGetItem."""
        s = self._s
        request: dict[str, Any] = {
            s.events_table: {"Keys": [to_item({"event_key": event_key})], "ConsistentRead": True},
            s.files_table: {"Keys": [to_item({"hash": digest})], "ConsistentRead": True},
        }
        if upload_id is not None:
            request[s.uploads_table] = {"Keys": [to_item({"upload_id": upload_id})], "ConsistentRead": True}
        found = self._batch_get(request)

        def first(table: str) -> Item | None:
            items = found.get(table, [])
            return items[0] if items else None

        return IngestState(first(s.events_table), first(s.files_table), first(s.uploads_table))

    def counter_totals(self) -> dict[str, int]:
        """Sum of every counter shard: ONE BatchGetItem (shards ≤ 100), never a Scan."""
        keys = [to_item({"counter_id": shard}) for shard in self._s.shard_ids]
        found = self._batch_get({self._s.counters_table: {"Keys": keys, "ConsistentRead": False}})
        totals = dict.fromkeys(COUNTER_FIELDS, 0)
        for item in found[self._s.counters_table]:
            for name in COUNTER_FIELDS:
                totals[name] += int(item.get(name, 0))
        return totals

    def scan_files(self, limit: int, start_key: dict[str, str] | None) -> tuple[list[Item], dict[str, str] | None]:
        """One page of at most `limit` file records, and where the next page starts (None on the last page).

        DynamoDB returns a LastEvaluatedKey whenever a Scan stops at its Limit, even on the table's last item,
        which would give the last full page a token to an empty page. So one item more is read: the next page
        starts after this page's last item only when that item exists. A page cut short by DynamoDB's 1 MB
        limit keeps DynamoDB's own key."""
        kwargs: dict[str, Any] = {"TableName": self._s.files_table, "Limit": limit + 1}
        if start_key:
            kwargs["ExclusiveStartKey"] = to_item(start_key)
        try:
            response = self._db.scan(**kwargs)
        except (ClientError, BotoCoreError) as error:
            raise translate(error, "Scan") from error
        items = [from_item(i) for i in response.get("Items", [])]
        if len(items) > limit:
            items = items[:limit]
            return items, {"hash": items[-1]["hash"]}
        last = response.get("LastEvaluatedKey")
        return items, ({"hash": from_item(last)["hash"]} if last else None)

    # ---------------------------------------------------------------- writes
    def put_upload(self, item: Item) -> None:
        try:
            self._db.put_item(
                TableName=self._s.uploads_table,
                Item=to_item(item),
                ConditionExpression="attribute_not_exists(upload_id)",
            )
        except (ClientError, BotoCoreError) as error:
            raise translate(error, "PutItem") from error

    def put_event(self, record: Item) -> bool:
        """Record an event outside a transaction; False when it was already recorded."""
        try:
            self._db.put_item(
                TableName=self._s.events_table,
                Item=to_item(record),
                ConditionExpression="attribute_not_exists(event_key)",
            )
        except (ClientError, BotoCoreError) as error:
            if isinstance(error, ClientError) and error.response.get("Error", {}).get("Code") == (
                "ConditionalCheckFailedException"
            ):
                return False
            raise translate(error, "PutItem") from error
        return True

    def transact(self, items: list[dict[str, Any]]) -> None:
        try:
            self._db.transact_write_items(TransactItems=items)
        except (ClientError, BotoCoreError) as error:
            raise translate(error, "TransactWriteItems") from error

    # ---------------------------------------------------------------- transaction items
    def put_event_item(self, record: Item) -> dict[str, Any]:
        return {
            "Put": {
                "TableName": self._s.events_table,
                "Item": to_item(record),
                "ConditionExpression": "attribute_not_exists(event_key)",
                "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
            }
        }

    def put_new_file_item(self, record: Item) -> dict[str, Any]:
        return {
            "Put": {
                "TableName": self._s.files_table,
                "Item": to_item(record),
                "ConditionExpression": "attribute_not_exists(#h)",
                "ExpressionAttributeNames": {"#h": "hash"},
                "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
            }
        }

    def put_claim_item(self, claim: str, digest: str, now: str) -> dict[str, Any]:
        """Claim the object key for the content stored there (no TTL: as long as the record lives)."""
        return {
            "Put": {
                "TableName": self._s.events_table,
                "Item": to_item({"event_key": claim, "hash": digest, "claimed_at": now}),
                "ConditionExpression": "attribute_not_exists(event_key)",
                "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
            }
        }

    def no_claim_item(self, claim: str) -> dict[str, Any]:
        """Condition: no stored object lives at this key."""
        return {
            "ConditionCheck": {
                "TableName": self._s.events_table,
                "Key": to_item({"event_key": claim}),
                "ConditionExpression": "attribute_not_exists(event_key)",
                "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
            }
        }

    def count_duplicate_file_item(self, digest: str, key: str | None, now: str) -> dict[str, Any]:
        """+1 upload on an existing file record — never the record whose object IS this key."""
        condition = "attribute_exists(#h)"
        values: dict[str, Any] = {":one": to_attr(1), ":now": to_attr(now)}
        if key is not None:
            condition += " AND s3_key <> :key"
            values[":key"] = to_attr(key)
        return {
            "Update": {
                "TableName": self._s.files_table,
                "Key": to_item({"hash": digest}),
                "UpdateExpression": "ADD upload_count :one SET last_upload_at = :now",
                "ConditionExpression": condition,
                "ExpressionAttributeNames": {"#h": "hash"},
                "ExpressionAttributeValues": values,
                "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
            }
        }

    def finish_upload_item(self, upload_id: str, fields: Item, defaults: Item, event_key: str) -> dict[str, Any]:
        """Mark an upload processed by this event: SET fields, set defaults only where absent, leave the pending
        index. Refused when another object version already processed it (a second PUT with the same URL)."""
        names: dict[str, str] = {}
        values: dict[str, Any] = {}
        parts: list[str] = []
        for i, (name, value) in enumerate(fields.items()):
            names[f"#f{i}"] = name
            values[f":f{i}"] = to_attr(value)
            parts.append(f"#f{i} = :f{i}")
        for i, (name, value) in enumerate(defaults.items()):
            if value is None:
                continue
            names[f"#d{i}"] = name
            values[f":d{i}"] = to_attr(value)
            parts.append(f"#d{i} = if_not_exists(#d{i}, :d{i})")
        parts.append("#ek = :ek")
        values[":ek"] = to_attr(event_key)
        return {
            "Update": {
                "TableName": self._s.uploads_table,
                "Key": to_item({"upload_id": upload_id}),
                "UpdateExpression": "SET " + ", ".join(parts) + " REMOVE pending_shard, #ttl",
                "ConditionExpression": "attribute_not_exists(#ek) OR #ek = :ek",
                "ExpressionAttributeNames": {**names, "#ttl": "ttl", "#ek": "event_key"},
                "ExpressionAttributeValues": values,
                "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
            }
        }

    def add_counters_item(self, shard: str, deltas: Mapping[str, int]) -> dict[str, Any]:
        names = {f"#c{i}": name for i, name in enumerate(deltas)}
        values = {f":c{i}": to_attr(delta) for i, delta in enumerate(deltas.values())}
        return {
            "Update": {
                "TableName": self._s.counters_table,
                "Key": to_item({"counter_id": shard}),
                "UpdateExpression": "ADD " + ", ".join(f"#c{i} :c{i}" for i in range(len(deltas))),
                "ExpressionAttributeNames": names,
                "ExpressionAttributeValues": values,
            }
        }


COUNTER_FIELDS = (
    "total_files",
    "total_bytes_stored",
    "total_uploads",
    "duplicates_avoided",
    "total_s3_size_saved",
)
