"""Shared plumbing of the operator scripts (audit, replay, upload, reconcile): where the stack is and clients."""

from __future__ import annotations

import argparse
import functools
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any
from urllib.error import URLError

import boto3
import requests
from botocore.config import Config
from botocore.exceptions import EndpointConnectionError

from dfd.config import Settings


def _local(variable: str, port: int) -> str:
    """make run's endpoint on 127.0.0.1, at the port its own variable moved it to (DFD_AWS_PORT, ...)."""
    return f"http://127.0.0.1:{os.environ.get(variable, '').strip() or port}"


LOCAL_AWS = _local("DFD_AWS_PORT", 4566)
LOCAL_API = _local("DFD_API_PORT", 3000)
LOCAL_LAMBDA = _local("DFD_LAMBDA_PORT", 3001)
LOCAL_CREDENTIALS = {
    "AWS_ACCESS_KEY_ID": "testing",
    "AWS_SECRET_ACCESS_KEY": "testing",
    "AWS_DEFAULT_REGION": "us-east-1",
}
# the local stack's resource names (AWS deployments pass theirs through the same variables)
LOCAL_NAMES = {
    "DDB_TABLE": "FileMetadata",
    "DDB_COUNTERS_TABLE": "counters",
    "UPLOADS_TABLE": "Uploads",
    "EVENTS_TABLE": "IngestEvents",
    "TENANT_FILES_TABLE": "TenantFiles",
    "S3_BUCKET": "dfd-file-service",
}
LOCAL_QUEUE = "dfd-ingest"


def add_target_args(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--endpoint-url", default=LOCAL_AWS, help=f"AWS endpoint (default: make run's, {LOCAL_AWS})")
    parser.add_argument("--aws", action="store_true", help="talk to real AWS: names come from the DDB_TABLE, ... env")
    parser.add_argument("--profile", help="AWS profile (with --aws)")
    parser.add_argument("--region", help="AWS region (with --aws)")


@dataclass
class Target:
    settings: Settings
    session: boto3.Session
    endpoint: str | None

    def client(self, service: str) -> Any:
        config = Config(retries={"max_attempts": 5, "mode": "standard"}, signature_version="s3v4")
        return self.session.client(service, endpoint_url=self.endpoint, config=config)  # type: ignore[call-overload]


def target(args: argparse.Namespace) -> Target:
    if not args.aws:
        for name, value in (LOCAL_CREDENTIALS | LOCAL_NAMES).items():
            os.environ.setdefault(name, value)
    session = boto3.Session(profile_name=args.profile, region_name=args.region)
    return Target(Settings.from_env(), session, None if args.aws else args.endpoint_url)


def reports_unreachable(main: Callable[..., int]) -> Callable[..., int]:
    """A tool's main: an endpoint that does not answer is one line on stderr and exit status 2, not a traceback."""

    @functools.wraps(main)
    def wrapped(argv: list[str] | None = None) -> int:
        try:
            return main(argv)
        except EndpointConnectionError as error:
            where = str(error.kwargs.get("endpoint_url", "the AWS endpoint"))
        except (URLError, ConnectionError, requests.ConnectionError) as error:
            where = f"the endpoint ({error})"
        print(f"cannot reach {where}: is `make run` running? (or pass --endpoint-url, or --aws)", file=sys.stderr)
        return 2

    return wrapped
