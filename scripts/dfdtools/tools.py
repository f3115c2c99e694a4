"""Shared plumbing of the operator scripts (audit, replay, upload, reconcile): where the stack is and clients."""

from __future__ import annotations

import argparse
import functools
import os
import signal
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any
from urllib.error import URLError

import boto3
import requests
from botocore.config import Config
from botocore.exceptions import EndpointConnectionError

from dfd.core.config import Settings
from dfdlocal import names
from dfdtools import quiet_exit

# make run's endpoints (at the ports DFD_AWS_PORT, ... moved them to)
LOCAL_AWS = names.local_url(names.AWS_PORT)
LOCAL_API = names.local_url(names.API_PORT)
LOCAL_LAMBDA = names.local_url(names.LAMBDA_PORT)
LOCAL_CREDENTIALS = {
    "AWS_ACCESS_KEY_ID": names.CREDENTIALS["AWS_ACCESS_KEY_ID"],
    "AWS_SECRET_ACCESS_KEY": names.CREDENTIALS["AWS_SECRET_ACCESS_KEY"],
    "AWS_DEFAULT_REGION": names.REGION,
}
# the local stack's resource names (AWS deployments pass theirs through the same variables)
LOCAL_NAMES = names.ENVIRONMENT
LOCAL_QUEUE = names.INGEST_QUEUE
# a deployed stack's outputs (template.yaml Outputs) -> the variables dfd.core.config.Settings reads
STACK_SETTINGS = {
    "FilesTableName": "DDB_TABLE",
    "CountersTableName": "DDB_COUNTERS_TABLE",
    "UploadsTableName": "UPLOADS_TABLE",
    "EventsTableName": "EVENTS_TABLE",
    "TenantFilesTableName": "TENANT_FILES_TABLE",
    "BucketName": "S3_BUCKET",
    "UploadPrefix": "UPLOAD_PREFIX",
}


class StackError(Exception):
    """The stack cannot be read, or lacks an output a tool needs."""


def stack_outputs(cloudformation: Any, stack: str) -> dict[str, str]:
    """A stack's outputs by key (CloudFormation DescribeStacks)."""
    from botocore.exceptions import ClientError

    try:
        (found,) = cloudformation.describe_stacks(StackName=stack)["Stacks"]
    except ClientError as error:
        raise StackError(f"stack {stack}: {error.response.get('Error', {}).get('Message', error)}") from error
    return {str(o["OutputKey"]): str(o["OutputValue"]) for o in found.get("Outputs", [])}


def require_output(outputs: dict[str, str], *keys: str) -> list[str]:
    missing = [key for key in keys if not outputs.get(key)]
    if missing:
        raise StackError(f"the stack has no output {', '.join(missing)} (deployed from an older template.yaml?)")
    return [outputs[key] for key in keys]


def stack_settings(outputs: dict[str, str]) -> Settings:
    """The deployment's settings from its outputs (the names of its tables, bucket and upload prefix)."""
    values = require_output(outputs, *STACK_SETTINGS)
    return Settings.from_env(dict(zip(STACK_SETTINGS.values(), values, strict=True)))


def add_target_args(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--endpoint-url", default=LOCAL_AWS, help=f"AWS endpoint (default: make run's, {LOCAL_AWS})")
    parser.add_argument("--aws", action="store_true", help="talk to real AWS: names come from the DDB_TABLE, ... env")
    parser.add_argument(
        "--stack",
        help="a deployed stack: its resources from its outputs (CloudFormation DescribeStacks); implies --aws",
    )
    parser.add_argument("--profile", help="AWS profile (with --aws)")
    parser.add_argument("--region", help="AWS region (with --aws)")


@dataclass
class Target:
    settings: Settings
    session: boto3.Session
    endpoint: str | None
    outputs: dict[str, str] = field(default_factory=dict)  # the stack's, with --stack

    def client(self, service: str) -> Any:
        config = Config(retries={"max_attempts": 5, "mode": "standard"}, signature_version="s3v4")
        return self.session.client(service, endpoint_url=self.endpoint, config=config)  # type: ignore[call-overload]


def target(args: argparse.Namespace) -> Target:
    session = boto3.Session(profile_name=args.profile, region_name=args.region)
    if getattr(args, "stack", None):
        args.aws = True
        outputs = stack_outputs(session.client("cloudformation"), args.stack)
        return Target(stack_settings(outputs), session, None, outputs)
    if not args.aws:
        for name, value in (LOCAL_CREDENTIALS | LOCAL_NAMES).items():
            os.environ.setdefault(name, value)
    return Target(Settings.from_env(), session, None if args.aws else args.endpoint_url)


def reports_unreachable(main: Callable[..., int]) -> Callable[..., int]:
    """A tool's main: an endpoint that does not answer is one line on stderr and exit status 2, not a traceback."""

    @functools.wraps(main)
    def wrapped(argv: list[str] | None = None) -> int:
        try:
            return main(argv)
        except StackError as error:
            print(f"error: {error}", file=sys.stderr)
            return 2
        except EndpointConnectionError as error:
            where = str(error.kwargs.get("endpoint_url", "the AWS endpoint"))
        except BrokenPipeError:
            # whoever read the output went away (`| head`): stop quietly, as Unix tools do
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
            return 128 + signal.SIGPIPE
        except (URLError, ConnectionError, requests.ConnectionError) as error:
            where = f"the endpoint ({error})"
        print(f"cannot reach {where}: is `make run` running? (or pass --endpoint-url, or --aws)", file=sys.stderr)
        return 2

    return wrapped


def interruptible(main: Callable[..., int]) -> Callable[..., int]:
    """A tool's main: Ctrl-C at any moment is one line on stderr and exit status 130, never a traceback.

    While ``main`` runs, Ctrl-C raises KeyboardInterrupt (so that it can keep what it must, e.g. an upload's
    resume state); whatever escapes is reported here. Before and after, :func:`dfdtools.quiet_exit` ends the
    process at once.
    """

    @functools.wraps(main)
    def wrapped(argv: list[str] | None = None) -> int:
        signal.signal(signal.SIGINT, signal.default_int_handler)
        try:
            return main(argv)
        except KeyboardInterrupt:
            signal.signal(signal.SIGINT, quiet_exit)
            print("\ninterrupted", file=sys.stderr)
            return 130
        finally:
            signal.signal(signal.SIGINT, quiet_exit)

    return wrapped
