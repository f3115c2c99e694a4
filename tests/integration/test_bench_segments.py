"""Bench row 19's counts (not its times): the segment path's requests per segment are a budget the suite holds, and
the plan the row extrapolates with (dfdbench.rows_segments.plan) is exactly what the code does, at sizes and cuts
other than the row's own."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from dfdbench.harness import MIB, Bench, Options
from dfdbench.rows_segments import COUNTED, counted, plan, transitions

KIB = 1024

# what one segment may send: the state read (consistent GetItem), its write and the key's progress item (two
# PutItem), and its ranged GETs; the first segment also reads S3's checksum (one HeadObject)
SEGMENT_BUDGET = {"dynamodb:GetItem": 1, "dynamodb:PutItem": 2}
UNITS_PER_SEGMENT = {"read": 1.0, "write": 2.0}  # items under 1 KB, the read strongly consistent


@pytest.fixture(scope="module")
def bench() -> Iterator[Bench]:
    made = Bench(Options(quick=True))
    try:
        yield made
    finally:
        made.close()


def _calls(usage: Any) -> dict[str, int]:
    return {name: int(n) for name, n in usage.calls.items() if n}


@pytest.mark.parametrize(
    "shape",
    [
        COUNTED,
        {"size": 4 * MIB, "segment_bytes": MIB, "window": MIB, "part": MIB},  # every cut on a boundary
        {"size": 3 * MIB + 1, "segment_bytes": 2 * MIB + 64, "window": 3 * MIB, "part": MIB},  # window > budget
        {"size": 7 * MIB + 5, "segment_bytes": 3 * MIB, "window": 640 * KIB, "part": MIB},  # one GET a window
    ],
    ids=["row", "even", "window-over-budget", "small-windows"],
)
def test_the_segment_path_holds_its_request_budget_and_the_plan_is_exact(bench: Bench, shape: dict[str, int]) -> None:
    measured = counted(bench, shape)
    expected = plan(shape["size"], shape["segment_bytes"], shape["window"], shape["part"], 8)
    assert (measured["segments"], measured["gets"]) == (expected.segments, expected.gets)
    assert measured["plan"] == expected
    first, rest = measured["first"], measured["per_segment"]
    assert len(rest) == expected.segments - 1
    for usage in [first, *rest]:
        calls = _calls(usage)
        calls.pop("s3:GetObject", None)
        if usage is first:
            assert calls.pop("s3:HeadObject") == 1  # S3's CRC64NVME, read once
        assert calls == SEGMENT_BUDGET, calls
        assert usage.read_units <= UNITS_PER_SEGMENT["read"] and usage.all_write_units <= UNITS_PER_SEGMENT["write"]
    # the hand-off: one GetObject identifies the version, the state begun (put, read back), one execution started
    handoff = _calls(measured["handoff"])
    assert handoff == {"s3:GetObject": 1, "dynamodb:PutItem": 2, "dynamodb:GetItem": 1, "states:StartExecution": 1}
    assert measured["answers"] == ["more"] * (expected.segments - 1) + ["done"]


def test_the_workflow_enters_two_states_a_segment_and_its_end() -> None:
    assert transitions(["done"]) == 3
    assert transitions(["more"] * 277 + ["done"]) == 2 * 278 + 1


def test_the_plan_at_s3s_largest_object_with_the_defaults() -> None:
    from dfd.core.config import PARALLEL_PART_SIZE, PARALLEL_WORKERS
    from dfd.ingest.segments import SEGMENT_BYTES, WINDOW_BYTES

    largest = plan(10_000 * 5 * 1024 * MIB, SEGMENT_BYTES, WINDOW_BYTES, PARALLEL_PART_SIZE, PARALLEL_WORKERS)
    # 180 GiB a segment, 512 MiB windows of 86 ranged GETs of at most 6 MiB
    assert (largest.segments, largest.windows, largest.gets) == (278, 100_000, 8_600_000)
