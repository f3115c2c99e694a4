"""Helpers shared by the e2e tests: the running stack's description and a polling wait."""

from __future__ import annotations

import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import boto3
import pytest
from botocore.config import Config

from dfdlocal.names import CREDENTIALS

ROOT = Path(__file__).resolve().parents[2]
T = TypeVar("T")


@dataclass
class RunningStack:
    """Endpoints and names of a running local stack, with boto3 helpers pointed at it."""

    api_url: str
    lambda_url: str
    aws_url: str
    region: str
    bucket: str
    files_table: str
    counters_table: str
    uploads_table: str
    events_table: str
    ingest_queue_url: str
    dlq_url: str
    description: dict[str, Any]
    log_path: Path
    process: subprocess.Popen[bytes] = field(repr=False)

    def session(self) -> boto3.Session:
        return boto3.Session(
            aws_access_key_id=CREDENTIALS["AWS_ACCESS_KEY_ID"],
            aws_secret_access_key=CREDENTIALS["AWS_SECRET_ACCESS_KEY"],
            region_name=self.region,
        )

    def client(self, service: str) -> Any:
        """A client for the emulator (S3 with SigV4, like the handlers' presigned URLs)."""
        config = Config(signature_version="s3v4" if service == "s3" else None, retries={"max_attempts": 2})
        return self.session().client(service, endpoint_url=self.aws_url, config=config)

    def lambda_client(self) -> Any:
        return self.session().client("lambda", endpoint_url=self.lambda_url)

    def logs(self, tail: int = 80) -> str:
        lines = self.log_path.read_text(errors="replace").splitlines()
        return "\n".join(lines[-tail:])


def wait_until(probe: Callable[[], T | None], timeout: float = 15.0, interval: float = 0.2) -> T:
    """Poll ``probe`` until it returns something truthy; fails the test after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        value = probe()
        if value:
            return value
        if time.monotonic() > deadline:
            pytest.fail(f"condition not met within {timeout} s")
        time.sleep(interval)
