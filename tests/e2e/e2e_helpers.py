"""Helpers shared by the e2e tests: the running stack's description, its users' tokens and a polling wait.

Every API route needs a token: ``stack.auth("alice")`` is the ``Authorization`` header of alice's access token
(signed in once per session, InitiateAuth USER_PASSWORD_AUTH on the stack's user pool; tokens last 1 hour).
The tests call the API as ``alice`` (tenant acme) and ``/admin/*`` as ``admin``.
"""

from __future__ import annotations

import atexit
import contextlib
import functools
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, TypeVar

import boto3
import pytest
import requests
from botocore.config import Config

from dfd.core.config import Settings
from dfdlocal.names import CREDENTIALS
from dfdtools.audit import audit
from tests.conftest import TEST_ENV

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
    tenant_files_table: str
    ingest_queue_url: str
    dlq_url: str
    description: dict[str, Any]
    log_path: Path
    process: subprocess.Popen[bytes] = field(repr=False)
    cognito: dict[str, Any] = field(default_factory=dict)  # the ready file's "cognito" (pool, client, users...)
    _tokens: dict[str, str] = field(default_factory=dict, repr=False)

    @property
    def users(self) -> dict[str, str]:
        """username -> group (tenant-acme, tenant-globex, admins)."""
        return dict(self.cognito["users"])

    @property
    def password(self) -> str:
        return str(self.cognito["password"])

    def sign_in(self, user: str, password: str | None = None) -> dict[str, Any]:
        """InitiateAuth USER_PASSWORD_AUTH on the stack's user pool: the AuthenticationResult (not cached)."""
        idp = self.client("cognito-idp")
        answer = idp.initiate_auth(
            AuthFlow="USER_PASSWORD_AUTH",
            ClientId=self.cognito["client_id"],
            AuthParameters={"USERNAME": user, "PASSWORD": password or self.password},
        )
        result: dict[str, Any] = answer["AuthenticationResult"]
        return result

    def token(self, user: str) -> str:
        """``user``'s access token, signed in once per session."""
        if user not in self._tokens:
            self._tokens[user] = str(self.sign_in(user)["AccessToken"])
        return self._tokens[user]

    def auth(self, user: str = "alice") -> dict[str, str]:
        """The ``Authorization`` header of ``user``'s access token."""
        return {"Authorization": f"Bearer {self.token(user)}"}

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


def nothing_to_reap(stack: RunningStack) -> bool:
    """No content is tombstoned (live_refs 0): the reaper (every reconcile run, 10 s of grace locally) has nothing
    left that would take total_files down while a test counts (earlier tests delete uploads)."""
    pages = stack.client("dynamodb").get_paginator("scan")
    scan = pages.paginate(TableName=stack.files_table, ProjectionExpression="live_refs")
    return not any(item.get("live_refs", {}).get("N") == "0" for page in scan for item in page["Items"])


def settings_of(stack: RunningStack) -> Settings:
    """The stack's tables and bucket as dfd's settings (for the operator tools' functions)."""
    return Settings(
        files_table=stack.files_table,
        counters_table=stack.counters_table,
        uploads_table=stack.uploads_table,
        events_table=stack.events_table,
        tenant_files_table=stack.tenant_files_table,
        bucket=stack.bucket,
    )


def settled(stack: RunningStack) -> bool:
    """The ingest queue is empty and scripts/audit finds every invariant holding."""
    sqs = stack.client("sqs")
    names = ["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"]
    attrs = sqs.get_queue_attributes(QueueUrl=stack.ingest_queue_url, AttributeNames=names)["Attributes"]
    if any(int(attrs[n]) for n in names):
        return False
    return audit(stack.client("dynamodb"), stack.client("s3"), settings_of(stack)).ok


def tool(stack: RunningStack, module: str, *args: str) -> subprocess.CompletedProcess[str]:
    """`python -m dfdtools.<module> args` from the repository, with only PATH of this environment."""
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin")}
    return subprocess.run(
        [sys.executable, "-m", f"dfdtools.{module}", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=180,
        env=env,
    )


def clean_env() -> dict[str, str]:
    """This process's environment without the test suites' AWS/dfd settings (the stack sets its own), with a new
    empty data directory."""
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("DFD_", "AWS_", "MOTO_", "POWERTOOLS_")) and k not in TEST_ENV
    }
    env["PYTHONUNBUFFERED"] = "1"
    # a stack started with it keeps its state in a directory of its own, never the repository's .dfd/
    env["DFD_DATA_DIR"] = data = tempfile.mkdtemp(prefix="dfd-e2e-")
    atexit.register(shutil.rmtree, data, ignore_errors=True)  # the test process outlives its stacks
    return env


def launch_stack(command: list[str], *, cwd: Path, env: dict[str, str], workdir: Path) -> RunningStack:
    """Start a local stack with ``command`` (``python -m dfdlocal ...``, or a shell running ``make run``) in its
    own process group, and wait for its ready file: ``--ready-file`` or ``DFD_READY_FILE`` = workdir/ready.json."""
    ready = workdir / "ready.json"
    log_path = workdir / "stack.log"
    with log_path.open("wb") as log:
        process = subprocess.Popen(
            command, cwd=cwd, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
        )
    deadline = time.monotonic() + 90.0
    while not ready.exists():
        if process.poll() is not None or time.monotonic() > deadline:
            with contextlib.suppress(ProcessLookupError):  # its group may be gone already: the log says why
                os.killpg(process.pid, signal.SIGKILL)
            pytest.fail(f"local stack did not start (exit {process.poll()}):\n{log_path.read_text()[-4000:]}")
        time.sleep(0.1)
    info = json.loads(ready.read_text())
    tables, queues = info["tables"], info["queues"]
    ingest = next(q for q in queues.values() if "ingest" in q["name"] and "dlq" not in q["name"])
    dlq = next(q for q in queues.values() if "dlq" in q["name"])
    return RunningStack(
        api_url=info["api_url"],
        lambda_url=info["lambda_url"],
        aws_url=info["aws_url"],
        region=info["region"],
        bucket=next(iter(info["buckets"].values())),
        files_table=tables["FilesTable"],
        counters_table=tables["CountersTable"],
        uploads_table=tables["UploadsTable"],
        events_table=tables["EventsTable"],
        tenant_files_table=tables["TenantFilesTable"],
        ingest_queue_url=ingest["url"],
        dlq_url=dlq["url"],
        description=info,
        log_path=log_path,
        process=process,
        cognito=info["cognito"],
    )


def stop_stack(running: RunningStack, ok: tuple[int, ...] = (0,)) -> None:
    """Ctrl-C (SIGINT to the stack's process group) and a clean exit within 20 s, with a status in ``ok``."""
    process = running.process
    os.killpg(process.pid, signal.SIGINT)
    try:
        code = process.wait(timeout=20)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        pytest.fail(f"local stack did not stop within 20 s of SIGINT:\n{running.logs()}")
    if code not in ok:
        pytest.fail(f"local stack exited {code} after SIGINT:\n{running.logs()}")


def take_events(stack: RunningStack, into: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Receive (and delete) what is on the local `dfd-events` queue now, appended to `into`; `into` returned."""
    sqs, url = stack.client("sqs"), stack.description["events"]["queue_url"]
    while messages := sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10).get("Messages"):
        for message in messages:
            into.append(json.loads(message["Body"]))
            sqs.delete_message(QueueUrl=url, ReceiptHandle=message["ReceiptHandle"])
    return into


def run_audit(stack: RunningStack) -> subprocess.CompletedProcess[str]:
    """scripts/audit against the stack, as an operator runs it (its own process, the stack's names)."""
    return subprocess.run(
        [sys.executable, "-m", "dfdtools.audit", "--endpoint-url", stack.aws_url],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        env={"PATH": "/usr/bin:/bin", "DDB_TABLE": stack.files_table, "S3_BUCKET": stack.bucket},
    )


class QuietHandler(SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:  # nothing printed per request
        pass


@contextmanager
def serving(directory: Path) -> Iterator[str]:
    """`directory` served over HTTP on 127.0.0.1 (a free port) until the block ends; yields its URL, with a
    trailing slash."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(QuietHandler, directory=str(directory)))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/"
    finally:
        server.shutdown()
        server.server_close()


def make_user(stack: RunningStack, username: str, group: str) -> str:
    """A user of the stack's pool in `group` with the stack's password (made once): their sub."""
    idp = stack.client("cognito-idp")
    pool = stack.cognito["user_pool_id"]
    if group not in {g["GroupName"] for g in idp.list_groups(UserPoolId=pool)["Groups"]}:
        idp.create_group(UserPoolId=pool, GroupName=group)
    with contextlib.suppress(idp.exceptions.UsernameExistsException):  # made by an earlier test
        idp.admin_create_user(UserPoolId=pool, Username=username, MessageAction="SUPPRESS")
    idp.admin_set_user_password(UserPoolId=pool, Username=username, Password=stack.password, Permanent=True)
    idp.admin_add_user_to_group(UserPoolId=pool, Username=username, GroupName=group)
    attributes = idp.admin_get_user(UserPoolId=pool, Username=username)["UserAttributes"]
    return str(next(a["Value"] for a in attributes if a["Name"] == "sub"))


def credentials_env(stack: RunningStack, prefix: str, user: str) -> dict[str, str]:
    """The environment of an AWS CLI (any SDK) holding the credentials POST /me/s3-credentials issues `user` (their
    prefix is `prefix`: only what the API issued becomes uploads); nothing of this process's AWS_*."""
    answer = requests.post(f"{stack.api_url}/me/s3-credentials", headers=stack.auth(user), timeout=30)
    assert answer.status_code == 201, answer.text
    credentials = answer.json()
    assert credentials["prefix"] == prefix, credentials["prefix"]
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    env.update(
        AWS_ACCESS_KEY_ID=credentials["AccessKeyId"],
        AWS_SECRET_ACCESS_KEY=credentials["SecretAccessKey"],
        AWS_SESSION_TOKEN=credentials["SessionToken"],
        AWS_DEFAULT_REGION=stack.region,
        AWS_ENDPOINT_URL=stack.aws_url,
        AWS_CONFIG_FILE=os.devnull,
        AWS_SHARED_CREDENTIALS_FILE=os.devnull,
        AWS_MAX_ATTEMPTS="1",
    )
    return env
