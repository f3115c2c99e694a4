"""``python -m dfdlocal`` (``make run``): the local stack in the foreground until Ctrl-C.

Exit status: 0 after Ctrl-C/SIGTERM, 2 when it cannot start (port in use, bad template or option).
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import shutil
import signal
import sys
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from types import FrameType

from dfdlocal.cognito import ADMIN_GROUP, DEFAULT_PASSWORD, LOCAL_USERS
from dfdlocal.names import API_PORT, AWS_PORT, LAMBDA_PORT, TABLES
from dfdlocal.stack import DATA_ENTRIES, DATA_PREFIXES, LocalStack, StackOptions, StartupError

REPO_ROOT = Path(__file__).resolve().parents[2]
DATA_DIR = ".dfd"  # make run's state, in the repository (ignored by git)
# template parameters the local stack sets unless --param says otherwise: per-tenant quotas of 1 GiB and 100
# pending uploads (AWS's defaults are 0 = unlimited)
# tombstoned bytes are reaped after 10 s locally (1 hour on AWS); per-tenant quotas small enough to meet
LOCAL_PARAMETERS = ("TenantQuotaBytes=1073741824", "TenantPendingLimit=100", "DeleteGraceSeconds=10")
log = logging.getLogger("dfdlocal")


def _env_int(name: str, default: int) -> int:
    raw = os.environ.get(name, "").strip()
    if not raw:
        return default
    try:
        return int(raw)
    except ValueError:
        raise SystemExit(f"dfdlocal: {name}={raw!r} is not an integer") from None


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    env = os.environ.get
    parser = argparse.ArgumentParser(
        prog="python -m dfdlocal",
        description="dfd local stack: AWS emulator (moto; the tables in DynamoDB Local), HTTP API, Lambda Invoke API "
        "and the SQS poller, "
        "all created from template.yaml. Every option also reads the environment variable shown.",
        epilog="The reconcile workflow runs every DFD_RECONCILE_INTERVAL seconds (default 60; 0: only on demand, "
        "with scripts/reconcile). Every API route needs a Cognito access token (the template's JWT authorizer): "
        f"the local user pool has the users {', '.join(LOCAL_USERS)}, all with the password DFD_LOCAL_PASSWORD "
        f"(default {DEFAULT_PASSWORD!r}); TOKEN=$(scripts/token alice) gets one.",
    )
    parser.add_argument("--host", default=env("DFD_HOST", "127.0.0.1"), help="address to bind (DFD_HOST)")
    parser.add_argument(
        "--allow-remote",
        action="store_true",
        default=env("DFD_ALLOW_REMOTE", "") not in ("", "0", "false", "no"),
        help="allow a --host beyond loopback (other machines reach the API, the pages, presigned S3 URLs and the "
        "sign-in; the Lambda Invoke API and the emulator's own API stay loopback-only); needs DFD_LOCAL_PASSWORD "
        "(DFD_ALLOW_REMOTE=1)",
    )
    parser.add_argument(
        "--public-host",
        default=env("DFD_PUBLIC_HOST"),
        help="host name put in URLs given to clients, e.g. presigned URLs when other machines upload "
        "(default: --host; 127.0.0.1 when --host is 0.0.0.0 or ::) (DFD_PUBLIC_HOST)",
    )
    parser.add_argument("--api-port", type=int, default=_env_int(*API_PORT), help="HTTP API (DFD_API_PORT)")
    parser.add_argument(
        "--lambda-port", type=int, default=_env_int(*LAMBDA_PORT), help="Lambda Invoke API (DFD_LAMBDA_PORT)"
    )
    parser.add_argument("--aws-port", type=int, default=_env_int(*AWS_PORT), help="AWS emulator (DFD_AWS_PORT)")
    parser.add_argument(
        "--template",
        type=Path,
        default=Path(env("DFD_TEMPLATE", str(REPO_ROOT / "template.yaml"))),
        help="SAM template; CodeUri and web/ are relative to its directory (DFD_TEMPLATE)",
    )
    parser.add_argument("--web-root", type=Path, default=env("DFD_WEB_ROOT"), help="static files (DFD_WEB_ROOT)")
    parser.add_argument(
        "--param",
        action="append",
        default=(env("DFD_PARAMS") or "").split(),
        metavar="NAME=VALUE",
        help="override a template parameter, repeatable (DFD_PARAMS='A=1 B=2'), e.g. MultipartThresholdBytes=5242880 "
        "(multipart from 5 MiB on; local multipart parts are always at least 5 MiB, S3's minimum, not 8 MiB); the "
        "local stack's own defaults: " + " ".join(LOCAL_PARAMETERS) + " (per-tenant quotas small enough to meet; 0 = "
        "unlimited)",
    )
    parser.add_argument(
        "--visibility-timeout",
        type=int,
        default=_env_int("DFD_VISIBILITY_TIMEOUT", 2),
        help="seconds: local VisibilityTimeout of polled queues, i.e. the retry delay (DFD_VISIBILITY_TIMEOUT)",
    )
    parser.add_argument(
        "--batching-window",
        type=int,
        default=_env_int("DFD_BATCHING_WINDOW", 0),
        help="seconds the SQS event source mapping fills a batch, instead of the template's "
        "MaximumBatchingWindowInSeconds (which saves invocations on AWS; locally it delays every ingest) "
        "(DFD_BATCHING_WINDOW)",
    )
    parser.add_argument(
        "--ingest-concurrency",
        type=int,
        default=_env_int("DFD_INGEST_CONCURRENCY", 4),
        help="concurrent batches per SQS event source (DFD_INGEST_CONCURRENCY)",
    )
    parser.add_argument(
        "--data-dir",
        type=Path,
        default=Path(env("DFD_DATA_DIR") or REPO_ROOT / DATA_DIR),
        help="where the state lives across restarts: tables, objects, users, signing key, queued messages "
        f"(default {DATA_DIR}/ in the repository) (DFD_DATA_DIR)",
    )
    parser.add_argument(
        "--reset",
        action="store_true",
        default=env("DFD_RESET", "") not in ("", "0", "false"),
        help="start empty: delete the data directory's state first (make run RESET=1) (DFD_RESET)",
    )
    parser.add_argument(
        "--log-level",
        default=env("DFD_LOG_LEVEL", "INFO").upper(),
        type=str.upper,
        choices=["DEBUG", "INFO", "WARNING", "ERROR"],
        help="stack and handler log level (DFD_LOG_LEVEL)",
    )
    parser.add_argument(
        "--json-logs",
        action="store_true",
        default=env("DFD_JSON_LOGS", "") not in ("", "0", "false"),
        help="the functions' full Powertools records (JSON lines, metrics included) instead of one readable line "
        "per record; --log-level DEBUG implies it (DFD_JSON_LOGS)",
    )
    parser.add_argument(
        "--ready-file",
        type=Path,
        default=env("DFD_READY_FILE"),
        help="write the endpoints and names as JSON once ready (DFD_READY_FILE)",
    )
    args = parser.parse_args(argv)
    for item in args.param:
        if "=" not in item:
            parser.error(f"--param expects NAME=VALUE, got {item!r}")
    if args.visibility_timeout < 0 or args.visibility_timeout > 43200:
        parser.error("--visibility-timeout must be 0..43200 seconds")
    if args.ingest_concurrency < 1:
        parser.error("--ingest-concurrency must be at least 1")
    return args


def configure_logging(level: str) -> None:
    """Readable lines on stderr; the handlers' Powertools JSON lines go to stdout as in Lambda.

    The stack's loggers get their own handler: Powertools adds a filter to the root handlers that drops
    every record whose logger name contains the service name ("dfd"), which "dfdlocal.*" does.
    """
    formatter = logging.Formatter("%(asctime)s %(levelname)-7s %(name)-16s %(message)s", "%H:%M:%S")
    for logger_name in ("", "dfdlocal"):
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(formatter)
        logger = logging.getLogger(logger_name)
        logger.handlers[:] = [handler]
        logger.setLevel(level)
    logging.getLogger("dfdlocal").propagate = False
    for noisy in ("botocore", "boto3", "urllib3", "s3transfer", "werkzeug", "moto", "flask_cors"):
        logging.getLogger(noisy).setLevel(logging.WARNING)


def banner(stack: LocalStack, reset: bool) -> str:
    assert stack.model is not None and stack.resources is not None
    model, resources = stack.model, stack.resources
    lines = [
        "",
        f"dfd local stack  (template {model.path})",
        f"  state kept in {stack.options.data_dir} across restarts"
        + ("  (--reset: started empty)" if reset else "  (make run RESET=1 starts empty)")
        + ", Ctrl-C stops everything",
        "",
        f"Web pages           {stack.api_url}/   {stack.api_url}/admin",
        "",
        f"HTTP API            {stack.api_url}",
    ]
    width = max((len(route.route_key) for route in model.routes), default=0)
    for route in model.routes:
        function = model.functions[route.function]
        guard = f"  [{route.authorizer}: {' '.join(route.scopes) or 'token'}]" if route.authorizer else "  [open]"
        lines.append(f"  {route.route_key:<{width}}  -> {route.function:<20} {function.handler}{guard}")
    lines.append(f"  {'GET /, /admin, ...':<{width}}  -> static files from {stack.options.web_path}")
    lines.append(f"  {'GET /config.js':<{width}}  -> window.DFD_CONFIG (this API, the local user pool)")
    cors = next((c for c in model.cors.values() if c is not None), None)
    if cors is not None:
        lines.append(
            f"  CORS: origins {', '.join(cors.allow_origins) or '-'}; methods {', '.join(cors.allow_methods) or '-'}"
            f"; headers {', '.join(cors.allow_headers) or '-'}; max-age {cors.max_age}"
        )
    pool = stack.pool
    if pool is not None:
        lines += [
            "",
            f"Users (Cognito)     pool {pool.user_pool_id}, app client {pool.client_id}",
            f"  password for all: {pool.password}   (DFD_LOCAL_PASSWORD)",
        ]
        for user, group in pool.users.items():
            role = (
                "admin: /admin/*, every tenant" if group == ADMIN_GROUP else f"tenant {group.removeprefix('tenant-')}"
            )
            lines.append(f"  {user:<8} group {group:<14} {role}")
        lines += [
            "  TOKEN=$(scripts/token alice)   (an access token, valid 1 hour)",
            f'  curl -H "Authorization: Bearer $TOKEN" {stack.api_url}/admin/stats   (403 for alice, 200 for admin)',
            '  no or a bad token -> 401 {"message":"Unauthorized"}',
        ]
    lines += ["", f"Lambda Invoke API   {stack.lambda_url}"]
    for name, function in model.functions.items():
        error = stack.import_errors.get(name)
        status = f"NOT LOADED: {error}" if error else function.handler
        lines.append(f"  {name:<22} {status}")
    lines.append(
        f"  aws lambda invoke --endpoint-url {stack.lambda_url} --function-name IngestFunction"
        " --payload file://events/s3-put.json out.json"
    )
    lines.append("    (AWS CLI v2: add --cli-binary-format raw-in-base64-out)")
    lines += [
        "",
        f"AWS emulator (moto) {stack.aws_url}   region us-east-1, credentials testing/testing",
        f"  DynamoDB: DynamoDB Local (AWS's own emulator) at {stack.dynamodb.url if stack.dynamodb else '-'}, "
        "reached on the emulator's port too (docs/local-stack.md)",
        f"  aws --endpoint-url {stack.aws_url} dynamodb scan --table-name {TABLES['FilesTable']}",
    ]
    for logical_id, name in resources.buckets.items():
        props = model.buckets[logical_id].properties
        lines.append(f"  S3 bucket      {name:<18} ({logical_id})")
        for config in (props.get("NotificationConfiguration") or {}).get("QueueConfigurations") or []:
            rules = ((config.get("Filter") or {}).get("S3Key") or {}).get("Rules") or []
            where = " ".join(f"{rule['Name']} {rule['Value']}" for rule in rules) or "all keys"
            target = str(config.get("Queue", "")).rpartition(":")[2]
            lines.append(f"                 {config.get('Event')} ({where}) -> SQS {target}")
        for rule in (props.get("CorsConfiguration") or {}).get("CorsRules") or []:
            lines.append(
                f"                 CORS {', '.join(rule.get('AllowedMethods', []))} from "
                f"{', '.join(rule.get('AllowedOrigins', []))}"
            )
    for logical_id, name in resources.tables.items():
        props = model.tables[logical_id].properties
        keys = ", ".join(f"{k['AttributeName']} {k['KeyType']}" for k in props.get("KeySchema", []))
        extra = [f"GSI {index['IndexName']}" for index in props.get("GlobalSecondaryIndexes") or []]
        ttl = props.get("TimeToLiveSpecification")
        if ttl:
            extra.append(f"TTL {ttl.get('AttributeName')}")
        lines.append(f"  DynamoDB       {name:<18} ({logical_id}) {keys}{'; ' if extra else ''}{'; '.join(extra)}")
        env_names = [key for key, value in stack.environment.items() if value == name and key.endswith("TABLE")]
        if env_names:
            lines[-1] += f"  [{', '.join(env_names)}]"
    sources = {source.queue_logical_id: source for source in model.sqs_sources}
    for logical_id, info in resources.queues.items():
        lines.append(f"  SQS            {info.name:<18} ({logical_id}) {info.url}")
        source = sources.get(logical_id)
        if source is not None:
            poller = next((p for p in stack.pollers if p.queue.logical_id == logical_id), None)
            lines.append(
                f"                 -> {source.function}: batches of {source.batch_size}"
                f"{', ReportBatchItemFailures' if source.report_batch_item_failures else ''}"
                f", {poller.concurrency if poller else 0} poller(s)"
            )
            lines.append(
                f"                 visibility timeout {info.visibility_timeout} s locally "
                f"(template {info.template_visibility_timeout} s): failed records retry after it"
            )
        if info.dead_letter_queue:
            dlq = resources.queues[info.dead_letter_queue].name
            lines.append(f"                 dead-letter queue {dlq} after {info.max_receive_count} receives")
    if stack.events_queue is not None:
        queue, url = stack.events_queue
        lines += [
            "",
            f"Events out          every event on {', '.join(model.event_buses.values())} -> SQS {queue}  {url}",
        ]
        for stream_poller in stack.stream_pollers:
            batch = stream_poller.source.batch_size
            lines.append(f"  {stream_poller.description}: batches of {batch}, PutEvents (source dfd)")
        lines.append("  scripts/events --follow   (prints them live: Upload Stored, File Stored, ...)")
    lines += ["", "Reconcile workflow  " + (stack.reconcile.describe() if stack.reconcile else "not wired yet")]
    for timer in stack.schedules:
        lines.append("Schedule            " + timer.describe())
    for logical_id, machine in model.state_machines.items():
        definition = machine.properties.get("DefinitionUri", "an inline definition")
        lines.append(f"  {logical_id} ({machine.name}): {definition}, executed by the emulator")
    shown = ("DDB_TABLE", "DDB_COUNTERS_TABLE", "UPLOADS_TABLE", "EVENTS_TABLE", "S3_BUCKET", "UPLOAD_PREFIX")
    lines += ["", "Function environment (os.environ of this process):"]
    lines.append("  " + "  ".join(f"{key}={stack.environment[key]}" for key in shown if key in stack.environment))
    lines.append("  AWS_ENDPOINT_URL=" + stack.aws_url)
    if model.ignored:
        lines += ["", "Not emulated: " + ", ".join(f"{lid} ({kind})" for lid, kind in model.ignored.items())]
    for note in resources.notes:
        lines.append(f"Note: {note}")
    lines.append("")
    return "\n".join(lines)


def reset_data(data_dir: Path | None) -> None:
    """Delete what a stack kept in ``data_dir`` (its known entries only: a mistyped --data-dir loses nothing else)."""
    if data_dir is None or not data_dir.is_dir():
        return
    for entry in data_dir.iterdir():
        if entry.name in DATA_ENTRIES or entry.name.startswith(DATA_PREFIXES):
            shutil.rmtree(entry) if entry.is_dir() else entry.unlink()


def _install_signal_handlers(stop: threading.Event) -> None:
    first: list[float] = []

    def handle(signum: int, frame: FrameType | None) -> None:
        if not first:
            first.append(time.monotonic())
            stop.set()
        elif time.monotonic() - first[0] > 1.0:  # a second Ctrl-C: do not wait for a clean stop
            os._exit(130)
        # a repeat within 1 s is the same Ctrl-C delivered twice (to the process and to its group)

    handler: Callable[[int, FrameType | None], None] = handle
    signal.signal(signal.SIGINT, handler)
    signal.signal(signal.SIGTERM, handler)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    configure_logging(args.log_level)
    template = args.template.resolve()
    options = StackOptions(
        root=template.parent,
        template=template,
        web_root=args.web_root.resolve() if args.web_root else None,
        host=args.host,
        public_host=args.public_host,
        api_port=args.api_port,
        lambda_port=args.lambda_port,
        aws_port=args.aws_port,
        visibility_timeout=args.visibility_timeout,
        ingest_concurrency=args.ingest_concurrency,
        batching_window=args.batching_window,
        parameters=dict(item.split("=", 1) for item in (*LOCAL_PARAMETERS, *args.param)),
        log_level=args.log_level,
        json_logs=args.json_logs,
        allow_remote=args.allow_remote,
        data_dir=args.data_dir.resolve(),
    )
    if args.reset:
        reset_data(options.data_dir)
    stop = threading.Event()
    _install_signal_handlers(stop)
    stack = LocalStack(options)
    try:
        stack.start()
    except StartupError as exc:
        print(f"dfdlocal: {exc}", file=sys.stderr, flush=True)
        return 2
    try:
        print(banner(stack, args.reset), flush=True)
        if args.ready_file:
            temporary = args.ready_file.with_name(args.ready_file.name + ".tmp")
            temporary.write_text(json.dumps(stack.describe(), indent=2))
            temporary.replace(args.ready_file)
        while not stop.wait(0.5):
            pass
        log.info("stopping...")
    finally:
        stack.stop()
    log.info("stopped")
    return 0


if __name__ == "__main__":
    sys.exit(main())
