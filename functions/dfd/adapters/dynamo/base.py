"""What every aggregate module of the DynamoDB adapter and the stores of the other tables share: attribute values,
ClientError -> domain errors, one GetItem (:func:`get_item`), one conditional write (:func:`conditional_write`) and
the transaction plan.

A write builds its items and, for a transaction, a :class:`Plan` that names the role of every item. DynamoDB
reports cancellation reasons by position; :meth:`Plan.refusal` turns them into the typed conflict of the role
whose condition failed (the first in ``PRECEDENCE``), carrying the item that stood in the way parsed into its
record (dfd.*.codec). A new item in a transaction is one more ``plan.add(role, request, conflict)``.
"""

from __future__ import annotations

import random
import secrets
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from botocore.exceptions import BotoCoreError, ClientError

# the attribute values every aggregate module (and the adapters of other tables) writes and reads
from dfd.adapters.dynamo.codec import from_item as from_item
from dfd.adapters.dynamo.codec import to_attr as to_attr
from dfd.adapters.dynamo.codec import to_item as to_item
from dfd.core import codec as core_codec
from dfd.core import usage
from dfd.core.conflicts import CommitRefused
from dfd.core.errors import DfdError, ServiceUnavailable, TransactionRetryable
from dfd.core.ids import key_claim, upload_id_from_key
from dfd.core.retry import PARTIAL_ATTEMPTS, Backoff
from dfd.ingest import codec as ingest_codec
from dfd.uploads import codec as uploads_codec

if TYPE_CHECKING:
    from dfd.core.config import Settings
    from dfd.core.records import TenantUsage

Item = core_codec.Item
Request = dict[str, Any]

_RETRYABLE_CODES = {
    "ProvisionedThroughputExceededException",
    "ThrottlingException",
    "RequestLimitExceeded",
    "InternalServerError",
    "ServiceUnavailable",
    "TransactionInProgressException",
}
# a cancellation for these reasons failed no condition: botocore retries no cancellation, so a throttled or failed
# item is a 503 (dfd.core.retry: the domain loops retry only conflicts)
_UNAVAILABLE_REASONS = {"ThrottlingError", "ProvisionedThroughputExceeded", "InternalError"}


class CancelledTransaction(DfdError):
    """A TransactWriteItems was cancelled by failed conditions; `reasons[i]` speaks of item i. Never leaves the
    adapter: :meth:`Store.run` turns it into the plan's typed conflict."""

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
        if any(code in _UNAVAILABLE_REASONS for code, _ in reasons):
            return ServiceUnavailable(f"DynamoDB {action} cancelled: {[c for c, _ in reasons]}")
        if any(code == "TransactionConflict" for code, _ in reasons):  # another transaction on one of its items
            return TransactionRetryable(f"DynamoDB {action} cancelled: {[c for c, _ in reasons]}")
        return CancelledTransaction(reasons)
    if code in _RETRYABLE_CODES:
        return ServiceUnavailable(f"DynamoDB {action} is throttled or unavailable ({code})")
    return DfdError(f"DynamoDB {action} failed ({code})", code="storage_error")


def condition_failed(error: ClientError | BotoCoreError) -> bool:
    return isinstance(error, ClientError) and error.response.get("Error", {}).get("Code") == (
        "ConditionalCheckFailedException"
    )


def refused_item(error: ClientError | BotoCoreError) -> Item | None:
    """The item a refused conditional write returned (ReturnValuesOnConditionCheckFailure=ALL_OLD), or None."""
    raw: Any = error.response.get("Item") if isinstance(error, ClientError) else None
    return from_item(raw) if isinstance(raw, dict) and raw else None


def already_put(error: ClientError | BotoCoreError, item: dict[str, Any]) -> bool:
    """A conditional PutItem refused because the very item it puts is there: our own put, applied before its
    response was lost and retried (the item returned by ReturnValuesOnConditionCheckFailure=ALL_OLD)."""
    return condition_failed(error) and refused_item(error) == from_item(item)


def request_token() -> str:
    """A ClientRequestToken of its own for one TransactWriteItems call.

    DynamoDB answers a request that repeats a token of the last 10 minutes with the first one's result, without
    applying it again. botocore retries a call whose response was lost by resending the same request, token
    included: a transaction applied before its response was lost is not applied twice. Any other call gets a
    token of its own, even with the very same items (the same operation again within one second: the same ids
    and the same timestamps), and is judged by its conditions — a token derived from the items would have
    answered such a second call with the first one's success, without its writes (the repository's contract
    run on DynamoDB Local showed it). A retry the domain builds itself (after a conflict, or after botocore gave
    up) is such another call: whatever the first one applied is visible to the conditions (the event record,
    the upload record), and :meth:`Plan.applied_before` recognises our own transaction from the item its
    identity condition returns."""
    return secrets.token_hex(16)


def conditional_write(call: Callable[[], object], action: str) -> bool:
    """Make the conditional write `call` (a PutItem, UpdateItem or DeleteItem, named by `action`): False when its
    condition refused it; any other failure is :func:`translate`'s domain error."""
    try:
        call()
    except (ClientError, BotoCoreError) as error:
        if condition_failed(error):
            return False
        raise translate(error, action) from error
    return True


def get_item(client: Any, table: str, key: Item, *, consistent: bool = True) -> Item | None:
    """One GetItem of `key` in `table` (strongly consistent unless `consistent` is False): the item, or None."""
    try:
        response = client.get_item(TableName=table, Key=to_item(key), ConsistentRead=consistent)
    except (ClientError, BotoCoreError) as error:
        raise translate(error, "GetItem") from error
    raw = response.get("Item")
    return from_item(raw) if raw else None


def transact(client: Any, items: list[Request]) -> None:
    """One TransactWriteItems with a ClientRequestToken of its own (:func:`request_token`); a
    cancellation by failed conditions raises :class:`CancelledTransaction` (:func:`translate`)."""
    try:
        client.transact_write_items(TransactItems=items, ClientRequestToken=request_token())
    except (ClientError, BotoCoreError) as error:
        raise translate(error, "TransactWriteItems") from error


Refusal = Callable[[Any], CommitRefused | None]

# The conflict a cancelled transaction raises is that of the first role, in this order, whose condition
# failed (several can fail at once: an event already recorded explains everything else); roles not listed
# follow in the plan's order.
PRECEDENCE = ("event", "claim", "file", "upload", "tenant")
# The record a role's returned item is parsed into (a role not listed returns no item: its conflict gets None).
_RECORDS: dict[str, Callable[[Item], object]] = {
    "event": ingest_codec.event_record,
    "claim": ingest_codec.key_claim,
    "file": ingest_codec.file_record,
    "upload": uploads_codec.upload_record,
    "tenant": ingest_codec.tenant_ref,
    "usage": core_codec.tenant_usage,
    "bound": uploads_codec.precheck_count,
}


@dataclass
class Plan:
    """The items of one TransactWriteItems, which role each plays, and the conflict each one's failed
    condition means."""

    items: list[Request] = field(default_factory=list)
    roles: dict[str, int] = field(default_factory=dict)
    conflicts: dict[str, Refusal] = field(default_factory=dict)
    # the role whose write carries the operation's identity (an event key, an upload id): found there, exactly as
    # this plan puts it, it says the whole transaction was applied before (transactions are atomic)
    identity: str | None = None
    # the identity written by an Update: the attribute values (an event key and the commit's nonce) its refused
    # item holds exactly when this very request was applied before
    mark: dict[str, Any] | None = None
    # the record a role's returned item is parsed into, where it is not the role's usual one (_RECORDS)
    parsers: dict[str, Callable[[Item], object]] = field(default_factory=dict)

    def add(
        self,
        role: str,
        request: Request,
        conflict: Refusal | None = None,
        *,
        parse: Callable[[Item], object] | None = None,
    ) -> None:
        assert role not in self.roles, f"role {role} twice in one transaction"
        self.roles[role] = len(self.items)
        self.items.append(request)
        if conflict is not None:
            self.conflicts[role] = conflict
        if parse is not None:
            self.parsers[role] = parse

    def alias(self, role: str, of: str, conflict: Refusal, *, parse: Callable[[Item], object] | None = None) -> None:
        """`role` names the item of role `of` too: its failed condition means `conflict` at `role`'s precedence
        (one item that plays two roles, e.g. the upload finished that carries the event)."""
        assert role not in self.roles and of in self.roles
        self.roles[role] = self.roles[of]
        self.conflicts[role] = conflict
        if parse is not None:
            self.parsers[role] = parse

    def applied_before(self, cancelled: CancelledTransaction) -> bool:
        if self.identity is None or self.identity not in self.roles:
            return False
        index = self.roles[self.identity]
        if not cancelled.failed(index):
            return False
        found = cancelled.item(index)
        if self.mark is not None:
            return found is not None and all(found.get(name) == value for name, value in self.mark.items())
        put = self.items[index].get("Put")
        return isinstance(put, dict) and found == from_item(put["Item"])

    def refusal(self, cancelled: CancelledTransaction) -> CommitRefused:
        """The conflict of the first role (PRECEDENCE) whose condition failed and whose conflict explains it (a
        conflict may answer None: not this role's, e.g. an item's other role)."""
        order = [r for r in PRECEDENCE if r in self.roles] + [r for r in self.roles if r not in PRECEDENCE]
        for role in order:
            index = self.roles[role]
            if role in self.conflicts and cancelled.failed(index):
                item = cancelled.item(index)
                parse = self.parsers.get(role) or _RECORDS.get(role)
                conflict = self.conflicts[role](parse(item) if item is not None and parse is not None else None)
                if conflict is not None:
                    return conflict
        return CommitRefused(None, str(cancelled))


class Store:
    """The client, the settings and what every aggregate does with them: single-item reads, batched reads,
    one transaction run from its plan, and the items several aggregates put in their transactions."""

    def __init__(self, client: Any, settings: Settings, *, rng: random.Random | None = None) -> None:
        self._db = client
        self._s = settings
        self._rng = rng or random.Random()
        self._backoff = Backoff(rng=self._rng)

    # ---------------------------------------------------------------- reads
    def _get(self, table: str, key: Item, *, consistent: bool = False) -> Item | None:
        return get_item(self._db, table, key, consistent=consistent)

    def _batch_get(self, request: dict[str, Any]) -> dict[str, list[Item]]:
        """BatchGetItem with UnprocessedKeys retried (PARTIAL_ATTEMPTS calls at most, with dfd.core.retry's backoff)."""
        found: dict[str, list[Item]] = {table: [] for table in request}
        pending = request
        for attempt in range(1, PARTIAL_ATTEMPTS + 1):
            try:
                response = self._db.batch_get_item(RequestItems=pending)
            except (ClientError, BotoCoreError) as error:
                raise translate(error, "BatchGetItem") from error
            for table, items in response.get("Responses", {}).items():
                found[table].extend(from_item(item) for item in items)
            pending = response.get("UnprocessedKeys") or {}
            if not pending:
                return found
            if attempt < PARTIAL_ATTEMPTS:
                self._backoff(attempt)
        raise ServiceUnavailable("DynamoDB BatchGetItem left keys unprocessed after retries")

    def _page(
        self,
        action: str,
        call: Callable[..., Any],
        kwargs: dict[str, Any],
        limit: int,
        start_key: dict[str, str] | None,
        position: Callable[[Item], dict[str, str]],
    ) -> tuple[list[Item], dict[str, str] | None]:
        """One page of a Scan or Query and the key of the next (`position` of an item), reading one item more
        than `limit` (scan_files says why); a page cut short by DynamoDB's 1 MB limit keeps DynamoDB's key."""
        kwargs = {**kwargs, "Limit": limit + 1}
        if start_key:
            kwargs["ExclusiveStartKey"] = to_item(start_key)
        try:
            response = call(**kwargs)
        except (ClientError, BotoCoreError) as error:
            raise translate(error, action) from error
        items = [from_item(i) for i in response.get("Items", [])]
        if len(items) > limit:
            items = items[:limit]
            return items, position(items[-1])
        last = response.get("LastEvaluatedKey")
        return items, (position(from_item(last)) if last else None)

    # ---------------------------------------------------------------- transactions
    def transact(self, items: list[Request]) -> None:
        """One TransactWriteItems (the seam the capacity bench and the counter simulation watch): :func:`transact`."""
        transact(self._db, items)

    def _run(self, plan: Plan) -> None:
        try:
            self.transact(plan.items)
        except CancelledTransaction as cancelled:
            if plan.applied_before(cancelled):
                return  # our own transaction, applied before its response was lost
            raise plan.refusal(cancelled) from cancelled

    # ---------------------------------------------------------------- shared transaction items
    def _put_new(self, table: str, item: Item, identity: str) -> Request:
        """Put `item` where no item has its key (`identity`: the key attribute); a refusal returns the item there."""
        return {
            "Put": {
                "TableName": table,
                "Item": to_item(item),
                "ConditionExpression": "attribute_not_exists(#id)",
                "ExpressionAttributeNames": {"#id": identity},
                "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
            }
        }

    def _claim_upload(self, key: str) -> str | None:
        """The upload whose item carries the claim of the object key `key` (None: a key with no upload id, whose
        claim is an item of its own in the Events table)."""
        return upload_id_from_key(self._s.upload_prefix, key)

    def _put_claim_item(self, bucket: str, key: str, digest: str, stamp: str) -> Request:
        """Claim an object key with no upload id for the content stored there."""
        item = ingest_codec.claim_item(key_claim(bucket, key), digest, stamp)
        return self._put_new(self._s.events_table, item, "event_key")

    def _drop_claim_item(self, bucket: str, key: str, digest: str) -> Request:
        """Drop the claim of an object key, unless another content's (the key then holds that content's copy): its
        upload item's, or its own item. An upload item that carries a claim never goes (it is the processed upload
        the claim came with): its absence refuses the transaction rather than write an item of the key alone."""
        upload_id = self._claim_upload(key)
        if upload_id is None:
            return {
                "Delete": {
                    "TableName": self._s.events_table,
                    "Key": to_item(ingest_codec.event_key(key_claim(bucket, key))),
                    "ConditionExpression": "attribute_not_exists(event_key) OR #h = :hash",
                    "ExpressionAttributeNames": {"#h": "hash"},
                    "ExpressionAttributeValues": {":hash": to_attr(digest)},
                }
            }
        return {
            "Update": {
                "TableName": self._s.uploads_table,
                "Key": to_item(uploads_codec.upload_key(upload_id)),
                "UpdateExpression": "REMOVE #c, claimed_at",
                "ConditionExpression": "attribute_exists(upload_id) AND (attribute_not_exists(#c) OR #c = :hash)",
                "ExpressionAttributeNames": {"#c": ingest_codec.CLAIM_HASH},
                "ExpressionAttributeValues": {":hash": to_attr(digest)},
            }
        }

    def _add_counters_item(self, shard: int, deltas: Mapping[str, int]) -> Request:
        """ADD the deltas to one counter shard (`shard` < counter_shards; the caller spreads the load)."""
        names = {f"#c{i}": name for i, name in enumerate(deltas)}
        values = {f":c{i}": to_attr(delta) for i, delta in enumerate(deltas.values())}
        return {
            "Update": {
                "TableName": self._s.counters_table,
                "Key": to_item({"counter_id": self._s.shard_ids[shard]}),
                "UpdateExpression": "ADD " + ", ".join(f"#c{i} :c{i}" for i in range(len(deltas))),
                "ExpressionAttributeNames": names,
                "ExpressionAttributeValues": values,
            }
        }

    def _usage_shards(self, tenant: str, *, consistent: bool = True) -> dict[usage.UsageShard, TenantUsage]:
        """The tenant's usage shards that exist: ONE Query of its item collection's `u#` sort keys (200 shards
        of < 82 bytes are < 16 KB: 4 read units consistent, 2 eventually consistent), pages followed should the
        collection ever outgrow 1 MB."""
        kwargs: dict[str, Any] = {
            "TableName": self._s.tenant_files_table,
            "KeyConditionExpression": "#t = :t AND begins_with(#h, :u)",
            "ExpressionAttributeNames": {"#t": "tenant", "#h": "hash"},
            "ExpressionAttributeValues": {":t": to_attr(tenant), ":u": to_attr(core_codec.USAGE_PREFIX)},
            "ConsistentRead": consistent,
        }
        shards: dict[usage.UsageShard, TenantUsage] = {}
        for item in self._usage_items(kwargs):
            shard = core_codec.usage_shard(item)
            if shard is not None:
                shards[shard] = core_codec.tenant_usage(item)
        return shards

    def _usage_items(self, kwargs: dict[str, Any]) -> list[Item]:
        """Every item of a Query, its pages followed (the seam the counter simulation watches)."""
        items: list[Item] = []
        while True:
            try:
                response = self._db.query(**kwargs)
            except (ClientError, BotoCoreError) as error:
                raise translate(error, "Query") from error
            items += [from_item(item) for item in response.get("Items", [])]
            if not response.get("LastEvaluatedKey"):
                return items
            kwargs = kwargs | {"ExclusiveStartKey": response["LastEvaluatedKey"]}

    def _add_usage_item(
        self, tenant: str, deltas: Mapping[str, int], *, shard: usage.UsageShard | None = None, **update: Any
    ) -> Request:
        """ADD the deltas (by TenantUsage field; pending_bytes is derived: core_codec.USAGE_ATTRS) to one of the
        tenant's usage shards (`shard`, else where its next write goes: dfd.core.usage.write_shard); `update`: more
        of the Update, e.g. its condition."""
        shard = shard or usage.write_shard(tenant, self._s, self._rng)
        deltas = {name: delta for name, delta in deltas.items() if name in core_codec.USAGE_ATTRS}  # not pending_bytes
        names = {f"#u{i}": core_codec.USAGE_ATTRS[name] for i, name in enumerate(deltas)}
        values = {f":u{i}": to_attr(delta) for i, delta in enumerate(deltas.values())}
        adds = ", ".join(f"#u{i} :u{i}" for i in range(len(deltas)))
        request: Request = {
            "TableName": self._s.tenant_files_table,
            "Key": to_item(core_codec.usage_key(shard)),
            "UpdateExpression": f"ADD {adds}",
            "ExpressionAttributeNames": names,
            "ExpressionAttributeValues": values,
        }
        for name, value in update.items():
            if isinstance(value, dict) and isinstance(request.get(name), dict):
                request[name] = {**request[name], **value}
            else:
                request[name] = value
        return {"Update": request}
