"""What every benchmark row shares: the emulator and the environment pointing dfd at it, tables and bucket,
test objects, AWS call counting (botocore event hooks), timing helpers and the row record."""

from __future__ import annotations

import hashlib
import json
import os
import random
import statistics
import threading
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import cache
from typing import Any

import boto3
from botocore.config import Config

from dfdbench.emulator import Emulator
from dfdlocal import names
from dfdlocal.emulator import create_resources
from dfdlocal.names import CREDENTIALS, REGION
from dfdlocal.template import TEMPLATE, read_model

MIB = 1024 * 1024
GIB = 1024 * MIB
BUCKET = names.BUCKET
FILES_TABLE = names.TABLES["FilesTable"]
EVENTS_TABLE = names.TABLES["EventsTable"]
UPLOADS_TABLE = names.TABLES["UploadsTable"]
QUEUE_VISIBILITY_TIMEOUT = 30  # seconds; nothing reads the ingest queue in the rows


@dataclass
class Row:
    """One line of the table: a figure, what it is compared with (measured in the same run) and the target."""

    target: str  # "1".."9"
    name: str
    value: float | None
    unit: str
    baseline: float | None = None
    baseline_name: str = ""
    ratio: float | None = None
    goal: str = ""
    met: bool | None = None
    note: str = ""
    details: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {
            "target": self.target,
            "name": self.name,
            "value": self.value,
            "unit": self.unit,
            "baseline": self.baseline,
            "baseline_name": self.baseline_name,
            "ratio": self.ratio,
            "goal": self.goal,
            "met": self.met,
            "note": self.note,
            "details": self.details,
        }


@dataclass
class Options:
    quick: bool = False
    uploads: int = 300
    bandwidth: float = 40e6  # bytes/s per connection behind the throttling proxy (targets 2 and 4)
    latency_ms: float = 0.0  # per request, behind the throttling proxy
    cold_runs: int = 5
    verbose: bool = False

    def runs(self, full: int, quick: int) -> int:
        return quick if self.quick else full


def http_api_event(
    method: str, path: str, *, route: str | None = None, params: dict[str, str] | None = None,
    query: dict[str, str] | None = None, body: Any = None, headers: dict[str, str] | None = None,
    claims: dict[str, Any] | None = None, request_id: str = "bench",
) -> dict[str, Any]:  # fmt: skip
    """An API Gateway HTTP API (payload 2.0) event for `route` (default: `path` itself), with `claims` as the JWT
    authorizer passes them (None: unauthorized)."""
    route_key = f"{method} {route or path}"
    event: dict[str, Any] = {
        "version": "2.0",
        "routeKey": route_key,
        "rawPath": path,
        "rawQueryString": "&".join(f"{k}={v}" for k, v in (query or {}).items()),
        "headers": {"content-type": "application/json", "host": "api.example.com", **(headers or {})},
        "requestContext": {
            "accountId": "123456789012",
            "apiId": "bench",
            "domainName": "api.example.com",
            "domainPrefix": "api",
            "http": {
                "method": method,
                "path": path,
                "protocol": "HTTP/1.1",
                "sourceIp": "192.0.2.1",
                "userAgent": "bench",
            },
            "requestId": request_id,
            "routeKey": route_key,
            "stage": "$default",
            "time": "27/Nov/2026:12:00:00 +0000",
            "timeEpoch": 1795780800000,
        },
        "isBase64Encoded": False,
    }
    if query:
        event["queryStringParameters"] = query
    if params:
        event["pathParameters"] = params
    if body is not None:
        event["body"] = json.dumps(body)
    if claims is not None:
        event["requestContext"]["authorizer"] = {"jwt": {"claims": claims, "scopes": None}}
    return event


@cache
def template_default(parameter: str) -> str:
    """A template.yaml parameter's default: the benchmarks measure the default deployment."""
    from dfdlocal.template import load_template

    template = load_template(TEMPLATE)
    return str(template["Parameters"][parameter]["Default"])


def function_environment(endpoint: str) -> dict[str, str]:
    """What the template sets for every function, with local names, and a quiet Powertools."""
    env = {
        **CREDENTIALS,
        **names.ENVIRONMENT,
        "AWS_DEFAULT_REGION": REGION,
        "AWS_REGION": REGION,
        "AWS_ENDPOINT_URL": endpoint,
        "UPLOAD_PREFIX": "uploads/",
        "COUNTER_SHARDS": template_default("CounterShards"),
        "POWERTOOLS_SERVICE_NAME": "dfd",
        "POWERTOOLS_METRICS_NAMESPACE": "dfd",
        "POWERTOOLS_LOG_LEVEL": "ERROR",
        "POWERTOOLS_METRICS_DISABLED": "true",
        "POWERTOOLS_TRACE_DISABLED": "true",
    }
    return env


class Bench:
    """The emulator, the process environment pointing dfd at it, and the resources the ingest needs."""

    def __init__(self, options: Options) -> None:
        self.options = options
        self.emulator = Emulator()
        self.url = self.emulator.url
        self._saved = dict(os.environ)
        for name in list(os.environ):
            if name.startswith("AWS_ENDPOINT_URL_") or name in ("AWS_PROFILE", "AWS_DEFAULT_PROFILE"):
                del os.environ[name]
        os.environ.update(function_environment(self.url))
        from dfd import deps

        deps.reset()
        self.digests: dict[str, str] = {}
        self.declared: dict[str, tuple[str, int, str]] = {}  # upload id -> (key, size, sha256) it declared
        self.s3 = self.client("s3")
        self.ddb = self.client("dynamodb")
        self.keys: dict[str, str] = {}  # table name -> its hash key attribute
        self.create_resources()

    def close(self) -> None:
        from dfd import deps

        deps.reset()
        os.environ.clear()
        os.environ.update(self._saved)
        self.emulator.stop()

    def client(self, service: str, endpoint: str | None = None, **config: Any) -> Any:
        """The benchmark's own client (not dfd's): no checksums computed or validated unless asked."""
        settings: dict[str, Any] = {
            "retries": {"max_attempts": 3},
            "max_pool_connections": 32,
            "request_checksum_calculation": "when_required",
            "response_checksum_validation": "when_required",
        }
        settings.update(config)
        if service == "s3":
            settings.setdefault("signature_version", "s3v4")
        return boto3.session.Session().client(
            service,  # type: ignore[call-overload]
            endpoint_url=endpoint or self.url,
            region_name=REGION,
            config=Config(**settings),
            **{k.lower(): v for k, v in CREDENTIALS.items()},
        )

    def create_resources(self) -> None:
        """The template's resources, as the local stack creates them."""
        model = read_model(TEMPLATE, self.url)
        create_resources(model, self.client, local_visibility_timeout=QUEUE_VISIBILITY_TIMEOUT)
        self.keys = {table.name: table.key_schema[0]["AttributeName"] for table in model.tables.values()}

    # ------------------------------------------------------------------ objects
    def put(self, size: int, *, checksum: bool = False, seed: int | None = None) -> str:
        """PUT `size` bytes of unique content under a fresh uploads/<id> key (the id hints the checksum). With
        `checksum`, the upload is first registered declaring its sha256, as POST /upload does when its URL signs
        it: the only stored checksum the ingest trusts."""
        from dfd.core.ids import new_upload_id

        upload_id = new_upload_id(checksummed=checksum)
        key = f"uploads/{upload_id}"
        body = content(size, seed if seed is not None else random.getrandbits(63))
        self.digests[key] = hashlib.sha256(body).hexdigest()  # every ingest's hash is checked against it
        kwargs: dict[str, Any] = {"Bucket": BUCKET, "Key": key, "Body": body}
        if checksum:
            kwargs["ChecksumAlgorithm"] = "SHA256"  # boto3 computes it, S3 (and moto) store it
            self.declared[upload_id] = (key, size, self.digests[key])
            self._declare(upload_id)
        self.s3.put_object(**kwargs)
        return key

    def _declare(self, upload_id: str) -> None:
        """The pending upload record POST /upload writes (with the bench's client: not one of the ingest's calls)."""
        key, size, digest = self.declared[upload_id]
        record = {"upload_id": upload_id, "status": "pending", "sha256": digest, "s3_key": key, "bucket": BUCKET}
        item = {name: {"S": value} for name, value in record.items()} | {"size": {"N": str(size)}}
        self.ddb.put_item(TableName=UPLOADS_TABLE, Item=item)

    def forget(self, result: Any) -> None:
        """Delete what an ingest recorded (event, the key's claim, file record, the upload record its key names:
        an upload bound to the event would make the next ingest a replay) so the same object ingests as new
        again."""
        from dfd.core.ids import key_claim

        if result.event_key:
            self.ddb.delete_item(TableName=EVENTS_TABLE, Key={"event_key": {"S": result.event_key}})
        claim = key_claim(result.bucket, result.key)
        self.ddb.delete_item(TableName=EVENTS_TABLE, Key={"event_key": {"S": claim}})
        if result.hash:
            self.ddb.delete_item(TableName=FILES_TABLE, Key={"hash": {"S": result.hash}})
        if result.upload_id:
            self.ddb.delete_item(TableName=UPLOADS_TABLE, Key={"upload_id": {"S": result.upload_id}})
            if result.upload_id in self.declared:
                self._declare(result.upload_id)  # pending again, still declaring its sha256

    def delete(self, key: str) -> None:
        self.s3.delete_object(Bucket=BUCKET, Key=key)


_BLOCK = random.Random(20261122).randbytes(4 * MIB)


def content(size: int, seed: int) -> bytes:
    """`size` bytes, unique per seed, cheap to make (a fixed random block repeated after a unique prefix)."""
    prefix = seed.to_bytes(8, "little") * 4
    if size <= len(prefix):
        return prefix[:size]
    rest = size - len(prefix)
    blocks, tail = divmod(rest, len(_BLOCK))
    return b"".join([prefix, _BLOCK * blocks, _BLOCK[:tail]])


# ---------------------------------------------------------------------- AWS call counting
class CallCounter:
    """API calls per operation on the clients it is attached to (botocore `before-call` hooks), and the
    DynamoDB capacity the emulator reports (ReturnConsumedCapacity=TOTAL added to every request that has it)."""

    def __init__(self) -> None:
        self.calls: Counter[str] = Counter()
        self.capacity: defaultdict[str, float] = defaultdict(float)
        self._lock = threading.Lock()

    def attach(self, client: Any) -> None:
        events = client.meta.events
        events.register("before-call.*.*", self._count, unique_id=f"bench-count-{id(self)}")
        events.register("before-parameter-build.dynamodb.*", _ask_capacity, unique_id="bench-capacity")
        events.register("after-call.dynamodb.*", self._capacity, unique_id=f"bench-capacity-{id(self)}")

    def detach(self, client: Any) -> None:
        events = client.meta.events
        events.unregister("before-call.*.*", unique_id=f"bench-count-{id(self)}")
        events.unregister("before-parameter-build.dynamodb.*", unique_id="bench-capacity")
        events.unregister("after-call.dynamodb.*", unique_id=f"bench-capacity-{id(self)}")

    def _count(self, model: Any, **_: Any) -> None:
        with self._lock:
            self.calls[f"{model.service_model.endpoint_prefix}:{model.name}"] += 1

    def _capacity(self, parsed: Any, model: Any, **_: Any) -> None:
        consumed = parsed.get("ConsumedCapacity") if isinstance(parsed, dict) else None
        if not consumed:
            return
        for entry in consumed if isinstance(consumed, list) else [consumed]:
            with self._lock:
                self.capacity[model.name] += float(entry.get("CapacityUnits", 0) or 0)

    def reset(self) -> None:
        with self._lock:
            self.calls.clear()
            self.capacity.clear()

    @property
    def total(self) -> int:
        return sum(self.calls.values())

    def count(self, prefix: str) -> int:
        return sum(n for name, n in self.calls.items() if name.startswith(prefix))

    def summary(self) -> str:
        return " + ".join(
            f"{name.split(':')[1]}" + (f"x{n}" if n > 1 else "") for name, n in sorted(self.calls.items())
        )


def _ask_capacity(params: dict[str, Any], model: Any, **_: Any) -> None:
    if "ReturnConsumedCapacity" in model.input_shape.members:
        params.setdefault("ReturnConsumedCapacity", "TOTAL")


@contextmanager
def counting(*clients: Any) -> Iterator[CallCounter]:
    counter = CallCounter()
    for client in clients:
        counter.attach(client)
    try:
        yield counter
    finally:
        for client in clients:
            counter.detach(client)


def dfd_clients() -> list[Any]:
    """dfd's own (cached) clients, as the functions use them."""
    from dfd.adapters import aws

    return [aws.dynamodb(), aws.s3(), aws.s3_ingest()]


# ---------------------------------------------------------------------- timing
def timed(fn: Callable[[], Any]) -> tuple[float, Any]:
    started = time.perf_counter()
    value = fn()
    return time.perf_counter() - started, value


def median(values: list[float]) -> float:
    return statistics.median(values)


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    if not ordered:
        return float("nan")
    index = min(len(ordered) - 1, max(0, round(q / 100 * (len(ordered) - 1))))
    return ordered[index]


def log(options: Options, message: str) -> None:
    if options.verbose:
        print(f"  · {message}", flush=True)
