"""Target 5 (AWS calls and DynamoDB capacity per ingest, per delete and per reaped content) and target 6 (stats
and hashes cost)."""

from __future__ import annotations

import hashlib
import json
import math
import random
from collections import Counter, defaultdict
from datetime import UTC, datetime, timedelta
from functools import partial
from typing import Any

from dfdbench.cost import item_size
from dfdbench.harness import (
    BUCKET,
    FILES_TABLE,
    Bench,
    Row,
    counting,
    dfd_clients,
    http_api_event,
    median,
    timed,
)

SMALL = 64 * 1024


# ---------------------------------------------------------------------- DynamoDB's capacity rules
class CapacityModel:
    """RCU/WCU an ingest would consume on AWS: strongly consistent reads 1 RCU per 4 KB per key (a missing
    item still costs 1), transactional writes 2 WCU per 1 KB per item (the larger of the item before and
    after). Item sizes are those the ingest actually wrote, read back from the emulator."""

    def __init__(self, bench: Bench) -> None:
        self.bench = bench
        self.rcu = 0.0
        self.wcu = 0.0

    def read(self, tables_keys: dict[str, list[dict[str, Any]]]) -> None:
        for table, keys in tables_keys.items():
            for key in keys:
                item = self.bench.ddb.get_item(TableName=table, Key=key, ConsistentRead=True).get("Item")
                self.rcu += max(1, math.ceil(item_size(item) / 4096)) if item else 1

    def transact(self, items: list[dict[str, Any]], before: dict[str, int]) -> None:
        for entry in items:
            (action,) = entry.values()
            table = action["TableName"]
            key = action.get("Key") or {self.bench.keys[table]: action["Item"][self.bench.keys[table]]}
            after = self.bench.ddb.get_item(TableName=table, Key=key, ConsistentRead=True).get("Item") or {}
            size = max(item_size(after), before.get(json.dumps(key, sort_keys=True), 0), 1)
            self.wcu += 2 * math.ceil(size / 1024)


class _Recorder:
    """Wraps dfd's Repository to see each ingest's BatchGetItem and TransactWriteItems requests."""

    def __init__(self, repo: Any, model: CapacityModel) -> None:
        self.repo = repo
        self.model = model
        self.reads: list[dict[str, list[dict[str, Any]]]] = []
        self.writes: list[list[dict[str, Any]]] = []
        self._ingest_state = repo.ingest_state
        self._transact = repo.transact

    def __enter__(self) -> _Recorder:
        repo, settings = self.repo, self.repo._s

        def ingest_state(event_key: str, digest: str, upload_id: str | None, tenant_hint: str | None = None) -> Any:
            # the keys Repository.ingest_state reads: the upload item carries the event of an object at an upload key
            keys: dict[str, list[dict[str, Any]]] = {settings.files_table: [{"hash": {"S": digest}}]}
            if upload_id:
                keys[settings.uploads_table] = [{"upload_id": {"S": upload_id}}]
                if tenant_hint:
                    keys[settings.tenant_files_table] = [{"tenant": {"S": tenant_hint}, "hash": {"S": digest}}]
            else:
                keys[settings.events_table] = [{"event_key": {"S": event_key}}]
            self.reads.append(keys)
            return self._ingest_state(event_key, digest, upload_id, tenant_hint)

        def transact(items: list[dict[str, Any]]) -> None:
            before: dict[str, int] = {}
            for entry in items:
                (action,) = entry.values()
                table = action["TableName"]
                keys = self.model.bench.keys
                key = action.get("Key") or {keys[table]: action["Item"][keys[table]]}
                found = self.model.bench.ddb.get_item(TableName=table, Key=key, ConsistentRead=True).get("Item")
                before[json.dumps(key, sort_keys=True)] = item_size(found) if found else 0
            self._transact(items)
            self.writes.append(items)
            self.model.transact(items, before)

        repo.ingest_state = ingest_state
        repo.transact = transact
        return self

    def __exit__(self, *exc: object) -> None:
        del self.repo.ingest_state
        del self.repo.transact


def _scenario(bench: Bench, key: str, counter: Any) -> tuple[Any, dict[str, int], float, float, float]:
    from dfd import deps
    from dfd.core.notifications import ObjectRef

    model = CapacityModel(bench)
    counter.reset()
    with _Recorder(deps.repository(), model) as recorder:
        result = deps.ingestor().ingest(ObjectRef(BUCKET, key))
    for keys in recorder.reads:
        model.read(keys)
    reported = sum(counter.capacity.values())
    return result, dict(counter.calls), model.rcu, model.wcu, reported


def calls(bench: Bench) -> list[Row]:
    from dfd import deps

    rows: list[Row] = []
    deps.ingestor()
    content = random.randbytes(SMALL)
    with counting(*dfd_clients()) as counter:
        for checksum in (False, True):
            label = "checksummed PUT (HEAD first)" if checksum else "plain PUT (GET first)"
            first = _put(bench, content if not checksum else content[::-1], checksum)
            second = _put(bench, content if not checksum else content[::-1], checksum)
            # a duplicate: + HeadObject of the stored copy before its delete (the last copy is never deleted)
            plan = [("new content", first, 3), ("duplicate", second, 5), ("replay", first, 2)]
            plan.append(("replay of a deleted duplicate", second, 1))
            for what, key, limit in plan:
                result, made, rcu, wcu, reported = _scenario(bench, key, counter)
                total = sum(made.values())
                summary = " + ".join(f"{name.split(':')[1]}" for name in sorted(made))
                rows.append(
                    Row(
                        "5",
                        f"AWS calls, {what}, {label}",
                        total,
                        "calls",
                        goal=f"≤ {limit}",
                        met=total <= limit,
                        note=f"{summary}; {result.outcome}; AWS model {rcu:g} RCU + {wcu:g} WCU"
                        + f" (emulator reports {reported:g} CU)",
                        details={"calls": made, "rcu_model": rcu, "wcu_model": wcu, "reported_cu": reported},
                    )
                )
        # a SHA-256 stored that the upload did not declare (a client added it, unsigned): never trusted, the
        # body of the one GetObject is hashed — the same calls as a plain PUT
        key = _put(bench, random.randbytes(SMALL), True, hint=False, declared=False)
        result, made, rcu, wcu, reported = _scenario(bench, key, counter)
        rows.append(
            Row(
                "5",
                "AWS calls, new content, SHA-256 stored but not declared (hashed)",
                sum(made.values()),
                "calls",
                goal="≤ 3",
                met=sum(made.values()) <= 3 and result.hashed_bytes == SMALL,
                note=" + ".join(name.split(":")[1] for name in sorted(made))
                + f"; {result.outcome}; {result.hashed_bytes} bytes hashed",
                details={"calls": made, "hashed_bytes": result.hashed_bytes},
            )
        )
        # the hint is wrong (a PUT without the SHA-256 under a hinted id): one call more, same result
        key = _put(bench, random.randbytes(SMALL), False, hint=True)
        result, made, rcu, wcu, reported = _scenario(bench, key, counter)
        rows.append(
            Row(
                "5",
                "AWS calls, new content, hint wrong (no checksum stored)",
                sum(made.values()),
                "calls",
                goal="info (≤ 4)",
                met=sum(made.values()) <= 4,
                note=" + ".join(name.split(":")[1] for name in sorted(made)) + f"; {result.outcome}",
                details={"calls": made},
            )
        )
        rows += _tenant_calls(bench, counter)
        rows += _delete_calls(bench, counter)
    return rows


def _delete_calls(bench: Bench, counter: Any) -> list[Row]:
    """DELETE /uploads/{id}: the AWS calls of one delete — the upload's GetItem and ONE transaction,
    whether it removes the content's last reference or not — and, once the grace period is over, the reaper's
    calls per reaped content and per reaped tenant reference."""
    from dfd import deps
    from dfd.core.notifications import ObjectRef
    from dfd.identity.caller import Caller
    from dfd.uploads.service import UploadRequest

    acme = Caller("bench-a", "acme", False)
    acme_too = Caller("bench-c", "acme", False)
    contents = 3 if bench.options.quick else 10
    digests: list[str] = []

    def uploaded(caller: Caller, data: bytes) -> str:
        answer = deps.upload_service().create(UploadRequest("bench.bin", len(data), "application/x", None), caller)
        headers: dict[str, str] = answer.body["headers"]
        metadata = {k[len("x-amz-meta-") :]: v for k, v in headers.items() if k.startswith("x-amz-meta-")}
        key = str(answer.body["key"])
        bench.s3.put_object(Bucket=BUCKET, Key=key, Body=data, Metadata=metadata)
        deps.ingestor().ingest(ObjectRef(BUCKET, key))
        return str(answer.body["upload_id"])

    rows: list[Row] = []
    made_by: dict[str, list[dict[str, int]]] = {"not the last reference": [], "the last reference": []}
    for _ in range(contents):
        data = random.randbytes(SMALL)
        digests.append(hashlib.sha256(data).hexdigest())
        first, second = uploaded(acme, data), uploaded(acme_too, data)
        for what, caller, upload_id in (
            ("not the last reference", acme, first),
            ("the last reference", acme_too, second),
        ):
            counter.reset()
            assert deps.delete_service().delete(caller, upload_id).outcome == "deleted"
            made_by[what].append(dict(counter.calls))
    for what, runs in made_by.items():
        worst = max(sum(made.values()) for made in runs)
        summary = " + ".join(name.split(":")[1] for name in sorted(runs[-1]))
        rows.append(
            Row(
                "5",
                f"AWS calls per delete, {what} (with tenant)",
                worst,
                "calls",
                goal="≤ 2",
                met=worst <= 2,
                note=f"{summary} (the most of {len(runs)} deletes); no read of the content or the reference",
                details={"calls": runs[-1], "deletes": len(runs)},
            )
        )
    rows += _reaper_calls(bench, digests, counter)
    return rows


def _reaper_calls(bench: Bench, digests: list[str], counter: Any) -> list[Row]:
    """One reconcile run ({"sweep": false}, its clock past the grace period) over `contents` tombstoned contents
    and as many tenant references at 0, run page by page as its Lambda runs it: its AWS calls, counted at dfd's
    clients per phase."""
    from dfd import deps
    from dfd.adapters import aws
    from dfd.adapters.queue import SqsIngestQueue
    from dfd.adapters.s3 import ObjectStore
    from dfd.core.config import settings
    from dfd.reconcile.service import Reconciler

    sqs = bench.client("sqs")
    queue = SqsIngestQueue(sqs, sqs.create_queue(QueueName="bench-reconcile")["QueueUrl"])
    reconciler = Reconciler(settings(), deps.repository(), ObjectStore(aws.s3()), queue)
    later = datetime.now(UTC) + timedelta(hours=2)
    state = reconciler.begin({"sweep": False, "now": later.strftime("%Y-%m-%dT%H:%M:%SZ")})
    made: defaultdict[str, Counter[str]] = defaultdict(Counter)
    pages: Counter[str] = Counter()
    while (phase := state["pos"]["phase"]) != "done":
        before = Counter(counter.calls)
        state = reconciler.page(phase, state, lambda *_: None)
        made[phase].update(Counter(counter.calls) - before)
        pages[phase] += 1
    summary = reconciler.finish(state)
    contents = len(digests)
    left = sum(
        1
        for digest in digests
        if bench.ddb.get_item(TableName=FILES_TABLE, Key={"hash": {"S": digest}}, ConsistentRead=True).get("Item")
    )
    reap, refs = made["reap"], made["references"]
    objects, records = reap["s3:DeleteObject"], reap["dynamodb:TransactWriteItems"]
    per_content = (objects + records) / contents
    # a reference with its size: deleted and its size released from its tenant's usage, ONE TransactWriteItems
    released, dropped = refs["dynamodb:TransactWriteItems"], refs["dynamodb:DeleteItem"]
    per_ref = (released + dropped) / contents

    # every other call of the two phases is a page's: its Query of one ReapIndex shard and the lease's renewal
    shared_calls = sum(reap.values()) + sum(refs.values()) - objects - records - released - dropped
    shared_pages = pages["reap"] + pages["references"]
    per_page_only = shared_calls <= 2 * shared_pages
    shared = f"shared by the run: {shared_calls} calls in {shared_pages} pages (a Query and the lease's renewal each)"
    details = {"calls": {phase: dict(calls) for phase, calls in made.items()}, "pages": dict(pages)}
    return [
        Row(
            "5",
            "AWS calls per reaped content (reaper: object + record)",
            per_content,
            "calls",
            goal="≤ 2",
            met=per_content <= 2 and per_page_only and left == 0 and summary["reaped"] == contents,
            note=f"DeleteObject IfMatch x{objects} + TransactWriteItems x{records} for {contents} contents"
            + f" (no listing); {shared}",
            details=details | {"contents": contents, "files_left": left},
        ),
        Row(
            "5",
            "AWS calls per reaped tenant reference (reaper)",
            per_ref,
            "calls",
            goal="info (1)",
            met=per_ref == 1 and per_page_only,  # each of the run's references at 0 reaped, each in one call
            note=f"TransactWriteItems x{released} (the reference, conditioned on upload_count <= 0, and its size"
            + f" released from the tenant's usage) + DeleteItem x{dropped} (a reference without a size)"
            + f" for {contents} references",
            details=details,
        ),
    ]


def _tenant_calls(bench: Bench, counter: Any) -> list[Row]:
    """Uploads made through POST /upload (an upload record with its tenant): new content, a duplicate held by
    the same tenant, one held only by another tenant — with the tenant hint in the object's metadata (as the
    presigned PUT signs it) and without (an object that lost it: the ingest assumes and is corrected)."""
    from dfd import deps
    from dfd.identity.caller import Caller
    from dfd.uploads.service import UploadRequest

    acme = Caller("bench-a", "acme", False)
    acme_too = Caller("bench-c", "acme", False)
    globex = Caller("bench-b", "globex", False)
    rows: list[Row] = []
    for hint in (True, False):
        content = random.randbytes(SMALL)
        plan = [
            ("new content", acme, 3),
            ("same-tenant duplicate", acme_too, 5),
            ("cross-tenant duplicate", globex, 5 if hint else 6),
        ]
        for what, caller, limit in plan:
            answer = deps.upload_service().create(
                UploadRequest("bench.bin", len(content), "application/x", None), caller
            )
            headers: dict[str, str] = answer.body["headers"]
            metadata = {k[len("x-amz-meta-") :]: v for k, v in headers.items() if k.startswith("x-amz-meta-")}
            key = str(answer.body["key"])
            bench.s3.put_object(Bucket=BUCKET, Key=key, Body=content, Metadata=metadata if hint else {})
            result, made, rcu, wcu, reported = _scenario(bench, key, counter)
            total = sum(made.values())
            summary = " + ".join(
                f"{name.split(':')[1]}" + (f"x{n}" if n > 1 else "") for name, n in sorted(made.items())
            )
            label = "tenant hint in the metadata" if hint else "no tenant hint"
            rows.append(
                Row(
                    "5",
                    f"AWS calls, {what} (POST /upload, {label})",
                    total,
                    "calls",
                    goal=f"≤ {limit}",
                    met=total <= limit,
                    note=f"{summary}; {result.outcome} (upload {result.detail.get('upload_status', '-')});"
                    + f" AWS model {rcu:g} RCU + {wcu:g} WCU",
                    details={"calls": made, "rcu_model": rcu, "wcu_model": wcu, "reported_cu": reported},
                )
            )
    return rows


def _put(bench: Bench, body: bytes, checksum: bool, hint: bool | None = None, *, declared: bool | None = None) -> str:
    """An object at an upload key; `checksum`: PUT with its SHA-256 (S3 stores it); `declared` (default: as
    `checksum`): the upload record declares that sha256, as POST /upload records it when its URL signs it —
    the only stored checksum the ingest trusts."""
    from dfd import deps
    from dfd.core import clock
    from dfd.core.ids import new_upload_id
    from dfd.uploads.ports import NewUpload

    upload_id = new_upload_id(checksummed=checksum if hint is None else hint)
    key = f"uploads/{upload_id}"
    if checksum if declared is None else declared:
        now = clock.now()
        digest = hashlib.sha256(body).hexdigest()
        upload = NewUpload(
            upload_id, "bench.bin", len(body), "application/x", digest, key, BUCKET, now, "bench", "bench"
        )
        deps.repository().register_upload(upload, now)
    extra = {"ChecksumAlgorithm": "SHA256"} if checksum else {}
    bench.s3.put_object(Bucket=BUCKET, Key=key, Body=body, **extra)
    return key


# ---------------------------------------------------------------------- target 6
class LambdaContext:
    function_name = "bench"
    memory_limit_in_mb = 256
    invoked_function_arn = "arn:aws:lambda:us-east-1:123456789012:function:bench"
    aws_request_id = "00000000-0000-0000-0000-000000000000"
    log_group_name = "/aws/lambda/bench"
    log_stream_name = "bench"

    @staticmethod
    def get_remaining_time_in_millis() -> int:
        return 10_000


BENCH_CLAIMS = {
    "sub": "00000000-0000-4000-8000-0000000be4c4",
    "username": "bench",
    "cognito:groups": "[admins tenant-bench]",
    "client_id": "bench",
    "token_use": "access",
    "scope": "aws.cognito.signin.user.admin",
}


def api_event(method: str, path: str, query: dict[str, str] | None = None, body: Any = None) -> dict[str, Any]:
    """An API Gateway HTTP API (payload 2.0) event, as the bench's admin of tenant `bench` (its rows seed file
    records directly, which only an admin's global view reads)."""
    route = path
    params = None
    for prefix in ("/metadata/", "/download/"):
        if path.startswith(prefix):
            route, params = prefix + "{id}", {"id": path[len(prefix) :]}
    headers = {"host": "api.local", "origin": "http://localhost"}
    return http_api_event(
        method, path, route=route, params=params, query=query, body=body, headers=headers, claims=BENCH_CLAIMS
    )


def _drop_files(bench: Bench, count: int, start: int = 0) -> None:
    """Remove what _fill_files wrote (moto's transactions slow down as tables grow: later rows need it small)."""
    batch: list[dict[str, Any]] = []
    for index in range(start, start + count):
        batch.append({"DeleteRequest": {"Key": {"hash": {"S": f"{index:064x}"}}}})
        if len(batch) == 25 or index == start + count - 1:
            bench.ddb.batch_write_item(RequestItems={FILES_TABLE: batch})
            batch = []


def _fill_files(bench: Bench, count: int, start: int) -> None:
    """`count` file records straight into the table (what 10,000 ingests would leave), 25 per request."""
    batch: list[dict[str, Any]] = []
    for index in range(start, start + count):
        digest = f"{index:064x}"
        item = {
            "hash": {"S": digest},
            "size": {"N": str(1000 + index)},
            "content_type": {"S": "application/octet-stream"},
            "filename": {"S": f"file-{index}.bin"},
            "s3_key": {"S": f"uploads/{index:032x}"},
            "bucket": {"S": BUCKET},
            "created_at": {"S": "2026-11-22T03:00:00Z"},
            "last_upload_at": {"S": "2026-11-22T03:00:00Z"},
            "upload_count": {"N": "1"},
        }
        batch.append({"PutRequest": {"Item": item}})
        if len(batch) == 25:
            bench.ddb.batch_write_item(RequestItems={FILES_TABLE: batch})
            batch = []
    if batch:
        bench.ddb.batch_write_item(RequestItems={FILES_TABLE: batch})


def stats(bench: Bench) -> list[Row]:
    from dfd.handlers import admin_hashes, admin_stats

    options = bench.options
    requests = options.runs(60, 25)
    context: Any = LambdaContext()
    # (files, endpoint) -> latencies and DynamoDB requests per call. 10 files, 10,000 files, then 10 files again:
    # the baseline is both small phases together, so drift on this shared machine (and the emulator's state after
    # the earlier rows) weighs on both sides alike
    latencies: dict[tuple[int, str], list[float]] = defaultdict(list)
    requests_per_call: dict[tuple[int, str], list[int]] = defaultdict(list)
    operations: dict[tuple[int, str], list[str]] = {}
    for phase, files in enumerate((10, 10_000, 10)):
        if phase == 0:
            _fill_files(bench, files, 0)
        elif files > 10:
            _fill_files(bench, files - 10, 10)
        else:
            _drop_files(bench, 10_000 - 10, 10)
        for name, handler, event in (
            ("stats", admin_stats.handler, api_event("GET", "/admin/stats")),
            ("hashes", admin_hashes.handler, api_event("GET", "/admin/hashes", {"limit": "50"})),
        ):
            for _ in range(3):
                handler(event, context)  # warm
            with counting(*dfd_clients()) as counter:
                for _ in range(requests):
                    counter.reset()
                    seconds, response = timed(partial(handler, event, context))
                    assert response["statusCode"] == 200, response
                    latencies[files, name].append(seconds)
                    requests_per_call[files, name].append(counter.count("dynamodb:"))
                    operations[files, name] = sorted(counter.calls)
    measured: dict[int, dict[str, Any]] = {
        files: {
            name: {
                "ms": median(latencies[files, name]) * 1000,
                "dynamodb_requests": max(requests_per_call[files, name]),
                "operations": operations[files, name],
            }
            for name in ("stats", "hashes")
        }
        for files in (10, 10_000)
    }
    _drop_files(bench, 10)
    stats_small = measured[10]["stats"]
    stats_large = measured[10_000]["stats"]
    hashes_small = measured[10]["hashes"]
    hashes_large = measured[10_000]["hashes"]
    ratio = stats_large["ms"] / stats_small["ms"]
    return [
        Row(
            "6",
            "GET /admin/stats, 10,000 files (handler in-process)",
            stats_large["ms"],
            "ms",
            stats_small["ms"],
            "with 10 files, before and after",
            ratio,
            "1 request, ≤ 1.2x",
            ratio <= 1.2 and stats_large["dynamodb_requests"] == 1 and stats_small["dynamodb_requests"] == 1,
            f"DynamoDB requests per call: {stats_large['dynamodb_requests']} ({', '.join(stats_large['operations'])})",
            {str(files): values for files, values in measured.items()},
        ),
        Row(
            "6",
            "GET /admin/hashes?limit=50, 10,000 files",
            hashes_large["ms"],
            "ms",
            hashes_small["ms"],
            "with 10 files",
            hashes_large["ms"] / hashes_small["ms"],
            "1 page read per request",
            hashes_large["dynamodb_requests"] == 1 and hashes_small["dynamodb_requests"] == 1,
            f"DynamoDB requests per call: {hashes_large['dynamodb_requests']} ({', '.join(hashes_large['operations'])})"
            + "; moto's Scan walks the table, DynamoDB reads one page",
        ),
        *history_rows(bench),
    ]


def history_rows(bench: Bench) -> list[Row]:
    """GET /admin/stats/history over 400 days at 1-day steps and over 1 day at 5-minute steps, each against 1 hour
    at 5-minute steps, in the same run: a call reads one series with one Query, its time grows with the points."""
    from dfd import deps
    from dfd.handlers import admin_stats
    from dfd.history.service import take_snapshot

    requests = bench.options.runs(40, 15)
    context: Any = LambdaContext()
    end = datetime(2026, 11, 1, tzinfo=UTC)
    repo = deps.repository()
    for day in range(401):  # the daily points of 400 days, and the baseline's before the first
        take_snapshot(repo, end - timedelta(days=day, seconds=1))
    for tick in range(290):  # the last day's 5-minute points
        take_snapshot(repo, end - timedelta(seconds=300 * tick + 1))
    stop = int(end.timestamp())
    cases = {
        "hour": {"from": str(stop - 3600), "to": str(stop), "step": "300"},
        "day": {"from": str(stop - 86400), "to": str(stop), "step": "300"},
        "400 days": {"from": str(stop - 400 * 86400), "to": str(stop), "step": "86400"},
    }
    ms: dict[str, float] = {}
    points: dict[str, int] = {}
    for rounds in range(2):  # the baseline measured before and after, so drift weighs on both sides
        for name, query in cases.items():
            event = api_event("GET", "/admin/stats/history", query)
            for _ in range(3):
                admin_stats.handler(event, context)  # warm
            latencies = []
            for _ in range(requests):
                seconds, response = timed(partial(admin_stats.handler, event, context))
                assert response["statusCode"] == 200, response
                latencies.append(seconds)
            points[name] = len(json.loads(response["body"])["points"])
            ms[f"{name} {rounds}"] = median(latencies) * 1000
    baseline = (ms["hour 0"] + ms["hour 1"]) / 2
    rows = []
    for name, label in (("400 days", "400 days at 1-day steps"), ("day", "1 day at 5-minute steps")):
        value = (ms[f"{name} 0"] + ms[f"{name} 1"]) / 2
        rows.append(
            Row(
                "6",
                f"history call, {label} ({points[name]} points, GET /admin/stats/history)",
                value,
                "ms",
                baseline,
                f"1 hour at 5-minute steps ({points['hour']} points), same run",
                value / baseline,
                "≤ 3x",
                value / baseline <= 3,
                "one Query of one series (`t`, one string a point, projected); moto's Query is slower than DynamoDB's",
                {"ms": ms, "points": points},
            )
        )
    return rows
