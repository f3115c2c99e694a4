"""The AWS emulator: moto's server app behind a werkzeug server, DynamoDB serialized, resources from the model.

moto's DynamoDB backend is not safe under concurrent requests (transactions interleave), so every request
whose ``X-Amz-Target`` names DynamoDB runs under one lock, response body included. Other services run
concurrently (an SQS long poll must not block DynamoDB).

moto reads some settings from the environment at import time: import this module's moto parts only after
:func:`prepare_environment` (``MOTO_DISABLE_GLOBAL_CORS`` makes the bucket CORS rules authoritative instead
of moto's allow-everything CORS layer).
"""

from __future__ import annotations

import ipaddress
import json
import logging
import os
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from werkzeug.serving import BaseWSGIServer, make_server

from dfdlocal import s3store
from dfdlocal.cognito import COGNITO_TARGET_PREFIX, CognitoCors
from dfdlocal.ddblocal import ForwardDynamoDB
from dfdlocal.names import ACCOUNT_ID, CREDENTIALS, REGION
from dfdlocal.persist import PersistCognito, PersistS3
from dfdlocal.s3auth import PresignedS3Guard, S3RequestChecks, opaque_object_bodies
from dfdlocal.s3session import IssuedCredentialsGuard, is_temporary_s3_request, moto_role_policies, moto_sessions
from dfdlocal.stspersist import PersistSts
from dfdlocal.template import BucketDef, LocalModel, QueueDef, RoleDef, TableDef

if TYPE_CHECKING:
    import socket

    from _typeshed.wsgi import StartResponse, WSGIApplication, WSGIEnvironment

log = logging.getLogger("dfdlocal.aws")

DYNAMODB_TARGET_PREFIX = "DynamoDB_20120810"
# stream reads share the lock: a transaction's records are appended one write at a time (dfdlocal.streams)
DYNAMODB_STREAMS_TARGET_PREFIX = "DynamoDBStreams_20120810"
# What to pass read_model as the endpoint when the resources go to in-process moto (mock_aws): its queue URLs
IN_PROCESS_ENDPOINT = f"https://sqs.{REGION}.amazonaws.com"


def prepare_environment(endpoint: str, port: int) -> None:
    """Point every AWS SDK call of this process (handlers included) at the emulator, before any import."""
    for name in list(os.environ):
        # A profile or service-specific endpoint from the developer's shell would win over ours.
        if name in ("AWS_PROFILE", "AWS_DEFAULT_PROFILE") or name.startswith("AWS_ENDPOINT_URL_"):
            del os.environ[name]
    os.environ.update(CREDENTIALS)
    os.environ["AWS_DEFAULT_REGION"] = REGION
    os.environ["AWS_REGION"] = REGION
    os.environ["AWS_ENDPOINT_URL"] = endpoint
    # The Step Functions executor calls back to localhost:$MOTO_PORT.
    os.environ["MOTO_PORT"] = str(port)
    os.environ.setdefault("MOTO_DISABLE_GLOBAL_CORS", "true")
    # parts and objects up to 64 MiB in memory (moto's default, 5 MiB, sent every part to a temporary file)
    os.environ.setdefault(s3store.ENVIRONMENT, str(s3store.KEY_BUFFER_BYTES))


class SerializeDynamoDB:
    """WSGI middleware: one DynamoDB (or DynamoDB Streams) request at a time (the whole response under the lock)."""

    def __init__(self, app: WSGIApplication) -> None:
        self.app = app
        self.lock = threading.Lock()

    def __call__(self, environ: WSGIEnvironment, start_response: StartResponse) -> Iterable[bytes]:
        if not str(environ.get("HTTP_X_AMZ_TARGET", "")).startswith(
            (DYNAMODB_TARGET_PREFIX, DYNAMODB_STREAMS_TARGET_PREFIX)
        ):
            return self.app(environ, start_response)
        with self.lock:
            result = self.app(environ, start_response)
            try:
                return [b"".join(result)]
            finally:
                close: Callable[[], None] | None = getattr(result, "close", None)
                if close is not None:
                    close()


def _s3_bucket(name: str) -> Any:
    """moto's bucket (this process's emulator), or None."""
    from moto.s3.models import s3_backends

    return s3_backends[ACCOUNT_ID]["aws"].buckets.get(name)


def bucket_cors_headers(bucket_name: str, origin: str, method: str) -> list[tuple[str, str]]:
    """The headers S3 adds to an actual (non-preflight) request whose origin and method match one of the
    bucket's CORS rules (the first that matches), whatever the response's status."""
    from moto.s3.utils import cors_matches_origin

    bucket = _s3_bucket(bucket_name)
    for rule in getattr(bucket, "cors", None) or []:
        methods = list(rule.allowed_methods or [])
        if method.upper() not in methods or not cors_matches_origin(origin, rule.allowed_origins or []):
            continue
        wildcard = "*" in (rule.allowed_origins or [])
        headers = [
            ("Access-Control-Allow-Origin", "*" if wildcard else origin),
            ("Access-Control-Allow-Methods", ", ".join(methods)),
            ("Vary", "Origin, Access-Control-Request-Headers, Access-Control-Request-Method"),
        ]
        if rule.exposed_headers:
            headers.append(("Access-Control-Expose-Headers", ", ".join(rule.exposed_headers)))
        if rule.max_age_seconds is not None:
            headers.append(("Access-Control-Max-Age", str(rule.max_age_seconds)))
        if not wildcard:
            headers.append(("Access-Control-Allow-Credentials", "true"))
        return headers
    return []


def multipart_exists(bucket_name: str, key: str, upload_id: str) -> bool:
    bucket = _s3_bucket(bucket_name)
    upload = bucket.multiparts.get(upload_id) if bucket is not None else None
    return upload is not None and upload.key_name == key


class VerifyPresigned:
    """WSGI middleware: presigned S3 requests are checked as S3 does (signature, every x-amz-* header signed,
    expiry, body checksums), which moto skips, and answered with the bucket's CORS headers; CORS preflights
    (OPTIONS, never signed) go straight to moto."""

    def __init__(self, app: WSGIApplication) -> None:
        self.app = app
        self.guard = PresignedS3Guard(app, self.secret, cors=bucket_cors_headers, multipart_exists=multipart_exists)

    @staticmethod
    def secret(access_key: str) -> str | None:
        return CREDENTIALS["AWS_SECRET_ACCESS_KEY"] if access_key == CREDENTIALS["AWS_ACCESS_KEY_ID"] else None

    def __call__(self, environ: WSGIEnvironment, start_response: StartResponse) -> Iterable[bytes]:
        if environ.get("REQUEST_METHOD") == "OPTIONS":
            return self.app(environ, start_response)
        return self.guard(environ, start_response)


# What Cognito answers without AWS credentials (the caller holds a password or a token): the web sign-in's calls
COGNITO_PUBLIC_ACTIONS = frozenset(
    f"{COGNITO_TARGET_PREFIX}{action}"
    for action in (
        "InitiateAuth",
        "RespondToAuthChallenge",
        "GetUser",
        "ChangePassword",
        "GlobalSignOut",
        "RevokeToken",
        "ForgotPassword",
        "ConfirmForgotPassword",
    )
)


def _is_loopback_peer(address: str) -> bool:
    try:
        return ipaddress.ip_address(address.removeprefix("::ffff:")).is_loopback
    except ValueError:
        return False


def is_public_request(environ: WSGIEnvironment) -> bool:
    """What AWS answers anyone on the internet: presigned S3 requests (verified by the guard), S3 requests
    signed with temporary credentials (verified by IssuedCredentialsGuard), CORS preflights, Cognito's unauthenticated
    user-pool calls and its published keys. Everything else on the emulator is its API, open to whoever holds
    the public emulator credentials."""
    method = environ.get("REQUEST_METHOD", "")
    if method == "OPTIONS" or "X-Amz-Signature=" in str(environ.get("QUERY_STRING", "")):
        return True
    if is_temporary_s3_request(environ):
        return True
    if method == "POST" and not environ.get("HTTP_AUTHORIZATION"):
        return str(environ.get("HTTP_X_AMZ_TARGET", "")) in COGNITO_PUBLIC_ACTIONS
    path = str(environ.get("PATH_INFO", ""))
    return method == "GET" and path.endswith(("/.well-known/jwks.json", "/.well-known/openid-configuration"))


class LoopbackApi:
    """WSGI middleware: other machines reach only the emulator's public surface (:func:`is_public_request`);
    its API answers loopback clients alone (403 AccessDenied), whatever address the port is bound to."""

    def __init__(self, app: WSGIApplication) -> None:
        self.app = app

    def __call__(self, environ: WSGIEnvironment, start_response: StartResponse) -> Iterable[bytes]:
        if _is_loopback_peer(str(environ.get("REMOTE_ADDR", ""))) or is_public_request(environ):
            return self.app(environ, start_response)
        body = (
            b'<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>AccessDenied</Code><Message>The local AWS '
            b"emulator's API answers this machine only</Message></Error>"
        )
        start_response("403 Forbidden", [("Content-Type", "application/xml"), ("Content-Length", str(len(body)))])
        return [body]


def _cache_module_listing() -> None:
    """moto's dispatcher lists its package directory (~1 ms: a stat per entry) on every request, under its one
    lock; the listing cannot change while the process runs: listed once."""
    from moto import backends

    listed = tuple(backends.list_of_moto_modules())
    backends.list_of_moto_modules = lambda: listed


def make_emulator_server(
    sock: socket.socket, dynamodb: tuple[str, int] | None = None, data_dir: Path | None = None
) -> BaseWSGIServer:
    """moto's server app on an already bound socket (call after :func:`prepare_environment`); with ``dynamodb``
    (host, port of DynamoDB Local) its DynamoDB and DynamoDB Streams requests go there, else to moto (serialized);
    with ``data_dir`` every change to S3 objects and to the user pools, and the credentials STS issues, are kept
    there before they are answered (dfdlocal.persist, dfdlocal.stspersist)."""
    from moto.moto_server.werkzeug_app import (
        DomainDispatcherApplication,
        MotoRequestHandler,
        create_backend_app,
    )

    class QuietMotoRequestHandler(MotoRequestHandler):
        """One line per request at DEBUG: the poller's long polls would flood INFO."""

        def log_request(self, code: int | str = "-", size: int | str = "-") -> None:
            if log.isEnabledFor(logging.DEBUG):
                log.debug("%s %s -> %s", self.command, self.path.split("?", 1)[0], code)

        def log_error(self, format: str, *args: Any) -> None:
            log.debug(format, *args)

    s3store.install()
    _cache_module_listing()
    # a body S3 reads as bytes moto reads as bytes, whatever its Content-Type (S3RequestChecks holds a form's)
    dispatcher = DomainDispatcherApplication(opaque_object_bodies(create_backend_app))
    store: WSGIApplication = dispatcher if data_dir is None else PersistS3(dispatcher, data_dir)
    # every S3 request, whoever signed it, addresses what S3 would (a parseable target, a key of S3's length, an
    # UploadId of the key addressed), after the guards' signature and policy checks
    verified = VerifyPresigned(S3RequestChecks(store, multipart_exists))
    forwarded: WSGIApplication = (
        SerializeDynamoDB(verified) if dynamodb is None else ForwardDynamoDB(verified, *dynamodb)
    )
    # requests signed with credentials the emulator's STS issued (dfd/identity/s3access.py's) are checked before any
    # service sees them, DynamoDB's forwarding included: they are for S3 only
    tables: WSGIApplication = IssuedCredentialsGuard(
        forwarded, moto_sessions(ACCOUNT_ID), moto_role_policies(ACCOUNT_ID)
    )
    users = tables if data_dir is None else PersistCognito(tables, data_dir, COGNITO_TARGET_PREFIX)
    if data_dir is not None:  # the credentials STS issued (dfdlocal.stspersist)
        users = PersistSts(users, data_dir)
    app = LoopbackApi(CognitoCors(users))
    host, port = sock.getsockname()[:2]
    return make_server(host, port, app, threaded=True, request_handler=QuietMotoRequestHandler, fd=sock.fileno())


# --------------------------------------------------------------------------------------------------
# Resources from the model
# --------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class QueueInfo:
    logical_id: str
    name: str
    url: str
    arn: str
    visibility_timeout: int  # as set locally
    template_visibility_timeout: int | None
    dead_letter_queue: str | None  # logical id
    max_receive_count: int | None


class ResourceError(RuntimeError):
    """A template resource could not be created in the emulator."""


@dataclass
class Resources:
    """What :func:`create_resources` made, by logical id."""

    tables: dict[str, str] = field(default_factory=dict)
    buckets: dict[str, str] = field(default_factory=dict)
    queues: dict[str, QueueInfo] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)  # template settings not applied locally


_TABLE_CREATE_KEYS = (
    "AttributeDefinitions",
    "KeySchema",
    "BillingMode",
    "ProvisionedThroughput",
    "TableClass",
    "DeletionProtectionEnabled",
    "OnDemandThroughput",
)
_INDEX_KEYS = ("IndexName", "KeySchema", "Projection", "ProvisionedThroughput", "OnDemandThroughput")
_QUEUE_ATTRIBUTES = (
    "DelaySeconds",
    "MaximumMessageSize",
    "MessageRetentionPeriod",
    "ReceiveMessageWaitTimeSeconds",
    "VisibilityTimeout",
    "KmsMasterKeyId",
    "KmsDataKeyReusePeriodSeconds",
    "SqsManagedSseEnabled",
    "FifoQueue",
    "ContentBasedDeduplication",
    "DeduplicationScope",
    "FifoThroughputLimit",
)


def create_resources(
    model: LocalModel,
    client: Callable[[str], Any],
    *,
    local_visibility_timeout: int,
) -> Resources:
    """Create the model's queues, tables and buckets (in that order: notifications need the queues).

    ``client(service)`` returns a boto3 client for the emulator. Queues read by an event source mapping
    get ``local_visibility_timeout`` instead of the template's VisibilityTimeout, so a failed record is
    retried after seconds, not half an hour.
    """
    resources = Resources()
    polled = {source.queue_logical_id for source in model.sqs_sources}
    sqs = client("sqs")
    for queue in model.queues.values():
        with _creating(queue.logical_id):
            resources.queues[queue.logical_id] = _create_queue(sqs, queue, polled, local_visibility_timeout)
    by_arn = {info.arn: info for info in resources.queues.values()}
    for queue in model.queues.values():
        with _creating(queue.logical_id):
            _set_redrive(sqs, queue, resources, by_arn)

    dynamodb = client("dynamodb")
    existing = set(dynamodb.get_paginator("list_tables").paginate().build_full_result().get("TableNames", []))
    for table in model.tables.values():
        if table.name in existing:  # kept from the last run (DynamoDB Local's -dbPath)
            log.debug("table %s (%s) kept", table.name, table.logical_id)
        else:
            with _creating(table.logical_id):
                _create_table(dynamodb, table, resources)
        resources.tables[table.logical_id] = table.name

    if model.roles:
        iam = client("iam")
        for role in model.roles.values():
            with _creating(role.logical_id):
                _create_role(iam, role)

    s3 = client("s3")
    for bucket in model.buckets.values():
        with _creating(bucket.logical_id):
            _create_bucket(s3, bucket, resources)
        resources.buckets[bucket.logical_id] = bucket.name
    return resources


@contextmanager
def _creating(logical_id: str) -> Iterator[None]:
    try:
        yield
    except Exception as exc:
        raise ResourceError(f"creating {logical_id} from the template failed: {exc}") from exc


def _text(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, dict | list):
        return json.dumps(value)
    return str(value)


def _create_queue(sqs: Any, queue: QueueDef, polled: set[str], local_visibility: int) -> QueueInfo:
    props = queue.properties
    attributes = {key: _text(props[key]) for key in _QUEUE_ATTRIBUTES if key in props}
    template_visibility = int(props["VisibilityTimeout"]) if "VisibilityTimeout" in props else None
    if queue.logical_id in polled:
        attributes["VisibilityTimeout"] = str(local_visibility)
    url = sqs.create_queue(QueueName=queue.name, Attributes=attributes)["QueueUrl"]
    arn = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    visibility = int(attributes.get("VisibilityTimeout", "30"))
    log.debug("queue %s (%s) created: %s", queue.name, queue.logical_id, attributes)
    return QueueInfo(queue.logical_id, queue.name, url, arn, visibility, template_visibility, None, None)


def _set_redrive(sqs: Any, queue: QueueDef, resources: Resources, by_arn: Mapping[str, QueueInfo]) -> None:
    attributes: dict[str, str] = {}
    policy = queue.redrive_policy
    info = resources.queues[queue.logical_id]
    if policy is not None:
        target = by_arn.get(str(policy.get("deadLetterTargetArn")))
        if target is None:
            raise ValueError(f"{queue.logical_id}.RedrivePolicy: dead-letter queue is not in the template")
        max_receive = int(policy.get("maxReceiveCount", 10))
        attributes["RedrivePolicy"] = json.dumps({"deadLetterTargetArn": target.arn, "maxReceiveCount": max_receive})
        resources.queues[queue.logical_id] = replace(
            info, dead_letter_queue=target.logical_id, max_receive_count=max_receive
        )
    if "RedriveAllowPolicy" in queue.properties:
        attributes["RedriveAllowPolicy"] = _text(queue.properties["RedriveAllowPolicy"])
    if attributes:
        sqs.set_queue_attributes(QueueUrl=info.url, Attributes=attributes)


def _create_table(dynamodb: Any, table: TableDef, resources: Resources) -> None:
    props = table.properties
    request: dict[str, Any] = {key: props[key] for key in _TABLE_CREATE_KEYS if key in props}
    for kind in ("GlobalSecondaryIndexes", "LocalSecondaryIndexes"):
        if props.get(kind):
            request[kind] = [{k: index[k] for k in _INDEX_KEYS if k in index} for index in props[kind]]
    stream = props.get("StreamSpecification")
    if stream:
        request["StreamSpecification"] = {"StreamEnabled": True, "StreamViewType": stream["StreamViewType"]}
    if props.get("Tags"):
        request["Tags"] = props["Tags"]
    dynamodb.create_table(TableName=table.name, **request)
    ttl = props.get("TimeToLiveSpecification")
    if ttl and _enabled(ttl.get("Enabled")):  # DynamoDB Local deletes expired items as DynamoDB does
        dynamodb.update_time_to_live(
            TableName=table.name,
            TimeToLiveSpecification={"AttributeName": ttl["AttributeName"], "Enabled": True},
        )
    log.debug("table %s (%s) created", table.name, table.logical_id)


def _create_role(iam: Any, role: RoleDef) -> None:
    """The role in the emulator's IAM with its trust policy and inline policies (what the S3 guard reads)."""
    props = role.properties
    trust = json.dumps(props.get("AssumeRolePolicyDocument") or {})
    try:
        iam.create_role(
            RoleName=role.name,
            AssumeRolePolicyDocument=trust,
            MaxSessionDuration=int(props.get("MaxSessionDuration", 3600)),
        )
    except iam.exceptions.EntityAlreadyExistsException:  # an emulator shared by two model reads (the tests)
        iam.update_assume_role_policy(RoleName=role.name, PolicyDocument=trust)
    for policy in props.get("Policies") or []:
        iam.put_role_policy(
            RoleName=role.name, PolicyName=policy["PolicyName"], PolicyDocument=json.dumps(policy["PolicyDocument"])
        )
    log.debug("role %s (%s) created", role.name, role.logical_id)


def _enabled(value: Any) -> bool:
    return value is True or str(value).lower() == "true"


def _create_bucket(s3: Any, bucket: BucketDef, resources: Resources) -> None:
    props = bucket.properties
    s3.create_bucket(Bucket=bucket.name)
    cors = props.get("CorsConfiguration")
    if cors:
        rename = {"Id": "ID", "ExposedHeaders": "ExposeHeaders", "MaxAge": "MaxAgeSeconds"}
        rules = [{rename.get(key, key): value for key, value in rule.items()} for rule in cors["CorsRules"]]
        for rule in rules:
            if "MaxAgeSeconds" in rule:
                rule["MaxAgeSeconds"] = int(rule["MaxAgeSeconds"])
        s3.put_bucket_cors(Bucket=bucket.name, CORSConfiguration={"CORSRules": rules})
    versioning = props.get("VersioningConfiguration")
    if versioning:
        s3.put_bucket_versioning(Bucket=bucket.name, VersioningConfiguration={"Status": versioning["Status"]})
    public_access = props.get("PublicAccessBlockConfiguration")
    if public_access:
        s3.put_public_access_block(
            Bucket=bucket.name,
            PublicAccessBlockConfiguration={key: _enabled(value) for key, value in public_access.items()},
        )
    encryption = props.get("BucketEncryption")
    if encryption:
        rules = [
            {
                ("ApplyServerSideEncryptionByDefault" if key == "ServerSideEncryptionByDefault" else key): value
                for key, value in rule.items()
            }
            for rule in encryption["ServerSideEncryptionConfiguration"]
        ]
        s3.put_bucket_encryption(Bucket=bucket.name, ServerSideEncryptionConfiguration={"Rules": rules})
    notification = props.get("NotificationConfiguration")
    if notification:
        s3.put_bucket_notification_configuration(
            Bucket=bucket.name, NotificationConfiguration=_notification(bucket, notification, resources)
        )
    skipped = sorted(
        set(props)
        - {
            "BucketName",
            "CorsConfiguration",
            "VersioningConfiguration",
            "PublicAccessBlockConfiguration",
            "BucketEncryption",
            "NotificationConfiguration",
        }
    )
    if skipped:
        resources.notes.append(f"{bucket.name}: not applied locally: {', '.join(skipped)}")
    log.debug("bucket %s (%s) created", bucket.name, bucket.logical_id)


def _key_filter(config: Mapping[str, Any]) -> dict[str, Any]:
    rules = ((config.get("Filter") or {}).get("S3Key") or {}).get("Rules") or []
    if not rules:
        return {}
    return {"Filter": {"Key": {"FilterRules": [{"Name": r["Name"], "Value": r["Value"]} for r in rules]}}}


def _notification(bucket: BucketDef, raw: Mapping[str, Any], resources: Resources) -> dict[str, Any]:
    result: dict[str, Any] = {}
    queues = [
        {"QueueArn": config["Queue"], "Events": [config["Event"]], **_key_filter(config)}
        for config in raw.get("QueueConfigurations") or []
    ]
    if queues:
        result["QueueConfigurations"] = queues
    for kind in ("LambdaConfigurations", "TopicConfigurations"):
        if raw.get(kind):
            resources.notes.append(f"{bucket.name}: NotificationConfiguration.{kind} is not emulated")
    if raw.get("EventBridgeConfiguration"):
        resources.notes.append(f"{bucket.name}: EventBridge notifications are not delivered locally")
    return result
