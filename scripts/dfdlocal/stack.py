"""The local stack: emulator, resources, HTTP API, Lambda Invoke API and event source mappings, in-process.

``LocalStack(options).start()`` binds every port first (a port in use fails before anything starts), points
this process's AWS SDK at the emulator (os.environ: endpoint, dummy credentials, region, MOTO_PORT), creates
the template's resources, sets the functions' environment from them, imports the handlers and starts
serving. ``stop()`` stops everything. The tables live in DynamoDB Local (a child process); with ``data_dir`` the
state survives a restart (dfdlocal.persist), without it every start is empty.

One stack per process: the handlers, moto's backends and os.environ are process-wide.
"""

from __future__ import annotations

import dataclasses
import errno
import ipaddress
import logging
import os
import socket
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

import boto3
from botocore.config import Config
from werkzeug.serving import BaseWSGIServer, WSGIRequestHandler, make_server

from dfdlocal import persist, sfnpersist, stspersist
from dfdlocal.apigw import HttpApi, RouteAuthorizer, config_js
from dfdlocal.cognito import (
    ADMIN_GROUP,
    DEFAULT_PASSWORD,
    CognitoTemplateError,
    LocalPool,
    adopt,
    bootstrap,
    cognito_definitions,
    install_signing_key,
    local_password,
)
from dfdlocal.ddblocal import DynamoDBLocal, DynamoDBLocalError
from dfdlocal.emulator import (
    ResourceError,
    Resources,
    create_resources,
    make_emulator_server,
    prepare_environment,
)
from dfdlocal.jwtauth import JwksSource, JwtVerifier, http_jwks_source
from dfdlocal.lambda_api import LambdaApi
from dfdlocal.names import (
    ACCOUNT_ID,
    API_PORT,
    AWS_PORT,
    CREDENTIALS,
    LAMBDA_PORT,
    REGION,
    TABLE_VARIABLES,
    TABLES,
)
from dfdlocal.poller import SqsPoller
from dfdlocal.reconcile import LOGICAL_ID as RECONCILE_LOGICAL_ID
from dfdlocal.reconcile import (
    ReconcileSchedule,
    free_orphaned_lease,
    start_reconcile_schedule,
    start_state_machines,
)
from dfdlocal.runtime import Runtime
from dfdlocal.schedules import ScheduleTimer
from dfdlocal.schedules import interval_from_env as schedule_interval
from dfdlocal.streams import StreamPoller, patch_moto_streams, route_events
from dfdlocal.template import COGNITO_TYPES, LocalModel, TemplateError, read_model
from dfdlocal.webheaders import page_headers

log = logging.getLogger("dfdlocal")


def _utc_now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


# Which option moves which port (for the port-in-use message).
PORT_OPTIONS = {
    "aws": ("AWS emulator", "--aws-port", "DFD_AWS_PORT"),
    "api": ("HTTP API", "--api-port", "DFD_API_PORT"),
    "lambda": ("Lambda Invoke API", "--lambda-port", "DFD_LAMBDA_PORT"),
}


# what a stack keeps in its data directory (--reset deletes these, nothing else)
DATA_ENTRIES = frozenset(
    {
        "dynamodb",
        "dynamodb.log",
        persist.SIGNING_KEY,
        persist.COGNITO,
        persist.S3_DIR,
        persist.SQS,
        stspersist.STS_SESSIONS,
        sfnpersist.EXECUTIONS,
    }
)
DATA_PREFIXES = ("stream-",)


class StartupError(RuntimeError):
    """The stack cannot start (the message says why and what to change)."""


class PortInUseError(StartupError):
    def __init__(self, role: str, host: str, port: int) -> None:
        service, option, variable = PORT_OPTIONS[role]
        super().__init__(
            f"port {port} on {host} ({service}) is already in use: stop the other process "
            f"or choose another port with {option} (or {variable})"
        )
        self.role = role
        self.port = port


@dataclass(frozen=True)
class StackOptions:
    root: Path
    template: Path | None = None  # default: <root>/template.yaml
    web_root: Path | None = None  # default: <root>/web
    host: str = "127.0.0.1"
    public_host: str | None = None  # the host in URLs handed to clients; default: host, 127.0.0.1 for a wildcard
    api_port: int = API_PORT[1]
    lambda_port: int = LAMBDA_PORT[1]
    aws_port: int = AWS_PORT[1]
    visibility_timeout: int = 2  # seconds, for queues read by an event source mapping
    ingest_concurrency: int = 4  # pollers per event source mapping (row 8: 2 held the ingest back, docs/performance.md)
    # seconds an SQS event source mapping fills a batch (MaximumBatchingWindowInSeconds); None: the template's. On
    # AWS the window saves invocations; locally it only delays every ingest (make run sets 0)
    batching_window: int | None = None
    parameters: Mapping[str, str] = field(default_factory=dict)
    log_level: str = "INFO"
    # the handlers' full Powertools records (JSON, with the EMF metrics lines) rather than one readable line each
    json_logs: bool = False
    password: str | None = None  # the local users' password; default: $DFD_LOCAL_PASSWORD or the documented one
    # binding `host` beyond loopback must be asked for: the HTTP API and the emulator's public surface (presigned
    # S3 requests, sign-in) are then reachable from other machines; the Lambda Invoke API never is
    allow_remote: bool = False
    # where the state lives across restarts (DynamoDB Local's tables, ...); None: in memory, every start empty
    data_dir: Path | None = None

    @property
    def template_path(self) -> Path:
        return self.template or self.root / "template.yaml"

    @property
    def web_path(self) -> Path:
        return self.web_root or self.root / "web"


class _QuietRequestHandler(WSGIRequestHandler):
    """The apps log their own requests; werkzeug's access log would repeat them."""

    def log_request(self, code: int | str = "-", size: int | str = "-") -> None:
        pass

    def log_error(self, format: str, *args: Any) -> None:
        log.debug(format, *args)


LOOPBACK = "127.0.0.1"


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False  # a host name: whatever it resolves to, it is not known to be this machine only


def remote_warning(options: StackOptions) -> str | None:
    """Why binding beyond loopback is refused (StartupError), or the warning it deserves when allowed."""
    if is_loopback(options.host):
        return None
    if not options.allow_remote:
        raise StartupError(
            f"--host {options.host} would let other machines reach the stack: pass --allow-remote "
            "(DFD_ALLOW_REMOTE=1) to mean it"
        )
    password = options.password or local_password()
    if password == DEFAULT_PASSWORD:
        raise StartupError(
            "other machines could sign in as admin with the documented password: set DFD_LOCAL_PASSWORD "
            "to a password of your own before binding beyond loopback"
        )
    return (
        f"the HTTP API and pages listen on {options.host}: other machines can reach them, sign in and upload. "
        "Tokens are signed with a key made at this start; the AWS emulator answers other machines only for "
        "presigned S3 requests and sign-in (its API, with the public emulator credentials, stays loopback-only); "
        f"the Lambda Invoke API listens on {LOOPBACK} only. No TLS: share it on networks you trust."
    )


def bind(host: str, port: int, role: str) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
        sock.listen(128)
    except OSError as exc:
        sock.close()
        if exc.errno == errno.EADDRINUSE:
            raise PortInUseError(role, host, port) from None
        service, option, _ = PORT_OPTIONS[role]
        raise StartupError(f"cannot listen on {host}:{port} ({service}, {option}): {exc.strerror}") from None
    return sock


class _Server:
    """A werkzeug server on a bound socket, served by a daemon thread."""

    def __init__(self, name: str, server: BaseWSGIServer) -> None:
        self.name = name
        self.server = server
        self.thread = threading.Thread(
            target=server.serve_forever, kwargs={"poll_interval": 0.2}, name=name, daemon=True
        )

    def start(self) -> None:
        self.thread.start()

    def stop(self) -> None:
        if self.thread.is_alive():
            self.server.shutdown()
            self.thread.join(5)
        self.server.server_close()


class LocalStack:
    def __init__(self, options: StackOptions) -> None:
        self.options = options
        self.model: LocalModel | None = None
        self.resources: Resources | None = None
        self.runtime: Runtime | None = None
        self.pollers: list[SqsPoller] = []
        self.stream_pollers: list[StreamPoller] = []
        self.schedules: list[ScheduleTimer] = []
        self.events_queue: tuple[str, str] | None = None  # the local queue every bus event goes to: (name, URL)
        self.reconcile: ReconcileSchedule | None = None
        self.state_machines: dict[str, str] = {}  # logical id -> ARN in the emulator
        self.kept_executions: sfnpersist.KeptExecutions | None = None
        self.import_errors: dict[str, str] = {}
        self.environment: dict[str, str] = {}
        self.pool: LocalPool | None = None
        self.signing_jwks: dict[str, Any] = {"keys": []}
        self.ports: dict[str, int] = {}
        self.dynamodb: DynamoDBLocal | None = None
        self.queue_snapshots: persist.QueueSnapshots | None = None
        self._servers: list[_Server] = []
        self._started = False

    # -- addresses ----------------------------------------------------------------------------------
    def url(self, role: str) -> str:
        """The endpoint as clients reach it (presigned URLs, the banner): a wildcard bind address (0.0.0.0, ::)
        is no address to connect to, so it is advertised as 127.0.0.1 unless --public-host names one."""
        host = self.options.public_host or self.options.host
        if host in ("0.0.0.0", "::", "") or (role == "lambda" and not is_loopback(host)):  # noqa: S104 - recognised
            host = LOOPBACK
        host = f"[{host}]" if ":" in host else host
        return f"http://{host}:{self.ports[role]}"

    @property
    def aws_url(self) -> str:
        return self.url("aws")

    @property
    def api_url(self) -> str:
        return self.url("api")

    @property
    def lambda_url(self) -> str:
        return self.url("lambda")

    def client(self, service: str) -> Any:
        """A boto3 client for the emulator (a new session each call: safe to use from any thread)."""
        session = boto3.session.Session(
            aws_access_key_id=CREDENTIALS["AWS_ACCESS_KEY_ID"],
            aws_secret_access_key=CREDENTIALS["AWS_SECRET_ACCESS_KEY"],
            region_name=REGION,
        )
        config = Config(signature_version="s3v4" if service == "s3" else None, retries={"max_attempts": 3})
        return session.client(service, endpoint_url=self.aws_url, config=config)  # type: ignore[call-overload]

    # -- lifecycle ----------------------------------------------------------------------------------
    def start(self) -> None:
        if self._started:
            raise StartupError("the stack is already started")
        options = self.options
        warning = remote_warning(options)
        if warning is not None:
            log.warning("%s", warning)
        sockets: dict[str, socket.socket] = {}
        try:
            for role, port in (
                ("aws", options.aws_port),
                ("api", options.api_port),
                ("lambda", options.lambda_port),
            ):
                host = options.host if role != "lambda" or is_loopback(options.host) else LOOPBACK
                sockets[role] = bind(host, port, role)
                self.ports[role] = sockets[role].getsockname()[1]
            self._started = True
            self._start(sockets)
        except BaseException:
            self.stop()
            raise
        finally:
            for sock in sockets.values():
                sock.close()  # the servers hold their own duplicate of each descriptor

    def _start(self, sockets: Mapping[str, socket.socket]) -> None:
        options = self.options
        try:
            self.model = model = read_model(options.template_path, self.aws_url, options.parameters)
        except TemplateError as exc:
            raise StartupError(f"template {options.template_path}: {exc}") from None
        for warning in model.warnings:
            log.warning("%s", warning)

        data = options.data_dir
        if data is not None:
            try:  # its user's alone; nothing another user could have written is loaded
                persist.secure_data_dir(data, DATA_ENTRIES, DATA_PREFIXES)
            except persist.UnsafeStateError as exc:
                raise StartupError(str(exc)) from None
        self.dynamodb = DynamoDBLocal(
            data / "dynamodb" if data is not None else None,
            log_file=data / "dynamodb.log" if data is not None else None,
        )
        try:
            self.dynamodb.launch()  # the JVM starts while the rest is set up
        except DynamoDBLocalError as exc:
            raise StartupError(str(exc)) from None
        prepare_environment(self.aws_url, self.ports["aws"])
        # the functions (this process) call DynamoDB Local directly; other clients reach it on the emulator's port
        os.environ["AWS_ENDPOINT_URL_DYNAMODB"] = self.dynamodb.url
        os.environ["AWS_ENDPOINT_URL_DYNAMODB_STREAMS"] = self.dynamodb.url
        # before any pool: tokens are signed with this stack's key, the one kept in the data directory if any
        self.signing_jwks, private = install_signing_key(persist.signing_key(data))
        persist.keep_signing_key(data, private)
        patch_moto_streams()
        emulator = make_emulator_server(
            sockets["aws"], dynamodb=(self.dynamodb.host, self.dynamodb.port), data_dir=data
        )
        self._serve("aws", emulator)
        try:
            self.dynamodb.wait_ready()
        except DynamoDBLocalError as exc:
            raise StartupError(str(exc)) from None
        try:
            self.resources = resources = create_resources(
                model, self.client, local_visibility_timeout=options.visibility_timeout
            )
        except ResourceError as exc:
            raise StartupError(str(exc)) from exc
        if model.event_buses:
            self.events_queue = route_events(model.event_buses, self.client)
        restored = False
        if data is not None:
            try:
                s3 = persist.restore_s3(data)
                messages = persist.restore_queues(data)
                redelivered = persist.redeliver(data, s3.notifications)
                sessions = stspersist.restore_sessions(data)
            except persist.UnsafeStateError as exc:
                raise StartupError(str(exc)) from None
            restored = bool(s3.objects or s3.uploads or messages or persist.kept_pools(data))
            log.info(
                "state from %s: %d object(s), %d multipart upload(s), %d queued message(s) (%d S3 notification(s) "
                "put back with their objects), %d STS session(s)",
                data,
                s3.objects,
                s3.uploads,
                messages + redelivered,
                redelivered,
                sessions,
            )
            self.queue_snapshots = persist.QueueSnapshots(data)
            self.queue_snapshots.start()
        self.pool = self._create_pool(model)
        authorizers = self._authorizers(model)
        self.environment = self._function_environment(model)
        os.environ.update(self.environment)

        readable = not options.json_logs and options.log_level.upper() != "DEBUG"
        self.runtime = runtime = Runtime(model.functions, options.root, readable_logs=readable)
        self.import_errors = runtime.load_all()
        auth = (
            {
                "endpoint": self.aws_url + "/",
                "clientId": self.pool.client_id,
                "region": self.pool.region,
                "hint": local_users_hint(self.pool.users, self.pool.password),
            }
            if self.pool is not None
            else None
        )
        api = HttpApi(
            model.routes,
            model.cors,
            runtime,
            options.web_path,
            authorizers=authorizers,
            config_script=config_js(auth),
            openapi_document=options.root / "docs" / "openapi.yaml",
            page_headers=page_headers(connect=[self.aws_url]),  # S3 and the sign-in are the emulator's
        )
        self._serve("api", self._server(sockets["api"], api))
        self._serve("lambda", self._server(sockets["lambda"], LambdaApi(runtime)))

        for source in model.sqs_sources:
            queue = resources.queues[source.queue_logical_id]
            if not source.enabled:
                log.info("event source %s of %s is disabled in the template", queue.name, source.function)
                continue
            dead_letter = resources.queues.get(queue.dead_letter_queue) if queue.dead_letter_queue else None
            limit = source.maximum_concurrency or options.ingest_concurrency
            if options.batching_window is not None:
                source = dataclasses.replace(source, batching_window_seconds=options.batching_window)
            poller = SqsPoller(
                source,
                queue,
                runtime,
                self.client,
                concurrency=min(options.ingest_concurrency, limit),
                dead_letter_queue=dead_letter.name if dead_letter else None,
            )
            poller.start()
            self.pollers.append(poller)

        for stream in model.stream_sources:
            if not stream.enabled:
                log.info("stream event source %s of %s is disabled in the template", stream.event_name, stream.function)
                continue
            failure = resources.queues.get(stream.on_failure_queue) if stream.on_failure_queue else None
            stream_poller = StreamPoller(
                stream,
                resources.tables[stream.table_logical_id],
                runtime.invoke,
                self.client,
                on_failure_url=failure.url if failure else None,
                checkpoint=data / f"stream-{stream.table_logical_id}.json" if data is not None else None,
            )
            stream_poller.start()
            self.stream_pollers.append(stream_poller)

        for schedule in model.schedule_sources:
            timer = ScheduleTimer(schedule, runtime.invoke, _utc_now, schedule_interval(schedule))
            timer.start()
            self.schedules.append(timer)

        counters = self.environment.get("DDB_COUNTERS_TABLE")
        if data is not None and counters:
            freed = free_orphaned_lease(self.client("dynamodb"), counters)
            if freed:
                log.info("reconcile lease of a run of the last start (%s) released", freed)
        self.state_machines = start_state_machines(self)
        if data is not None:
            # executions that were running when the last start ended run again (a large object's hashing goes on
            # from its stored state); then every execution started is kept until it ends
            resumed = sfnpersist.resume(data, self.client("stepfunctions"))
            if resumed:
                log.info("%d Step Functions execution(s) of the last start resumed", resumed)
            restored = restored or bool(resumed)
            reconcile = self.state_machines.get(RECONCILE_LOGICAL_ID)
            self.kept_executions = sfnpersist.KeptExecutions(data, skip=frozenset([reconcile] if reconcile else []))
            self.kept_executions.install()
            self.kept_executions.start()
        # a restart finishes what was in flight: the reconcile runs at once (then on its timer)
        self.reconcile = start_reconcile_schedule(self, first=1.0 if restored else None, machines=self.state_machines)

    def _create_pool(self, model: LocalModel) -> LocalPool | None:
        """The template's user pool, client and groups on the emulator, with the local users (dfdlocal.cognito);
        its id and client id then stand for ``!Ref UserPool`` / ``!Ref UserPoolClient`` (the authorizer's
        issuer and audience)."""
        assert model.resolver is not None
        resolver = model.resolver
        if not any(isinstance(r, dict) and r.get("Type") in COGNITO_TYPES for r in resolver.resources.values()):
            return None
        try:
            definitions = cognito_definitions(resolver.template, resolver.resolve)
            data = self.options.data_dir
            kept = persist.restore_cognito(data) if data is not None else []
            idp = self.client("cognito-idp")
            if kept:
                pool = adopt(idp, kept[0], endpoint=self.aws_url, password=self.options.password)
            else:
                pool = bootstrap(idp, definitions, endpoint=self.aws_url, password=self.options.password)
            if data is not None:
                persist.save_cognito(data)
        except CognitoTemplateError as exc:
            raise StartupError(f"template {self.options.template_path}: {exc}") from None
        except Exception as exc:  # the emulator refused a pool setting, the password policy...
            raise StartupError(f"cannot create the user pool: {exc}") from exc
        pool_id = pool.user_pool_id
        provider = f"cognito-idp.{REGION}.amazonaws.com/{pool_id}"
        resolver.bind(
            definitions.pool_logical_id,
            pool_id,
            {
                "Arn": f"arn:aws:cognito-idp:{REGION}:{ACCOUNT_ID}:userpool/{pool_id}",
                "ProviderName": provider,
                "ProviderURL": f"https://{provider}",
                "UserPoolId": pool_id,
            },
        )
        resolver.bind(definitions.client_logical_id, pool.client_id, {"ClientId": pool.client_id})
        log.info("user pool %s, client %s: users %s", pool_id, pool.client_id, ", ".join(pool.users))
        return pool

    def _authorizers(self, model: LocalModel) -> dict[str, RouteAuthorizer]:
        """The JWT authorizers the routes use, configured from the template (issuer, audience, identity source)."""
        assert model.resolver is not None
        used = {(route.api, route.authorizer) for route in model.routes if route.authorizer is not None}
        authorizers: dict[str, RouteAuthorizer] = {}
        for api, name in sorted(used):
            definition = model.auth[api].authorizers[name]
            where = f"{api}.Auth.Authorizers.{name}"
            try:
                issuer = str(model.resolver.evaluate(api, f"{where}.JwtConfiguration.issuer", definition.issuer))
                audience = model.resolver.evaluate(api, f"{where}.JwtConfiguration.audience", definition.audience)
                header = RouteAuthorizer.identity_header(definition.identity_source)
            except (TemplateError, ValueError) as exc:
                raise StartupError(f"template {self.options.template_path}: {where}: {exc}") from None
            audiences = [str(item) for item in (audience if isinstance(audience, list) else [audience]) if item]
            if len(audiences) != 1:
                raise StartupError(f"{where}: the local stack verifies exactly one audience, got {audiences}")
            if self.pool is not None and issuer == self.pool.issuer:
                jwks: JwksSource = partial(dict, self.signing_jwks)  # the key this stack generated, no other
            else:
                log.warning("%s: issuer %s is not the local user pool: its keys are fetched from it", where, issuer)
                jwks = http_jwks_source(issuer.rstrip("/") + "/.well-known/jwks.json")
            verifier = JwtVerifier(
                issuer=issuer,
                client_id=audiences[0],
                jwks=jwks,
                token_uses=("access", "id"),  # as API Gateway: the routes' scopes keep id tokens out
            )
            authorizers[name] = RouteAuthorizer(name=name, header=header, verifier=verifier)
        return authorizers

    def _function_environment(self, model: LocalModel) -> dict[str, str]:
        """The template's variables with local values, and what makes handlers quiet and local."""
        assert self.resources is not None
        env = dict(model.environment)
        for variable, logical_id in TABLE_VARIABLES.items():
            if variable not in env and logical_id in self.resources.tables:
                env[variable] = TABLES[logical_id]
        if "S3_BUCKET" not in env and len(self.resources.buckets) == 1:
            env["S3_BUCKET"] = next(iter(self.resources.buckets.values()))
        if self.pool is not None:
            # the /lfs routes verify tokens themselves (dfd.identity.credentials): the pool exists only now (the
            # template's variables were read with placeholder ids), and its keys are on the emulator
            if "JWT_ISSUER" in env:
                env["JWT_ISSUER"] = self.pool.issuer
            if "JWT_AUDIENCE" in env:
                env["JWT_AUDIENCE"] = self.pool.client_id
            if "USER_POOL_ID" in env:
                env["USER_POOL_ID"] = self.pool.user_pool_id
            env["JWKS_URL"] = self.pool.jwks_url
        if "LFS_API_URL" in env:  # the links the /lfs routes hand out: this API, as clients reach it
            env["LFS_API_URL"] = self.api_url
        env.setdefault("POWERTOOLS_SERVICE_NAME", "dfd")
        env.setdefault("POWERTOOLS_METRICS_NAMESPACE", "dfd")
        env["POWERTOOLS_LOG_LEVEL"] = self.options.log_level.upper()
        env["POWERTOOLS_TRACE_DISABLED"] = "true"
        if not self.options.json_logs and self.options.log_level.upper() != "DEBUG":
            env["POWERTOOLS_METRICS_DISABLED"] = "true"  # the EMF lines are for CloudWatch, not for a reader
        env.setdefault("MULTIPART_MIN_PART_BYTES", str(5 * 1024 * 1024))  # S3's minimum part: small local uploads
        env["AWS_XRAY_SDK_ENABLED"] = "false"
        return env

    def _server(self, sock: socket.socket, app: Any) -> BaseWSGIServer:
        host, port = sock.getsockname()[:2]
        return make_server(host, port, app, threaded=True, request_handler=_QuietRequestHandler, fd=sock.fileno())

    def _serve(self, name: str, server: BaseWSGIServer) -> None:
        wrapped = _Server(name, server)
        self._servers.append(wrapped)
        wrapped.start()

    def stop(self) -> None:
        """Stop pollers, the reconcile timer and the servers (the emulator last). Safe to call twice."""
        if not self._started:
            return
        self._started = False
        if self.kept_executions is not None:
            self.kept_executions.stop()  # the executions running now are the ones the next start resumes
            self.kept_executions = None
        for poller in self.pollers:
            poller.stop()
        self.pollers = []
        for stream_poller in self.stream_pollers:
            stream_poller.stop()
        self.stream_pollers = []
        for timer in self.schedules:
            timer.stop()
        self.schedules = []
        if self.reconcile is not None:
            self.reconcile.stop()
            self.reconcile = None
        if self.queue_snapshots is not None:
            self.queue_snapshots.stop()  # the queues as they are now, before the emulator stops
            self.queue_snapshots = None
        for server in reversed(self._servers):
            server.stop()
        self._servers = []
        if self.dynamodb is not None:
            self.dynamodb.stop()
        log.debug("local stack stopped")

    def __enter__(self) -> LocalStack:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- description (banner, --ready-file, tests) --------------------------------------------------
    def describe(self) -> dict[str, Any]:
        assert self.model is not None and self.resources is not None
        queues = {
            logical_id: {
                "name": info.name,
                "url": info.url,
                "arn": info.arn,
                "visibility_timeout": info.visibility_timeout,
                "dead_letter_queue": info.dead_letter_queue,
                "max_receive_count": info.max_receive_count,
            }
            for logical_id, info in self.resources.queues.items()
        }
        return {
            "api_url": self.api_url,
            "lambda_url": self.lambda_url,
            "aws_url": self.aws_url,
            "dynamodb_url": self.dynamodb.url if self.dynamodb is not None else None,
            "data_dir": str(self.options.data_dir) if self.options.data_dir is not None else None,
            "region": REGION,
            "template": str(self.options.template_path),
            "tables": dict(self.resources.tables),
            "buckets": dict(self.resources.buckets),
            "queues": queues,
            "functions": sorted(self.model.functions),
            "state_machines": dict(self.state_machines),
            "routes": [route.route_key + " " + route.function for route in self.model.routes],
            "environment": dict(self.environment),
            "import_errors": dict(self.import_errors),
            "cognito": self.pool.describe(self.aws_url) if self.pool is not None else None,
            "events": (
                {
                    "buses": dict(self.model.event_buses),
                    "queue": self.events_queue[0],
                    "queue_url": self.events_queue[1],
                    "streams": [poller.description for poller in self.stream_pollers],
                }
                if self.events_queue is not None
                else None
            ),
        }


def local_users_hint(users: Mapping[str, str], password: str) -> str:
    """The sign-in form's line on the local stack: who can sign in, with which password (never on AWS)."""
    groups: dict[str, list[str]] = {}
    for user, group in users.items():
        groups.setdefault(group, []).append(user)
    who = "; ".join(
        f"{', '.join(names)} ({'admin' if group == ADMIN_GROUP else 'tenant ' + group.removeprefix('tenant-')})"
        for group, names in groups.items()
    )
    return f"Local stack users: {who}. Password: {password}"
