"""The local stack's S3 (moto behind dfdlocal.persist and dfdlocal.s3store, on loopback, with a data directory) under
concurrent use: a reader of a large key gets whole bytes some write gave it, or 404, whatever overwrites, copies,
spills to a file and deletes race it; never a 500."""

from __future__ import annotations

import hashlib
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

from dfdlocal import s3store
from dfdlocal.emulator import make_emulator_server
from dfdlocal.names import CREDENTIALS, REGION

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
        time.sleep(0.001)  # a GetObject resolves its key, reads its tags, then its bytes: a wider window between
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
