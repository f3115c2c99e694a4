"""The local stack's queue snapshots (dfdlocal.persist.QueueSnapshots): every queue in one file, put back after a
restart; a queue pickled again only when its messages changed (dfd-events holds every event the stack published:
pickling it every second grew with the stack's age, docs/performance.md, target 8); a file of the earlier format
(the messages themselves) still restores."""

from __future__ import annotations

import pickle
from pathlib import Path
from typing import Any

import boto3
import pytest
from moto import mock_aws

from dfdlocal import persist


@pytest.fixture
def sqs(monkeypatch: pytest.MonkeyPatch) -> Any:
    for name, value in {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing"}.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    with mock_aws():
        yield boto3.client("sqs")


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
    snapshots = persist.QueueSnapshots(tmp_path)
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
