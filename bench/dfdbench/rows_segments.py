"""Target 19: hashing across invocations (dfd.ingest.segments; docs/design/segments.md).

- **Speed**: the same object on the emulator, in the same run, hashed inline by the ingest (its stream) and by the
  segment path with its byte budget lowered so that it takes 8 segments: the ingest's hand-off (its state begun,
  its execution started), each segment as SegmentFunction runs it, the last one's commit through the same decision.
  Interleaved runs, medians; the ratio is inline time / segmented time.
- **Cost**: every request of the segment path counted on the emulator (dfd's clients metered by dfdbench.cost's
  rules) at a scaled-down size, split into what the path does once (the hand-off, the first segment's checksum
  HEAD, the commit) and per segment and per window. :func:`plan` is the code's own arithmetic (Segments.hash_segment's
  windows, ObjectStore.stream_range's ranged GETs); it must give exactly the counted GETs, windows and segments at
  the scaled size (the row's `met`; tests/integration/test_bench_segments.py holds it at other sizes), and then
  gives them at 1 TiB and 48.8 TiB with the defaults (SEGMENT_BYTES, WINDOW_BYTES, PARALLEL_PART_BYTES). Priced
  with the dated price file: Lambda requests and GB-seconds (SegmentFunction's memory, each segment's bytes at the
  rate measured by the speed row), S3 GETs and HEADs, DynamoDB units, Step Functions transitions (the states the
  ASL enters: walked from statemachine/segments.asl.json with the segments' answers). Not counted: the upload's own
  requests (row 17's paths), logs, data transfer.
- **Time on paper** for 48.8 TiB: its bytes at the measured segmented rate.
"""

from __future__ import annotations

import json
import math
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from dfdbench import cost
from dfdbench.harness import BUCKET, EVENTS_TABLE, GIB, MIB, Bench, Row, log, median
from dfdlocal.template import TEMPLATE, load_template, read_model

ROOT = Path(__file__).resolve().parents[2]
ASL = ROOT / "statemachine" / "segments.asl.json"
TIB = 1024 * GIB
LARGEST = 10_000 * 5 * GIB  # S3's largest object: 10,000 parts of 5 GiB (48.8 TiB)
SIZES = {"1 TiB": TIB, "48.8 TiB": LARGEST}
SPEED_SIZE, SPEED_SEGMENTS = 2 * GIB, 8  # segments of 256 MiB: 720x fewer bytes than the default budget
# the counted run: a scaled-down size, budget, window and part (part: PARALLEL_PART_BYTES's least), cut unevenly
COUNTED = {"size": 9 * 5 * MIB + 3 * MIB + 37, "segment_bytes": 5 * MIB, "window": 2 * MIB + 512 * 1024, "part": MIB}
REMAINING_SECONDS = 900.0  # what Lambda reports to a fresh SegmentFunction invocation (its Timeout)


@dataclass(frozen=True)
class Plan:
    """What the segment path does for one object: segments (invocations), windows (looks at the clock), ranged GETs."""

    segments: int
    windows: int
    gets: int


def plan(size: int, segment_bytes: int, window: int, part: int, workers: int) -> Plan:
    """The code's arithmetic for an object of `size` bytes when the byte budget, not the clock, ends each segment:
    Segments.hash_segment's steps (a window, cut at the budget and the object's end) and the GETs
    ObjectStore.stream_range sends for a step (one up to a part, else one per part)."""
    window = min(window, segment_bytes)
    segments = windows = gets = 0
    offset = 0
    while offset < size:
        segments += 1
        start = offset
        while offset < size and (step := min(window, size - offset, segment_bytes - (offset - start))) > 0:
            windows += 1
            gets += 1 if step <= part or workers < 2 else math.ceil(step / part)
            offset += step
    return Plan(segments, windows, gets)


def transitions(answers: list[str]) -> int:
    """The states statemachine/segments.asl.json enters for an execution whose segments answer `answers` in turn
    (Step Functions bills each state entered)."""
    definition = json.loads(ASL.read_text(encoding="utf-8"))
    states, name = definition["States"], definition["StartAt"]
    entered, answer, outcome = 0, iter(answers), ""
    while True:
        state = states[name]
        entered += 1
        if state["Type"] == "Task":
            outcome = next(answer)
            name = state["Next"]
        elif state["Type"] == "Choice":
            chosen = [
                c["Next"] for c in state["Choices"] if c["Variable"] == "$.outcome" and c["StringEquals"] == outcome
            ]
            name = chosen[0] if chosen else state["Default"]
        else:
            return entered


def segment_memory_mb() -> int:
    """SegmentFunction's MemorySize in template.yaml; until the template defines it, the ingest's (its reads and
    hash are the ingest's)."""
    template = load_template(TEMPLATE)
    resources, parameters = template["Resources"], template["Parameters"]
    props = (resources.get("SegmentFunction") or resources["IngestFunction"])["Properties"]
    memory = props.get("MemorySize", template["Globals"]["Function"].get("MemorySize"))
    if isinstance(memory, dict) and "Ref" in memory:
        memory = parameters[memory["Ref"]]["Default"]
    return int(memory)


# ---------------------------------------------------------------------- the path, as the functions run it
class SegmentPath:
    """The ingest with the hand-off wired to a segment workflow on the emulator, and SegmentFunction's loop, with
    the given budget, window and part size."""

    def __init__(self, bench: Bench, *, segment_bytes: int, window: int | None = None, part: int | None = None) -> None:
        import dataclasses

        from dfd import deps
        from dfd.adapters import aws
        from dfd.adapters.dynamo.hashing import DynamoHashingStore
        from dfd.adapters.s3 import ObjectStore, ReadTuning
        from dfd.adapters.stepfunctions import SegmentWorkflow
        from dfd.core.config import settings as functions_settings
        from dfd.ingest.segments import WINDOW_BYTES, Segments
        from dfd.ingest.service import Handoff, Ingestor

        self.bench = bench
        settings = functions_settings()
        if part is not None:
            settings = dataclasses.replace(settings, parallel_part_size=part)
        self.tuning = ReadTuning.from_settings(settings)
        objects = ObjectStore(aws.s3_ingest(), aws.s3(), tuning=self.tuning)
        store = DynamoHashingStore(aws.dynamodb(), settings.events_table, settings.event_ttl_days)
        self.segments = Segments(store, objects, segment_bytes=segment_bytes, window=window or WINDOW_BYTES)
        sfn = bench.client("stepfunctions")
        definition = ASL.read_text(encoding="utf-8").replace("${Partition}", "aws")
        definition = definition.replace("${SegmentFunctionArn}", "arn:aws:lambda:us-east-1:123456789012:function:s")
        self.arn = sfn.create_state_machine(
            name=f"dfd-segments-bench-{time.monotonic_ns()}",
            definition=definition,
            roleArn="arn:aws:iam::123456789012:role/dfd-segments",
        )["stateMachineArn"]
        handoff = Handoff(0, self.segments, SegmentWorkflow(aws.stepfunctions(), self.arn))
        self.ingestor = Ingestor(settings, deps.repository(), objects, handoff=handoff)

    def hand_off(self, key: str) -> str:
        """The ingest of `key`: handed off (never hashed inline); its event key."""
        from dfd.core.notifications import ObjectRef

        result = self.ingestor.ingest(ObjectRef(BUCKET, key))
        if str(result.outcome) != "hashing" or result.event_key is None:
            raise RuntimeError(f"the ingest of {key} was {result.outcome}, expected hashing: {result.log_keys()}")
        return str(result.event_key)

    def segment(self, event_key: str) -> Any:
        """One SegmentFunction invocation's segment (dfd.handlers.segment.run_segment's first half)."""
        return self.segments.hash_segment(event_key, lambda: REMAINING_SECONDS)

    def commit(self, segment: Any) -> Any:
        """The last segment's commit (run_segment's second half)."""
        return self.ingestor.commit_hashed(
            segment.version, segment.digest, crc64nvme_mismatch=segment.crc64nvme_mismatch
        )

    def run(self, key: str, between: Callable[[str], None] = lambda _: None) -> tuple[Any, list[str]]:
        """Hand-off, segments until done, commit: the ingest's result and the segments' answers. `between(phase)`
        runs after the hand-off ("handoff"), after each segment but the last ("segment") and after the last
        segment ("last"), before its commit."""
        event_key = self.hand_off(key)
        between("handoff")
        answers: list[str] = []
        while True:
            segment = self.segment(event_key)
            answers.append(str(segment.outcome))
            if str(segment.outcome) != "more":
                break
            between("segment")
            if len(answers) > 100_000:
                raise RuntimeError("the segments never finished")
        if str(segment.outcome) != "done":
            raise RuntimeError(f"the segments of {key} ended {segment.outcome}")
        between("last")
        return self.commit(segment), answers

    def forget(self, key: str, result: Any) -> None:
        """Forget what the path recorded (as Bench.forget), its hashing state and progress items too."""
        self.bench.forget(result)
        if result.event_key:
            for name in (f"hashing#{result.event_key}", f"hashing-key#{BUCKET}/{key}"):
                self.bench.ddb.delete_item(TableName=EVENTS_TABLE, Key={"event_key": {"S": name}})


def put_with_crc64nvme(bench: Bench, size: int) -> str:
    """PUT `size` bytes of unique content under a fresh uploads/<id> key with the full-object CRC64NVME an SDK with
    the CRT sends (x-amz-sdk-checksum-algorithm CRC64NVME; S3 stores one by default too): the segments compute and
    compare it in the same pass."""
    import hashlib
    import random

    from dfd.core.ids import new_upload_id
    from dfd.ingest import crc64nvme
    from dfdbench.harness import content

    key = f"uploads/{new_upload_id(checksummed=False)}"
    body = content(size, random.getrandbits(63))
    bench.digests[key] = hashlib.sha256(body).hexdigest()
    checksum = crc64nvme.to_b64(crc64nvme.update(body))

    def add(request: Any, **_: Any) -> None:
        request.headers["x-amz-sdk-checksum-algorithm"] = "CRC64NVME"
        request.headers["x-amz-checksum-crc64nvme"] = checksum

    events = bench.s3.meta.events
    events.register_first("before-sign.s3.PutObject", add, unique_id="bench-crc64nvme")
    try:
        bench.s3.put_object(Bucket=BUCKET, Key=key, Body=body)
    finally:
        events.unregister("before-sign.s3.PutObject", unique_id="bench-crc64nvme")
    stored = bench.s3.head_object(Bucket=BUCKET, Key=key, ChecksumMode="ENABLED").get("ChecksumCRC64NVME")
    if stored != checksum:
        raise RuntimeError(f"the emulator stored CRC64NVME {stored}, not {checksum}")
    return key


def _inline(bench: Bench, key: str, ingestor: Any = None) -> tuple[float, Any]:
    from dfdbench.rows_io import ingest_once

    return ingest_once(bench, key, ingestor)


def ranged_ingestor() -> Any:
    """The ingest reading as it does from S3: its probe finds one stream slower than the hash (S3 gives ~100 MB/s a
    connection), so ranged GETs join it — on the emulator, whose one stream is fast, the probe's bar is raised."""
    import dataclasses

    from dfd import deps
    from dfd.adapters import aws
    from dfd.adapters.s3 import ObjectStore, ReadTuning
    from dfd.core.config import settings
    from dfd.ingest.service import Ingestor

    tuning = dataclasses.replace(ReadTuning.from_settings(settings()), fast_stream=math.inf)
    return Ingestor(settings(), deps.repository(), ObjectStore(aws.s3_ingest(), aws.s3(), tuning=tuning))


def _segmented(bench: Bench, path: SegmentPath, key: str) -> tuple[float, list[str]]:
    started = time.perf_counter()
    result, answers = path.run(key)
    seconds = time.perf_counter() - started
    if str(result.outcome) != "stored" or result.hash != bench.digests[key]:
        raise RuntimeError(f"the segmented ingest of {key} was {result.outcome} {result.hash}: {result.log_keys()}")
    path.forget(key, result)
    return seconds, answers


def speed(bench: Bench) -> tuple[Row, float]:
    """The same object inline and in segments, interleaved; the row and the segmented rate (bytes/s)."""
    options = bench.options
    size = SPEED_SIZE
    key = put_with_crc64nvme(bench, size)
    path = SegmentPath(bench, segment_bytes=size // SPEED_SEGMENTS)
    ranged = ranged_ingestor()
    _inline(bench, key)  # connections and first-call costs out of the way, for all three
    _inline(bench, key, ranged)
    _, answers = _segmented(bench, path, key)
    if len(answers) < SPEED_SEGMENTS:
        raise RuntimeError(f"{len(answers)} segments, expected at least {SPEED_SEGMENTS}")
    times: dict[str, list[float]] = {"ranged": [], "segments": [], "stream": []}
    for run in range(options.runs(5, 3)):
        order = list(times) if run % 2 == 0 else list(reversed(times))
        for what in order:
            if what == "segments":
                times[what].append(_segmented(bench, path, key)[0])
            else:
                times[what].append(_inline(bench, key, ranged if what == "ranged" else None)[0])
        log(options, f"run {run}: " + ", ".join(f"{k} {size / v[-1] / 1e6:.0f} MB/s" for k, v in times.items()))
    bench.delete(key)
    inline_rate, segmented_rate = size / median(times["ranged"]), size / median(times["segments"])
    ratio = median(times["ranged"]) / median(times["segments"])
    stream_rate = size / median(times["stream"])
    row = Row(
        "19",
        f"segmented hashing vs inline, {size // MIB} MiB object in {len(answers)} segments, local emulator",
        segmented_rate / 1e6,
        "MB/s",
        inline_rate / 1e6,
        "the ingest's inline hash of the same object, ranged GETs as from S3",
        ratio,
        "≥ 0.9x inline",
        ratio >= 0.9,
        f"hand-off + {len(answers)} segments (ranged GETs, {path.tuning.workers} in flight; the state read and "
        f"written per segment; S3's CRC64NVME read once and compared) + the commit, against one ingest reading "
        f"the same ranges; the ingest's one stream (what it picks on this fast emulator): {stream_rate / 1e6:.0f} "
        f"MB/s ({median(times['stream']) / median(times['segments']):.2f}x); medians of {len(times['segments'])}",
        {"seconds": times, "segments": len(answers), "size": size},
    )
    return row, segmented_rate


# ---------------------------------------------------------------------- counted requests, extrapolated
def counted(bench: Bench, shape: dict[str, int] = COUNTED) -> dict[str, Any]:
    """The segment path's requests at a scaled-down size (`shape`: size, segment_bytes, window, part): what it does
    once (the hand-off, the commit), in each segment, and the ranged GETs against the code's plan."""
    from dfd.adapters import aws

    key = bench.put(shape["size"])
    path = SegmentPath(bench, segment_bytes=shape["segment_bytes"], window=shape["window"], part=shape["part"])
    meter = cost.Meter(bench.ddb, cost.tables_of(read_model(TEMPLATE, bench.url)))
    meter.attach(aws.dynamodb(), aws.s3(), aws.s3_ingest(), aws.stepfunctions())
    phases: list[tuple[str, cost.Usage]] = []
    try:
        meter.take()
        result, answers = path.run(key, lambda phase: phases.append((phase, meter.take())))
        phases.append(("commit", meter.take()))
    finally:
        meter.detach()
    if str(result.outcome) != "stored":
        raise RuntimeError(f"the counted segmented ingest was {result.outcome}: {result.log_keys()}")
    path.forget(key, result)
    bench.delete(key)
    segment_usages = [usage for phase, usage in phases if phase in ("segment", "last")]
    gets = sum(usage.calls["s3:GetObject"] for usage in segment_usages)
    expected = plan(shape["size"], shape["segment_bytes"], shape["window"], shape["part"], path.tuning.workers)
    first, rest = segment_usages[0], segment_usages[1:]
    return {
        "shape": shape,
        "segments": len(answers),
        "gets": gets,
        "plan": expected,
        "answers": answers,
        "handoff": phases[0][1],
        "first": first,
        "per_segment": rest,
        "commit": phases[-1][1],
    }


def _calls(usage: cost.Usage) -> dict[str, float]:
    return {name: float(n) for name, n in sorted(usage.calls.items())}


def extrapolate(measured: dict[str, Any], size: int, rate: float) -> dict[str, Any]:
    """The path's requests and dollars for an object of `size` bytes: the counted once-per-object and per-segment
    requests, the GETs of the code's plan at the defaults, each segment's seconds at `rate`."""
    from dfd.core.config import PARALLEL_PART_SIZE, PARALLEL_WORKERS
    from dfd.ingest.segments import RESERVE_SECONDS, SEGMENT_BYTES, WINDOW_BYTES

    p = cost.prices()
    # a segment ends at its byte budget, or sooner at the clock: another window starts while it fits, at `rate`,
    # in the invocation's time less the reserve
    timed_windows = max(1, int((REMAINING_SECONDS - RESERVE_SECONDS) * rate // WINDOW_BYTES))
    budget = min(SEGMENT_BYTES, timed_windows * WINDOW_BYTES)
    chosen = plan(size, budget, WINDOW_BYTES, PARALLEL_PART_SIZE, PARALLEL_WORKERS)
    per_segment: list[cost.Usage] = measured["per_segment"]
    # every segment after the first makes the same calls but its GETs: one state read, its writes
    steady = Counter({k: v for k, v in per_segment[0].calls.items() if k != "s3:GetObject"})
    for usage in per_segment[1:]:
        if Counter({k: v for k, v in usage.calls.items() if k != "s3:GetObject"}) != steady:
            raise RuntimeError(f"segments made different calls: {_calls(usage)} vs {dict(steady)}")
    first: cost.Usage = measured["first"]
    once = Counter(measured["handoff"].calls) + Counter(measured["commit"].calls)
    once += Counter({k: v - steady.get(k, 0) for k, v in first.calls.items() if k != "s3:GetObject"})
    calls = Counter({k: v * chosen.segments for k, v in steady.items()}) + once
    calls["s3:GetObject"] += chosen.gets
    read_units = measured["handoff"].read_units + measured["commit"].read_units + first.read_units
    read_units += per_segment[0].read_units * (chosen.segments - 1)
    write_units = measured["handoff"].all_write_units + measured["commit"].all_write_units + first.all_write_units
    write_units += per_segment[0].all_write_units * (chosen.segments - 1)
    answers = ["more"] * (chosen.segments - 1) + ["done"]
    entered = transitions(answers)
    memory_gb = segment_memory_mb() / 1024
    seconds = size / rate
    s3_tier2 = sum(n for name, n in calls.items() if name.startswith("s3:") and name.split(":")[1] not in cost.S3_TIER1)
    s3_tier1 = sum(n for name, n in calls.items() if name.startswith("s3:") and name.split(":")[1] in cost.S3_TIER1)
    invocations = chosen.segments + 1  # the segments, and the ingest that handed it off
    dollars = {
        "lambda": invocations * p["lambda"]["request"] + seconds * memory_gb * p["lambda"]["gb_second_arm64"],
        "s3": s3_tier2 * p["s3"]["tier2_request"] + s3_tier1 * p["s3"]["tier1_request"],
        "dynamodb": write_units * p["dynamodb"]["write_request_unit"] + read_units * p["dynamodb"]["read_request_unit"],
        "step_functions": entered * p["step_functions"]["standard_transition"],
    }
    return {
        "size": size,
        "segment_bytes": budget,
        "segments": chosen.segments,
        "windows": chosen.windows,
        "invocations": invocations,
        "gets": calls["s3:GetObject"],
        "heads": calls["s3:HeadObject"],
        "transitions": entered,
        "read_units": read_units,
        "write_units": write_units,
        "seconds": seconds,
        "gb_seconds": seconds * memory_gb,
        "memory_mb": segment_memory_mb(),
        "calls": dict(sorted(calls.items())),
        "dollars": dollars,
        "total": sum(dollars.values()),
        "prices": p["date"],
    }


def rows(bench: Bench) -> list[Row]:
    speed_row, rate = speed(bench)
    measured = counted(bench)
    exact = (measured["plan"].segments, measured["plan"].gets) == (measured["segments"], measured["gets"])
    shape = measured["shape"]
    out = [speed_row]
    for label, size in SIZES.items():
        figure = extrapolate(measured, size, rate)
        d = figure["dollars"]
        out.append(
            Row(
                "19",
                f"segment path cost to ingest {label}",
                figure["total"],
                "$",
                goal="extrapolated = counted (scaled-down run)",
                met=exact,
                note=(
                    f"{figure['segments']:,} segments; {figure['invocations']:,} invocations, "
                    f"{figure['gb_seconds']:,.0f} GB-s at {figure['memory_mb']} MB (${d['lambda']:.2f}); "
                    f"{figure['gets']:,} GETs + {figure['heads']} HEADs (${d['s3']:.2f}); "
                    f"{figure['transitions']:,} transitions (${d['step_functions']:.3f}); "
                    f"{figure['read_units']:,.0f} read + {figure['write_units']:,.0f} write units "
                    f"(${d['dynamodb']:.4f}); prices {figure['prices']}"
                ),
                details=figure
                | {
                    "counted": {
                        "shape": shape,
                        "segments": measured["segments"],
                        "gets": measured["gets"],
                        "plan": asdict(measured["plan"]),
                        "handoff": _calls(measured["handoff"]),
                        "first_segment": _calls(measured["first"]),
                        "segment": _calls(measured["per_segment"][0]),
                        "commit": _calls(measured["commit"]),
                    }
                },
            )
        )
    hours = LARGEST / rate / 3600
    out.append(
        Row(
            "19",
            "time to hash 48.8 TiB in segments, on paper",
            hours,
            "h",
            goal="",
            met=None,
            note=(
                f"{LARGEST / 1e12:.1f} TB at the segmented rate measured above ({rate / 1e6:.0f} MB/s, local "
                f"emulator), {extrapolate(measured, LARGEST, rate)['segments']} segments in sequence"
            ),
            details={"bytes": LARGEST, "rate": rate, "seconds": LARGEST / rate},
        )
    )
    return out
