"""The local stack's queue snapshots (dfdlocal.persist.QueueSnapshots): every queue in one file, put back after a
restart; a queue pickled again only when its messages changed (dfd-events holds every event the stack published:
pickling it every second grew with the stack's age, docs/performance.md, target 8); a file of the earlier format
(the messages themselves) still restores."""

from __future__ import annotations

import pickle
from pathlib import Path
from typing import Any

import pytest

from dfdlocal import persist


def _pickled_lists(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The lengths of the message lists persist pickles from now on."""
    lengths: list[int] = []
    dumps = pickle.dumps

    def counting(value: Any, *args: Any, **kwargs: Any) -> bytes:
        if isinstance(value, list):
            lengths.append(len(value))
        return dumps(value, *args, **kwargs)

    monkeypatch.setattr(pickle, "dumps", counting)  # the module persist uses
    return lengths


def test_only_a_changed_queue_is_pickled_again(sqs: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    big = sqs.create_queue(QueueName="big")["QueueUrl"]
    small = sqs.create_queue(QueueName="small")["QueueUrl"]
    for index in range(30):
        sqs.send_message(QueueUrl=big, MessageBody=f"b{index}")
    snapshots = persist.QueueSnapshots(tmp_path, clock=lambda: 0.0)  # no look takes time: every queue is due
    pickled = _pickled_lists(monkeypatch)
    snapshots.save()
    assert sorted(pickled) == [0, 30]
    pickled.clear()
    sqs.send_message(QueueUrl=small, MessageBody="s")
    snapshots.save()
    assert pickled == [1]  # the big queue's bytes are the ones kept
    pickled.clear()
    message = sqs.receive_message(QueueUrl=big)["Messages"][0]
    snapshots.save()
    assert pickled == [30]  # a receive counts: the message's receive count is kept
    pickled.clear()
    sqs.delete_message(QueueUrl=big, ReceiptHandle=message["ReceiptHandle"])
    snapshots.save()
    assert pickled == [29]
    pickled.clear()
    snapshots.save()
    assert pickled == []


def test_the_file_restores_every_queue(sqs: Any, tmp_path: Path) -> None:
    urls = {name: sqs.create_queue(QueueName=name)["QueueUrl"] for name in ("one", "two")}
    for name, url in urls.items():
        for index in range(3):
            sqs.send_message(QueueUrl=url, MessageBody=f"{name}{index}")
    persist.QueueSnapshots(tmp_path).save()
    for url in urls.values():
        sqs.purge_queue(QueueUrl=url)
    assert persist.restore_queues(tmp_path) == 6
    bodies = {
        name: sorted(m["Body"] for m in sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10)["Messages"])
        for name, url in urls.items()
    }
    assert bodies == {"one": ["one0", "one1", "one2"], "two": ["two0", "two1", "two2"]}


def test_a_file_of_the_earlier_format_restores(sqs: Any, tmp_path: Path) -> None:
    url = sqs.create_queue(QueueName="old")["QueueUrl"]
    sqs.send_message(QueueUrl=url, MessageBody="kept")
    (tmp_path / persist.SQS).write_bytes(pickle.dumps(persist.snapshot_queues(), protocol=5))  # lists, not bytes
    sqs.purge_queue(QueueUrl=url)
    assert persist.restore_queues(tmp_path) == 1
    assert [m["Body"] for m in sqs.receive_message(QueueUrl=url)["Messages"]] == ["kept"]


class _Timed(list):  # type: ignore[type-arg]
    """A queue's messages whose iteration (the snapshot's look at them) calls `on_look`; pickled as a plain list."""

    def __init__(self, messages: list[Any], on_look: Any) -> None:
        super().__init__(messages)
        self.on_look = on_look

    def __iter__(self) -> Any:
        self.on_look()
        return super().__iter__()

    def __reduce_ex__(self, protocol: Any) -> Any:
        return (list, (list(super().__iter__()),))


def test_a_long_queue_is_looked_at_only_every_pace_times_its_last_look(
    sqs: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A queue whose look took D is not looked at again before PACE * D; a short one is, every round; stop's save
    (whole) writes every queue as it is."""
    long = sqs.create_queue(QueueName="long")["QueueUrl"]
    short = sqs.create_queue(QueueName="short")["QueueUrl"]
    sqs.send_message(QueueUrl=long, MessageBody="first")
    now = [0.0]
    took = {"long": 0.2, "short": 0.0}  # seconds a look at each takes
    looked: list[str] = []

    def look(name: str) -> Any:
        def on_look() -> None:
            looked.append(name)
            now[0] += took[name]

        return on_look

    real = persist.snapshot_queues
    monkeypatch.setattr(persist, "snapshot_queues", lambda: {name: _Timed(m, look(name)) for name, m in real().items()})
    snapshots = persist.QueueSnapshots(tmp_path, clock=lambda: now[0])

    def kept() -> dict[str, int]:
        parts = pickle.loads((tmp_path / persist.SQS).read_bytes())  # noqa: S301 - the test's own file
        return {name: len(pickle.loads(data)) for name, data in parts.items() if name != persist.COVERED}  # noqa: S301

    snapshots.save()
    assert sorted(looked) == ["long", "short"]
    for _ in range(3):  # 0.5 s apart: the long queue's look took 0.2 s, so it is due 2 s after it began
        looked.clear()
        sqs.send_message(QueueUrl=long, MessageBody="more")
        sqs.send_message(QueueUrl=short, MessageBody="more")
        now[0] += 0.5
        snapshots.save()
        assert looked == ["short"]
    assert kept() == {"long": 1, "short": 3}  # the long queue as last looked at
    now[0] += 1.0
    looked.clear()
    snapshots.save()
    assert sorted(looked) == ["long", "short"] and kept() == {"long": 4, "short": 3}
    looked.clear()
    sqs.send_message(QueueUrl=long, MessageBody="last")
    snapshots.save(whole=True)  # what stop() writes
    assert "long" in looked and kept() == {"long": 5, "short": 3}
