"""The local stack's S3 (moto behind dfdlocal.persist and dfdlocal.s3store, on loopback, with a data directory): a
reader of a large key gets whole bytes some write gave it, or 404, whatever overwrites, copies, spills to a file
and deletes race it, never a 500; what it acknowledges is on disk with its notification, and seen by no reader or
queue before; its data directory is its user's alone."""

from __future__ import annotations

import hashlib
import json
import os
import socket
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import boto3
import pytest
from botocore.config import Config
from botocore.exceptions import ClientError

from dfdlocal import persist, s3store
from dfdlocal.emulator import make_emulator_server
from dfdlocal.names import ACCOUNT_ID, CREDENTIALS, REGION

MIB = 1024 * 1024
BUFFER = 256 * 1024  # the keys' memory buffer here: every value below is larger, so it spills to a file
SECONDS = 3.0  # how long the race runs at most


@dataclass
class LocalS3:
    endpoint: str
    data_dir: Path
    bucket: str

    def client(self) -> Any:
        config = Config(retries={"max_attempts": 1}, max_pool_connections=16)
        return boto3.client(
            "s3",
            endpoint_url=self.endpoint,
            region_name=REGION,
            aws_access_key_id=CREDENTIALS["AWS_ACCESS_KEY_ID"],
            aws_secret_access_key=CREDENTIALS["AWS_SECRET_ACCESS_KEY"],
            config=config,
        )


@pytest.fixture
def local_s3(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[LocalS3]:
    monkeypatch.setenv(s3store.ENVIRONMENT, str(BUFFER))
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    sock.listen(64)
    data_dir = tmp_path / "data"
    server = make_emulator_server(sock, data_dir=data_dir)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    local = LocalS3(f"http://127.0.0.1:{sock.getsockname()[1]}", data_dir, f"race-{uuid.uuid4().hex[:8]}")
    client = local.client()
    client.create_bucket(Bucket=local.bucket)
    try:
        yield local
    finally:
        for page in client.get_paginator("list_objects_v2").paginate(Bucket=local.bucket):
            for item in page.get("Contents", []):
                client.delete_object(Bucket=local.bucket, Key=item["Key"])
        client.delete_bucket(Bucket=local.bucket)
        server.shutdown()
        server.server_close()
        sock.close()


def _run(workers: list[Callable[[], None]], seconds: float) -> list[BaseException]:
    """Each worker in its own thread until it returns or ``seconds`` pass; what they raised."""
    raised: list[BaseException] = []

    def guarded(work: Callable[[], None]) -> None:
        try:
            work()
        except BaseException as exc:  # reported by the test
            raised.append(exc)

    threads = [threading.Thread(target=guarded, args=(work,), daemon=True) for work in workers]
    switching = sys.getswitchinterval()
    sys.setswitchinterval(1e-5)  # the threads interleave at a finer grain than the default 5 ms
    try:
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(seconds + 30)
    finally:
        sys.setswitchinterval(switching)
    return raised


def test_readers_of_large_keys_racing_overwrites_copies_spills_and_deletes_get_whole_values(
    local_s3: LocalS3, monkeypatch: pytest.MonkeyPatch
) -> None:
    from moto.utilities.tagging_service import TaggingService

    tags = TaggingService.get_tag_dict_for_resource

    def slow_tags(self: Any, arn: str) -> Any:
        time.sleep(0.003)  # a GetObject resolves its key, reads its tags, then its bytes: a wider window between
        return tags(self, arn)

    monkeypatch.setattr(TaggingService, "get_tag_dict_for_resource", slow_tags)
    client = local_s3.client()
    bucket, source, target = local_s3.bucket, "uploads/source.bin", "uploads/target.bin"
    written: set[str] = set()  # the SHA-256 of every value either key was given
    lock = threading.Lock()
    deadline = time.monotonic() + SECONDS
    rounds = 150
    statuses: list[int] = []

    def value() -> bytes:
        data = os.urandom(16) * ((BUFFER + 64 * 1024) // 16)  # over the buffer: spilled in the background
        with lock:
            written.add(hashlib.sha256(data).hexdigest())
        return data

    client.put_object(Bucket=bucket, Key=source, Body=value())

    def writer() -> None:
        for _ in range(rounds):
            if time.monotonic() > deadline:
                return
            client.put_object(Bucket=bucket, Key=source, Body=value())

    def copier() -> None:
        for i in range(rounds):
            if time.monotonic() > deadline:
                return
            try:
                if i % 2:
                    client.copy_object(Bucket=bucket, Key=target, CopySource={"Bucket": bucket, "Key": source})
                else:
                    client.copy_object(
                        Bucket=bucket,
                        Key=source,
                        CopySource={"Bucket": bucket, "Key": target},
                        MetadataDirective="REPLACE",
                        Metadata={"round": str(i)},
                    )
            except ClientError as exc:
                if exc.response["Error"]["Code"] not in ("NoSuchKey", "404"):
                    raise

    def deleter() -> None:
        for _ in range(rounds // 3):
            if time.monotonic() > deadline:
                return
            time.sleep(0.01)
            client.delete_object(Bucket=bucket, Key=target)
            client.delete_object(Bucket=bucket, Key=source)

    def reader(key: str) -> Callable[[], None]:
        def read() -> None:
            for _ in range(rounds):
                if time.monotonic() > deadline:
                    return
                try:
                    body = client.get_object(Bucket=bucket, Key=key)["Body"].read()
                except ClientError as exc:
                    statuses.append(int(exc.response["ResponseMetadata"]["HTTPStatusCode"]))
                    if exc.response["Error"]["Code"] != "NoSuchKey":
                        raise
                    continue
                statuses.append(200)
                assert hashlib.sha256(body).hexdigest() in written, f"{key}: {len(body)} bytes no write gave it"

        return read

    workers = [writer, writer, copier, deleter, *(reader(key) for key in (source, source, source, target, target))]
    raised = _run(workers, SECONDS)
    assert not raised, [repr(exc) for exc in raised]
    assert statuses.count(200) >= 10, statuses  # the readers did meet the writes


def _notified_bucket(local: LocalS3) -> str:
    """The bucket's writes under uploads/ notify a queue (as the stack's bucket notifies the ingest's): its URL."""
    sqs = boto3.client(
        "sqs",
        endpoint_url=local.endpoint,
        region_name=REGION,
        aws_access_key_id=CREDENTIALS["AWS_ACCESS_KEY_ID"],
        aws_secret_access_key=CREDENTIALS["AWS_SECRET_ACCESS_KEY"],
    )
    url = sqs.create_queue(QueueName=f"{local.bucket}-ingest")["QueueUrl"]
    arn = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    rules = {"Key": {"FilterRules": [{"Name": "prefix", "Value": "uploads/"}]}}
    local.client().put_bucket_notification_configuration(
        Bucket=local.bucket,
        NotificationConfiguration={
            "QueueConfigurations": [{"QueueArn": arn, "Events": ["s3:ObjectCreated:*"], "Filter": rules}]
        },
    )
    _forget(url)  # S3's test event
    return url


def _queue(url: str) -> Any:
    from moto.sqs.models import sqs_backends

    return sqs_backends[ACCOUNT_ID][REGION].queues[url.rsplit("/", 1)[1]]


def _queued(url: str) -> list[str]:
    return [message.body for message in list(_queue(url)._messages)]


def _forget(url: str) -> None:
    """The queue's messages gone, as a kill takes them from memory (or as they are received and deleted)."""
    queue = _queue(url)
    with queue._messages_lock:
        queue._messages.clear()


def test_an_acknowledged_write_s_notification_is_on_disk_with_its_object_and_put_back_after_a_kill(
    local_s3: LocalS3,
) -> None:
    """A PutObject, a CopyObject and a CompleteMultipartUpload answered 200: the object's file holds the
    notification the queue got; a kill that loses the queue's memory (no snapshot since) loses neither."""
    client, bucket = local_s3.client(), local_s3.bucket
    url = _notified_bucket(local_s3)
    client.put_object(Bucket=bucket, Key="uploads/put", Body=b"put")
    client.copy_object(Bucket=bucket, Key="uploads/copy", CopySource={"Bucket": bucket, "Key": "uploads/put"})
    upload = client.create_multipart_upload(Bucket=bucket, Key="uploads/multipart")["UploadId"]
    etag = client.upload_part(Bucket=bucket, Key="uploads/multipart", UploadId=upload, PartNumber=1, Body=b"x")["ETag"]
    client.complete_multipart_upload(
        Bucket=bucket,
        Key="uploads/multipart",
        UploadId=upload,
        MultipartUpload={"Parts": [{"PartNumber": 1, "ETag": etag}]},
    )
    queued = _queued(url)
    assert len(queued) == 4  # moto's completion notifies a Put as well
    restored = persist.restore_s3(local_s3.data_dir)  # what a start reads back
    kept = {n.body: n for n in restored.notifications}
    assert set(kept) == set(queued)
    names = {json.loads(body)["Records"][0]["eventName"] for body in kept}
    assert names == {"ObjectCreated:Put", "ObjectCreated:Copy", "ObjectCreated:CompleteMultipartUpload"}

    _forget(url)  # the kill: the queue's memory gone, no snapshot written since the writes
    assert persist.redeliver(local_s3.data_dir, restored.notifications) == 4
    assert sorted(_queued(url)) == sorted(queued)
    assert persist.redeliver(local_s3.data_dir, restored.notifications) == 0  # in the queue already

    _forget(url)  # received and deleted
    persist.QueueSnapshots(local_s3.data_dir).save()  # a snapshot taken after: it covers them, consumed
    assert persist.redeliver(local_s3.data_dir, restored.notifications) == 0
    assert _queued(url) == []


def test_a_write_is_seen_by_no_reader_and_no_queue_before_it_is_on_disk(
    local_s3: LocalS3, monkeypatch: pytest.MonkeyPatch
) -> None:
    """While a PutObject's file is being written, a GetObject, a HeadObject and a listing of its key wait, and its
    notification is not in the queue: what a reader sees survives a kill."""
    client, bucket, key = local_s3.client(), local_s3.bucket, "uploads/slow"
    url = _notified_bucket(local_s3)
    writing, go = threading.Event(), threading.Event()
    write = persist.write_whole

    def slow_write(path: Path, data: Any, **kw: Any) -> None:
        if path.parent.name == "objects":
            writing.set()
            assert go.wait(30)
        write(path, data, **kw)

    monkeypatch.setattr(persist, "write_whole", slow_write)
    seen: dict[str, Any] = {}

    def read(name: str, call: Callable[[], Any]) -> Callable[[], None]:
        def run() -> None:
            seen[name] = call()

        return run

    writer = threading.Thread(target=read("put", lambda: client.put_object(Bucket=bucket, Key=key, Body=b"durable")))
    writer.start()
    assert writing.wait(30)
    readers = [
        threading.Thread(target=read(name, call), daemon=True)
        for name, call in (
            ("get", lambda: client.get_object(Bucket=bucket, Key=key)["Body"].read()),
            ("head", lambda: client.head_object(Bucket=bucket, Key=key)["ContentLength"]),
            ("list", lambda: [o["Key"] for o in client.list_objects_v2(Bucket=bucket).get("Contents", [])]),
        )
    ]
    for thread in readers:
        thread.start()
    try:
        time.sleep(0.5)  # time enough for a reader not made to wait to be answered
        assert seen == {} and _queued(url) == []
    finally:
        go.set()
    for thread in (writer, *readers):
        thread.join(30)
    assert seen["get"] == b"durable" and seen["head"] == len(b"durable") and seen["list"] == [key]
    assert len(_queued(url)) == 1


def test_the_data_directory_s_files_and_directories_are_its_user_s_alone(local_s3: LocalS3) -> None:
    client = local_s3.client()
    client.put_object(Bucket=local_s3.bucket, Key="uploads/private", Body=b"tenant bytes")
    upload = client.create_multipart_upload(Bucket=local_s3.bucket, Key="uploads/parts")["UploadId"]
    client.upload_part(Bucket=local_s3.bucket, Key="uploads/parts", UploadId=upload, PartNumber=1, Body=b"x")
    persist.QueueSnapshots(local_s3.data_dir).save()
    modes = {
        str(path.relative_to(local_s3.data_dir)): path.stat().st_mode & 0o777 for path in local_s3.data_dir.rglob("*")
    }
    assert len([m for m in modes if m.endswith(".pickle")]) >= 4, modes  # object, upload, part, the queues
    assert {mode for name, mode in modes.items() if (local_s3.data_dir / name).is_dir()} == {0o700}, modes
    assert {mode for name, mode in modes.items() if (local_s3.data_dir / name).is_file()} == {0o600}, modes
    assert local_s3.data_dir.stat().st_mode & 0o777 == 0o700


def test_a_ranged_get_of_a_large_key_reads_its_range_only_and_answers_as_moto_does(
    local_s3: LocalS3, monkeypatch: pytest.MonkeyPatch
) -> None:
    client = local_s3.client()
    body = os.urandom(4 * MIB)  # past the buffer: in its file
    client.put_object(Bucket=local_s3.bucket, Key="big", Body=body)
    from moto.s3 import models

    whole: list[int] = []
    getter = models.FakeKey.value.fget

    def counted(self: Any) -> Any:
        value = getter(self)
        if isinstance(value, bytes):
            whole.append(len(value))
        return value

    monkeypatch.setattr(models.FakeKey, "value", property(counted, models.FakeKey.value.fset))
    for wanted, start, end in (("bytes=0-0", 0, 0), ("bytes=1000-1999", 1000, 1999), (f"bytes={MIB}-", MIB, None)):
        got = client.get_object(Bucket=local_s3.bucket, Key="big", Range=wanted)
        last = len(body) - 1 if end is None else end
        assert got["Body"].read() == body[start : last + 1], wanted
        assert got["ContentRange"] == f"bytes {start}-{last}/{len(body)}", wanted
        assert got["ContentLength"] == last - start + 1
    suffix = client.get_object(Bucket=local_s3.bucket, Key="big", Range="bytes=-10")
    assert suffix["Body"].read() == body[-10:]
    # several ranges: S3 (and moto) answer the whole object
    several = client.get_object(Bucket=local_s3.bucket, Key="big", Range="bytes=0-1,5-6")
    assert several["Body"].read() == body
    with pytest.raises(ClientError) as refused:
        client.get_object(Bucket=local_s3.bucket, Key="big", Range=f"bytes={len(body)}-")
    assert refused.value.response["Error"]["Code"] == "InvalidRange"
    assert whole == [], "a ranged GET read the whole value"
    assert client.get_object(Bucket=local_s3.bucket, Key="big")["Body"].read() == body
    assert whole == [len(body)]
