"""The local stack's moto: a SendMessage never walks the messages a queue holds (dfd-events, which nobody drains
locally, keeps every event the stack published: a PutEvents takes the same time at any age of the stack), and the
queue's approximate counts are still exact when asked for."""

from __future__ import annotations

from typing import Any

import pytest

from dfdlocal.streams import patch_moto_streams


@pytest.fixture(autouse=True)
def _sends_patched(sqs: Any) -> None:
    """The local stack's moto (dfdlocal.streams.patch_moto_streams) behind the shared `sqs` fixture's client."""
    patch_moto_streams()


def test_a_send_reads_no_message_the_queue_holds(sqs: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    from moto.sqs import models

    url = sqs.create_queue(QueueName="held")["QueueUrl"]
    for index in range(50):
        sqs.send_message(QueueUrl=url, MessageBody=f"m{index}")
    reads: list[str] = []
    visible: Any = models.Message.visible

    def read(message: Any) -> bool:
        reads.append("visible")
        return bool(visible.fget(message))

    monkeypatch.setattr(models.Message, "visible", property(read))
    sqs.send_message(QueueUrl=url, MessageBody="one more")
    sqs.send_message_batch(QueueUrl=url, Entries=[{"Id": "a", "MessageBody": "a"}, {"Id": "b", "MessageBody": "b"}])
    assert reads == []
    counts = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["All"])["Attributes"]
    assert counts["ApproximateNumberOfMessages"] == "53"
    assert len(reads) >= 53  # the counts asked for walk the queue, as moto does


def test_the_counts_follow_receives_and_deletes(sqs: Any) -> None:
    url = sqs.create_queue(QueueName="counted", Attributes={"VisibilityTimeout": "60"})["QueueUrl"]
    for index in range(5):
        sqs.send_message(QueueUrl=url, MessageBody=f"m{index}")
    received = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=2)["Messages"]
    sqs.delete_message(QueueUrl=url, ReceiptHandle=received[0]["ReceiptHandle"])
    names = ["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"]
    counts = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=names)["Attributes"]
    assert counts == {"ApproximateNumberOfMessages": "3", "ApproximateNumberOfMessagesNotVisible": "1"}
