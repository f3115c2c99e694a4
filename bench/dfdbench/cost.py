"""What a path costs on AWS, counted on the emulator: every request dfd's clients make (botocore hooks), the
DynamoDB units each one consumes by AWS's rules, computed from the items' sizes before and after it, and the
prices of one dated file (``prices-2026-11.json``, us-east-1, on-demand list prices).

DynamoDB's rules, as applied here (moto reports 1 unit per key read and none for a transaction):
- a write consumes 1 write unit per KB (rounded up) of the larger of the item before and after it, at least 1;
  a transactional one (TransactWriteItems, its ConditionChecks included) twice that; a conditional write that
  fails still consumes its units;
- every global secondary index the write changes consumes units of its own, by the index's projection: 1 per KB
  of the projected item put, the same again for the old one removed when the index key changed, nothing when
  neither the index key nor a projected attribute changed (index writes are not doubled by a transaction);
- a strongly consistent read 1 read unit per 4 KB of each item read (a missing item 1), an eventually consistent
  one half; a Query or Scan the sum of its items' sizes, rounded up once; a GSI Query reads projected items and is
  eventually consistent; TransactGetItems twice.
The hooks read items before and after each request with the bench's own client (not dfd's, so not counted).
"""

from __future__ import annotations

import json
import math
import threading
from collections import Counter
from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import Path
from typing import Any

PRICES = Path(__file__).with_name("prices-2026-11.json")
KB = 1024
READ_BLOCK = 4096
# S3's request classes: PUT, COPY, POST, LIST and the multipart calls at the first; GET, HEAD and the rest at the
# second; DELETE and abort free
S3_TIER1 = {
    "PutObject",
    "CopyObject",
    "ListObjectsV2",
    "ListObjects",
    "ListParts",
    "ListMultipartUploads",
    "CreateMultipartUpload",
    "UploadPart",
    "UploadPartCopy",
    "CompleteMultipartUpload",
    "PutObjectTagging",
}
S3_FREE = {"DeleteObject", "DeleteObjects", "AbortMultipartUpload"}


def prices() -> dict[str, Any]:
    data: dict[str, Any] = json.loads(PRICES.read_text())
    return data


# ---------------------------------------------------------------------------------------------- item sizes
def attribute_size(value: dict[str, Any]) -> int:
    """Bytes of one attribute value by DynamoDB's item-size rules (numbers: ~1 byte per 2 digits + 1)."""
    (kind, raw), *_ = value.items()
    if kind in ("S", "B"):
        return len(raw.encode() if isinstance(raw, str) else raw)
    if kind == "N":
        digits = len(str(Decimal(raw)).replace("-", "").replace(".", "").lstrip("0")) or 1
        return math.ceil(digits / 2) + 1
    if kind in ("BOOL", "NULL"):
        return 1
    if kind == "M":
        return 3 + sum(len(k.encode()) + attribute_size(v) + 1 for k, v in raw.items())
    if kind == "L":
        return 3 + sum(attribute_size(v) + 1 for v in raw)
    return sum(attribute_size({kind[0]: v}) for v in raw)  # SS, NS, BS


def item_size(item: dict[str, Any] | None) -> int:
    return sum(len(name.encode()) + attribute_size(value) for name, value in (item or {}).items())


def units(size: int, block: int) -> int:
    return max(1, math.ceil(size / block))


# ---------------------------------------------------------------------------------------------- the tables
@dataclass(frozen=True)
class Index:
    name: str
    keys: tuple[str, ...]
    projection: str  # ALL | KEYS_ONLY | INCLUDE
    include: tuple[str, ...] = ()


@dataclass(frozen=True)
class Table:
    name: str
    keys: tuple[str, ...]
    indexes: tuple[Index, ...]
    stream: bool

    def key_of(self, item: dict[str, Any]) -> dict[str, Any]:
        return {k: item[k] for k in self.keys if k in item}

    def index(self, name: str) -> Index:
        return next(index for index in self.indexes if index.name == name)

    def projected(self, index: Index, item: dict[str, Any] | None) -> dict[str, Any] | None:
        """The item as the index holds it, or None when the item is not in the (sparse) index."""
        if not item or any(k not in item for k in index.keys):
            return None
        if index.projection == "ALL":
            return dict(item)
        names = set(self.keys) | set(index.keys) | set(index.include)
        return {k: v for k, v in item.items() if k in names}


def tables_of(model: Any) -> dict[str, Table]:
    """The template's tables (dfdlocal.template's model): keys, indexes with their projections, streams."""
    out: dict[str, Table] = {}
    for table in model.tables.values():
        props = table.properties
        indexes = tuple(
            Index(
                gsi["IndexName"],
                tuple(k["AttributeName"] for k in gsi["KeySchema"]),
                gsi["Projection"]["ProjectionType"],
                tuple(gsi["Projection"].get("NonKeyAttributes", ())),
            )
            for gsi in props.get("GlobalSecondaryIndexes", [])
        )
        keys = tuple(k["AttributeName"] for k in table.key_schema)
        out[table.name] = Table(table.name, keys, indexes, "StreamSpecification" in props)
    return out


# ---------------------------------------------------------------------------------------------- the meter
@dataclass
class Usage:
    """What one path consumed: requests by service:operation, DynamoDB units, stream records, events."""

    calls: Counter[str] = field(default_factory=Counter)
    write_units: float = 0.0
    index_write_units: float = 0.0
    read_units: float = 0.0
    by_table: Counter[str] = field(default_factory=Counter)  # "<table> w|iw|r" -> units
    stream_records: list[tuple[str, dict[str, Any] | None, dict[str, Any] | None]] = field(default_factory=list)
    events: int = 0  # PutEvents entries
    s3_client: Counter[str] = field(default_factory=Counter)  # requests a client makes with a presigned URL

    def add(self, other: Usage, times: float = 1.0) -> None:
        for name, n in other.calls.items():
            self.calls[name] += n * times  # type: ignore[assignment]
        for name, n in other.by_table.items():
            self.by_table[name] += n * times  # type: ignore[assignment]
        for name, n in other.s3_client.items():
            self.s3_client[name] += n * times  # type: ignore[assignment]
        self.write_units += other.write_units * times
        self.index_write_units += other.index_write_units * times
        self.read_units += other.read_units * times
        self.events += other.events * times  # type: ignore[assignment]

    @property
    def all_write_units(self) -> float:
        return self.write_units + self.index_write_units


class Meter:
    """Botocore hooks on dfd's clients: each request counted, each DynamoDB request's units computed."""

    def __init__(self, ddb: Any, tables: dict[str, Table]) -> None:
        self.ddb = ddb  # the bench's own client: reads items without being counted
        self.tables = tables
        self.usage = Usage()
        self._lock = threading.Lock()
        self._clients: list[Any] = []

    def attach(self, *clients: Any) -> None:
        for client in clients:
            events = client.meta.events
            events.register("before-parameter-build.*.*", self._params, unique_id=f"cost-params-{id(self)}")
            events.register("before-call.*.*", self._before, unique_id=f"cost-before-{id(self)}")
            events.register("after-call.*.*", self._after, unique_id=f"cost-after-{id(self)}")
            self._clients.append(client)

    def detach(self) -> None:
        for client in self._clients:
            client.meta.events.unregister("before-parameter-build.*.*", unique_id=f"cost-params-{id(self)}")
            client.meta.events.unregister("before-call.*.*", unique_id=f"cost-before-{id(self)}")
            client.meta.events.unregister("after-call.*.*", unique_id=f"cost-after-{id(self)}")
        self._clients.clear()

    def take(self) -> Usage:
        """What was counted since the last take."""
        with self._lock:
            usage, self.usage = self.usage, Usage()
        return usage

    # ---------------------------------------------------------------- hooks
    def _params(self, model: Any, params: dict[str, Any], context: dict[str, Any], **_: Any) -> None:
        """The request's parameters as dfd gave them (before-call sees the serialized request)."""
        context["cost_params"] = params

    def _before(self, model: Any, context: dict[str, Any], **_: Any) -> None:
        service = model.service_model.endpoint_prefix
        params = context.get("cost_params") or {}
        with self._lock:
            self.usage.calls[f"{service}:{model.name}"] += 1
            if service == "events" and model.name == "PutEvents":
                self.usage.events += len(params.get("Entries", []))
        if service == "dynamodb":
            context["cost_before"] = [(t, k, self._get(t, k)) for t, k, _ in self._writes(model.name, params)]

    def _after(self, model: Any, parsed: Any, context: dict[str, Any], **_: Any) -> None:
        if model.service_model.endpoint_prefix != "dynamodb":
            return
        failed = isinstance(parsed, dict) and "Error" in parsed
        name = model.name
        if name in ("GetItem", "BatchGetItem", "Query", "Scan", "TransactGetItems"):
            self._reads(name, context.get("cost_params") or {}, parsed)
            return
        before = context.get("cost_before") or []
        doubled = name == "TransactWriteItems"
        for table_name, key, old in before:
            table = self.tables[table_name]
            new = old if failed else self._get(table_name, key)
            size = max(item_size(old), item_size(new))
            base = units(size, KB) * (2 if doubled else 1)
            index_units = 0 if failed else sum(self._index_units(table, index, old, new) for index in table.indexes)
            with self._lock:
                self.usage.write_units += base
                self.usage.index_write_units += index_units
                self.usage.by_table[f"{table_name} w"] += base
                if index_units:
                    self.usage.by_table[f"{table_name} iw"] += index_units
                if table.stream and old != new:
                    self.usage.stream_records.append((table_name, old, new))

    # ---------------------------------------------------------------- writes
    def _writes(self, operation: str, params: dict[str, Any]) -> list[tuple[str, dict[str, Any], str]]:
        """(table, key, action) of every item a write request touches (a ConditionCheck included)."""
        out: list[tuple[str, dict[str, Any], str]] = []
        if operation in ("PutItem", "UpdateItem", "DeleteItem"):
            table = params["TableName"]
            key = params.get("Key") or self.tables[table].key_of(params["Item"])
            out.append((table, key, operation))
        elif operation == "TransactWriteItems":
            for entry in params.get("TransactItems", []):
                ((action, body),) = entry.items()
                table = body["TableName"]
                key = body.get("Key") or self.tables[table].key_of(body["Item"])
                out.append((table, key, action))
        elif operation == "BatchWriteItem":
            for table, requests in params.get("RequestItems", {}).items():
                for request in requests:
                    if "PutRequest" in request:
                        out.append((table, self.tables[table].key_of(request["PutRequest"]["Item"]), "Put"))
                    else:
                        out.append((table, request["DeleteRequest"]["Key"], "Delete"))
        return out

    def _keyed(self, operation: str, table: Table, params: dict[str, Any], parsed: Any) -> list[dict[str, Any]]:
        """The items a Query or Scan returned, with the table's keys: a projection without them (billed on the
        full items all the same) is asked again for them alongside."""
        items: list[dict[str, Any]] = parsed.get("Items", []) if isinstance(parsed, dict) else []
        if not items or all(name in item for item in items for name in table.keys):
            return items
        names = {f"#meter{i}": name for i, name in enumerate(table.keys)}
        again = dict(params)
        again["ProjectionExpression"] = ", ".join([params["ProjectionExpression"], *names])
        again["ExpressionAttributeNames"] = {**params.get("ExpressionAttributeNames", {}), **names}
        found: list[dict[str, Any]] = getattr(self.ddb, operation.lower())(**again).get("Items", [])
        return found

    def _get(self, table: str, key: dict[str, Any]) -> dict[str, Any] | None:
        found: dict[str, Any] | None = self.ddb.get_item(TableName=table, Key=key, ConsistentRead=True).get("Item")
        return found

    @staticmethod
    def _index_units(table: Table, index: Index, old: dict[str, Any] | None, new: dict[str, Any] | None) -> int:
        before, after = table.projected(index, old), table.projected(index, new)
        if before == after:
            return 0
        if before is None:
            return units(item_size(after), KB)
        if after is None:
            return units(item_size(before), KB)
        if any(before.get(k) != after.get(k) for k in index.keys):  # moved: the old one deleted, the new one put
            return units(item_size(before), KB) + units(item_size(after), KB)
        return units(max(item_size(before), item_size(after)), KB)

    # ---------------------------------------------------------------- reads
    def _reads(self, operation: str, params: dict[str, Any], parsed: Any) -> None:
        total = 0.0
        per_table: Counter[str] = Counter()
        if operation == "GetItem":
            item = self._get(params["TableName"], params["Key"])
            got = units(item_size(item), READ_BLOCK) * (1 if params.get("ConsistentRead") else 0.5)
            per_table[params["TableName"]] += got  # type: ignore[assignment]
        elif operation == "BatchGetItem":
            for table, ask in params.get("RequestItems", {}).items():
                factor = 1 if ask.get("ConsistentRead") else 0.5
                for key in ask.get("Keys", []):
                    per_table[table] += units(item_size(self._get(table, key)), READ_BLOCK) * factor  # type: ignore[assignment]
        elif operation == "TransactGetItems":
            for entry in params.get("TransactItems", []):
                body = entry["Get"]
                per_table[body["TableName"]] += 2 * units(
                    item_size(self._get(body["TableName"], body["Key"])), READ_BLOCK
                )
        else:  # Query, Scan: the items read, their sizes summed and rounded up once
            table = self.tables[params["TableName"]]
            index = table.index(params["IndexName"]) if params.get("IndexName") else None
            size = 0
            for returned in self._keyed(operation, table, params, parsed):
                full = self._get(table.name, table.key_of(returned))
                size += item_size(table.projected(index, full) if index else full)
            consistent = params.get("ConsistentRead") and index is None
            per_table[table.name] += units(size, READ_BLOCK) * (1 if consistent else 0.5)  # type: ignore[assignment]
        for table_name, n in per_table.items():
            total += n
            with self._lock:
                self.usage.by_table[f"{table_name} r"] += n
        with self._lock:
            self.usage.read_units += total
