"""Read template.yaml into the local model: the one source of table schemas, queues, bucket, routes, CORS.

The template is parsed with cfn-lint's decoder, which understands the CloudFormation short tags and turns them
into their long form (``!Ref X`` -> ``{"Ref": "X"}``). Only the properties the local stack uses are
evaluated, with local names standing in for what CloudFormation would generate: ``Ref``, ``Fn::Sub``,
``Fn::GetAtt`` and the few list functions the template uses on parameters (``Join``, ``Select``,
``Split``, ``If``...). Anything else raises :class:`TemplateError` naming the resource and property.
"""

from __future__ import annotations

import base64
import json
import re
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from dfdlocal import names
from dfdlocal.names import ACCOUNT_ID, REGION

TEMPLATE = Path(__file__).resolve().parents[2] / "template.yaml"  # the repository's
STACK_NAME = "dfd-local"
LOCAL_API_ID = "local"

TABLE_TYPES = {"AWS::DynamoDB::Table"}
QUEUE_TYPES = {"AWS::SQS::Queue"}
BUCKET_TYPES = {"AWS::S3::Bucket"}
FUNCTION_TYPES = {"AWS::Serverless::Function", "AWS::Lambda::Function"}
HTTP_API_TYPES = {"AWS::Serverless::HttpApi"}
COGNITO_TYPES = {"AWS::Cognito::UserPool", "AWS::Cognito::UserPoolClient", "AWS::Cognito::UserPoolGroup"}
STATE_MACHINE_TYPES = {"AWS::Serverless::StateMachine", "AWS::StepFunctions::StateMachine"}
EVENT_BUS_TYPES = {"AWS::Events::EventBus"}
ROLE_TYPES = {"AWS::IAM::Role"}
IMPLICIT_HTTP_API = "ServerlessHttpApi"

Json = Any


class TemplateError(ValueError):
    """The template cannot be read or evaluated locally (the message names the resource and property)."""


class _NoValue:
    """``AWS::NoValue``: the property is removed."""


NO_VALUE = _NoValue()


# --------------------------------------------------------------------------------------------------
# Reading the template
# --------------------------------------------------------------------------------------------------
def load_template(path: Path) -> dict[str, Any]:
    """The template as plain data, short tags in long form (cfn-lint's decoder; JSON templates load too)."""
    from cfnlint.decode import decode  # about 1 s of imports: only when a template is read

    data, problems = decode(str(path))
    if problems:
        raise TemplateError("; ".join(f"{path}:{problem.linenumber}: {problem.message}" for problem in problems))
    if not isinstance(data, dict) or not isinstance(data.get("Resources"), dict):
        raise TemplateError(f"{path} has no Resources section")
    plain: dict[str, Any] = json.loads(json.dumps(data))  # cfn-lint's str/dict subclasses (with line marks) -> plain
    return plain


# --------------------------------------------------------------------------------------------------
# Local model
# --------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class TableDef:
    logical_id: str
    name: str
    properties: dict[str, Any]  # evaluated CloudFormation properties

    @property
    def key_schema(self) -> list[dict[str, str]]:
        return list(self.properties.get("KeySchema", []))


@dataclass(frozen=True)
class QueueDef:
    logical_id: str
    name: str
    properties: dict[str, Any]

    @property
    def redrive_policy(self) -> dict[str, Any] | None:
        policy = self.properties.get("RedrivePolicy")
        return dict(policy) if isinstance(policy, dict) else None


@dataclass(frozen=True)
class BucketDef:
    logical_id: str
    name: str
    properties: dict[str, Any]


@dataclass(frozen=True)
class RoleDef:
    """An IAM role the stack's code assumes (its trust policy names no AWS service): created in the emulator's
    IAM, with its inline policies, so that the S3 guard evaluates its sessions against them."""

    logical_id: str
    name: str
    properties: dict[str, Any]  # evaluated CloudFormation properties

    @property
    def arn(self) -> str:
        return role_arn(self.name)


def role_arn(name: str) -> str:
    return f"arn:aws:iam::{ACCOUNT_ID}:role/{name}"


@dataclass(frozen=True)
class CorsConfig:
    """An HttpApi CorsConfiguration (API Gateway answers preflights and adds the headers itself)."""

    allow_origins: tuple[str, ...] = ()
    allow_methods: tuple[str, ...] = ()
    allow_headers: tuple[str, ...] = ()
    expose_headers: tuple[str, ...] = ()
    max_age: int | None = None
    allow_credentials: bool = False


@dataclass(frozen=True)
class HttpRoute:
    method: str  # upper case, or ANY
    path: str  # /metadata/{id}, /files/{proxy+} or $default
    function: str  # logical id
    api: str  # logical id of the HttpApi (ServerlessHttpApi when implicit)
    authorizer: str | None = None  # name of the HttpApi's authorizer that guards the route; None: open
    scopes: tuple[str, ...] = ()  # the route's authorization scopes (the token needs one of them)

    @property
    def route_key(self) -> str:
        return "$default" if self.path == "$default" else f"{self.method} {self.path}"


@dataclass(frozen=True)
class JwtAuthorizerDef:
    """A JWT authorizer of an HttpApi's ``Auth.Authorizers`` (SAM), its configuration still unevaluated: the
    issuer and audience name resources (the user pool, its client) whose ids exist only once they are created
    (:meth:`Resolver.bind`)."""

    api: str  # logical id of the HttpApi
    name: str
    identity_source: str  # e.g. $request.header.Authorization
    issuer: Any  # raw JwtConfiguration.issuer
    audience: Any  # raw JwtConfiguration.audience
    scopes: tuple[str, ...]  # AuthorizationScopes: the default scopes of the routes it guards


@dataclass(frozen=True)
class ApiAuth:
    """An HttpApi's ``Auth``: its authorizers and the default authorizer of its routes."""

    authorizers: dict[str, JwtAuthorizerDef]
    default_authorizer: str | None


@dataclass(frozen=True)
class SqsSource:
    """An SQS event source mapping of a function."""

    function: str
    event_name: str
    queue_logical_id: str
    batch_size: int = 10
    batching_window_seconds: int = 0
    report_batch_item_failures: bool = False
    maximum_concurrency: int | None = None
    enabled: bool = True


@dataclass(frozen=True)
class ScheduleSource:
    """A Schedule event of a function: EventBridge invokes it every `rate_seconds`."""

    function: str
    event_name: str
    rate_seconds: int
    enabled: bool = True


_RATE = re.compile(r"rate\((\d+) (minute|minutes|hour|hours|day|days)\)")
_RATE_UNITS = {"minute": 60, "hour": 3600, "day": 86400}


def rate_seconds(expression: str) -> int:
    """The period of a `rate(N unit)` schedule expression (TemplateError for anything else: cron is not emulated)."""
    match = _RATE.fullmatch(expression.strip())
    if not match or int(match.group(1)) < 1:
        raise TemplateError(f"schedule {expression!r}: only rate(N minutes|hours|days) is emulated")
    return int(match.group(1)) * _RATE_UNITS[match.group(2).removesuffix("s")]


@dataclass(frozen=True)
class StreamSource:
    """A DynamoDB stream event source mapping of a function."""

    function: str
    event_name: str
    table_logical_id: str
    batch_size: int = 100
    report_batch_item_failures: bool = False
    maximum_retry_attempts: int = -1  # -1: until the record expires (never, locally)
    on_failure_queue: str | None = None  # logical id of the SQS on-failure destination
    starting_position: str = "TRIM_HORIZON"
    enabled: bool = True


@dataclass(frozen=True)
class FunctionDef:
    logical_id: str
    handler: str  # module.function
    code_uri: str
    runtime: str
    timeout: int
    memory_size: int
    environment: dict[str, str]

    @property
    def module(self) -> str:
        return self.handler.rpartition(".")[0]

    @property
    def attribute(self) -> str:
        return self.handler.rpartition(".")[2]


@dataclass(frozen=True)
class StateMachineDef:
    logical_id: str
    name: str
    properties: dict[str, Any]  # raw (unevaluated) properties: the reconcile hook evaluates what it needs


@dataclass
class LocalModel:
    path: Path
    tables: dict[str, TableDef] = field(default_factory=dict)
    queues: dict[str, QueueDef] = field(default_factory=dict)
    buckets: dict[str, BucketDef] = field(default_factory=dict)
    functions: dict[str, FunctionDef] = field(default_factory=dict)
    routes: list[HttpRoute] = field(default_factory=list)
    cors: dict[str, CorsConfig | None] = field(default_factory=dict)  # per HttpApi logical id
    auth: dict[str, ApiAuth] = field(default_factory=dict)  # per HttpApi logical id
    sqs_sources: list[SqsSource] = field(default_factory=list)
    stream_sources: list[StreamSource] = field(default_factory=list)
    schedule_sources: list[ScheduleSource] = field(default_factory=list)
    event_buses: dict[str, str] = field(default_factory=dict)  # logical id -> local name
    state_machines: dict[str, StateMachineDef] = field(default_factory=dict)
    roles: dict[str, RoleDef] = field(default_factory=dict)  # the roles the code assumes (not the functions')
    environment: dict[str, str] = field(default_factory=dict)  # union of the functions' variables
    ignored: dict[str, str] = field(default_factory=dict)  # logical id -> type, not emulated
    warnings: list[str] = field(default_factory=list)
    resolver: Resolver | None = None


# --------------------------------------------------------------------------------------------------
# Evaluation of intrinsic functions with local names
# --------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class _Identity:
    ref: str
    attributes: Mapping[str, str]


class Resolver:
    """Evaluates intrinsic functions against parameters (defaults + overrides) and local resource names."""

    def __init__(
        self,
        template: Mapping[str, Any],
        endpoint: str,
        parameter_overrides: Mapping[str, str] | None = None,
    ) -> None:
        self.template = template
        self.endpoint = endpoint.rstrip("/")
        self.stack_id = f"arn:aws:cloudformation:{REGION}:{ACCOUNT_ID}:stack/{STACK_NAME}/{uuid.uuid4()}"
        self.parameters = self._parameters(parameter_overrides or {})
        self.resources: Mapping[str, Any] = template.get("Resources", {})
        self.names = _local_names(template)
        self._conditions: dict[str, bool] = {}
        self._bound: dict[str, _Identity] = {}

    def bind(self, logical_id: str, ref: str, attributes: Mapping[str, str] | None = None) -> None:
        """Give a resource the physical id it got when it was created (a user pool's id is chosen by the
        service, not by its name): ``Ref`` and ``Fn::GetAtt`` evaluate to these from now on."""
        self._bound[logical_id] = _Identity(ref, dict(attributes or {}))

    # -- parameters and identities -----------------------------------------------------------------
    def _parameters(self, overrides: Mapping[str, str]) -> dict[str, Any]:
        declared: Mapping[str, Any] = self.template.get("Parameters") or {}
        unknown = sorted(set(overrides) - set(declared))
        if unknown:
            raise TemplateError(f"unknown parameter(s) in overrides: {', '.join(unknown)}")
        values: dict[str, Any] = {}
        for name, spec in declared.items():
            spec = spec or {}
            if name in overrides:
                raw: Any = overrides[name]
            elif "Default" in spec:
                raw = spec["Default"]
            else:
                raise TemplateError(f"parameter {name} has no Default: pass --param {name}=VALUE")
            kind = str(spec.get("Type", "String"))
            if kind == "CommaDelimitedList" or kind.startswith("List<"):
                items = raw if isinstance(raw, list) else str(raw).split(",")
                values[name] = [str(item).strip() for item in items]
            else:
                values[name] = scalar_text(raw)
        return values

    def identity(self, logical_id: str) -> _Identity:
        if logical_id in self._bound:
            return self._bound[logical_id]
        resource = self.resources.get(logical_id)
        if not isinstance(resource, dict):
            raise TemplateError(f"reference to unknown resource {logical_id}")
        kind = resource.get("Type", "")
        name = self.names.get(logical_id, logical_id)
        arn_prefix = f"arn:aws:{{}}:{REGION}:{ACCOUNT_ID}"
        if kind in TABLE_TYPES:
            arn = f"{arn_prefix.format('dynamodb')}:table/{name}"
            return _Identity(name, {"Arn": arn, "StreamArn": f"{arn}/stream/local"})
        if kind in QUEUE_TYPES:
            url = f"{self.endpoint}/{ACCOUNT_ID}/{name}"
            arn = f"{arn_prefix.format('sqs')}:{name}"
            return _Identity(url, {"Arn": arn, "QueueName": name, "QueueUrl": url})
        if kind in BUCKET_TYPES:
            return _Identity(
                name,
                {
                    "Arn": f"arn:aws:s3:::{name}",
                    "DomainName": f"{name}.s3.amazonaws.com",
                    "RegionalDomainName": f"{name}.s3.{REGION}.amazonaws.com",
                },
            )
        if kind in FUNCTION_TYPES:
            return _Identity(name, {"Arn": f"{arn_prefix.format('lambda')}:function:{name}"})
        if kind in HTTP_API_TYPES:
            return _Identity(LOCAL_API_ID, {"ApiId": LOCAL_API_ID, "ApiEndpoint": "http://127.0.0.1"})
        if kind in STATE_MACHINE_TYPES:
            arn = f"{arn_prefix.format('states')}:stateMachine:{name}"
            return _Identity(arn, {"Arn": arn, "Name": name})
        if kind in EVENT_BUS_TYPES:
            return _Identity(name, {"Arn": f"{arn_prefix.format('events')}:event-bus/{name}", "Name": name})
        if kind in ROLE_TYPES:
            return _Identity(name, {"Arn": role_arn(name), "RoleId": f"AROA{name.upper()}"})
        return _Identity(logical_id, {})

    def _pseudo(self, name: str) -> Any:
        pseudo: dict[str, Any] = {
            "AWS::Region": REGION,
            "AWS::AccountId": ACCOUNT_ID,
            "AWS::StackName": STACK_NAME,
            "AWS::StackId": self.stack_id,
            "AWS::Partition": "aws",
            "AWS::URLSuffix": "amazonaws.com",
            "AWS::NoValue": NO_VALUE,
            "AWS::NotificationARNs": [],
        }
        if name not in pseudo:
            raise TemplateError(f"unknown pseudo parameter {name}")
        return pseudo[name]

    def ref(self, name: str) -> Any:
        if name.startswith("AWS::"):
            return self._pseudo(name)
        if name in self.parameters:
            return self.parameters[name]
        return self.identity(name).ref

    def get_att(self, logical_id: str, attribute: str) -> str:
        attributes = self.identity(logical_id).attributes
        if attribute not in attributes:
            raise TemplateError(f"Fn::GetAtt {logical_id}.{attribute} cannot be evaluated locally")
        return attributes[attribute]

    # -- conditions ---------------------------------------------------------------------------------
    def condition(self, name: str) -> bool:
        if name not in self._conditions:
            conditions: Mapping[str, Any] = self.template.get("Conditions") or {}
            if name not in conditions:
                raise TemplateError(f"unknown condition {name}")
            self._conditions[name] = bool(self.resolve(conditions[name]))
        return self._conditions[name]

    # -- the evaluator ------------------------------------------------------------------------------
    def resolve(self, node: Any) -> Any:
        if isinstance(node, list):
            items = [self.resolve(item) for item in node]
            return [item for item in items if item is not NO_VALUE]
        if not isinstance(node, dict):
            return node
        if len(node) == 1:
            ((key, arg),) = node.items()
            if key == "Ref":
                return self.ref(str(arg))
            if key == "Condition" and isinstance(arg, str):
                return self.condition(arg)
            if key == "Fn::GetAtt":
                parts = arg.split(".", 1) if isinstance(arg, str) else [self.resolve(part) for part in arg]
                return self.get_att(str(parts[0]), str(parts[1]))
            if key == "Fn::Sub":
                return self._sub(arg)
            if key == "Fn::Join":
                separator, values = arg
                return str(separator).join(scalar_text(v) for v in self._list(values))
            if key == "Fn::Select":
                index, values = arg
                return self._list(values)[int(self.resolve(index))]
            if key == "Fn::Split":
                separator, text = arg
                return str(self.resolve(text)).split(str(separator))
            if key == "Fn::If":
                name, when_true, when_false = arg
                return self.resolve(when_true if self.condition(str(name)) else when_false)
            if key == "Fn::Equals":
                left, right = (self.resolve(side) for side in arg)
                return scalar_text(left) == scalar_text(right)
            if key == "Fn::Not":
                return not self.resolve(arg[0])
            if key == "Fn::And":
                return all(self.resolve(item) for item in arg)
            if key == "Fn::Or":
                return any(self.resolve(item) for item in arg)
            if key == "Fn::FindInMap":
                mapping, top, second = (self.resolve(part) for part in arg[:3])
                return self.template["Mappings"][mapping][top][second]
            if key == "Fn::Base64":
                return base64.b64encode(str(self.resolve(arg)).encode()).decode()
            if key == "Fn::GetAZs":
                return [f"{REGION}a", f"{REGION}b", f"{REGION}c"]
            if key.startswith("Fn::"):
                raise TemplateError(f"{key} cannot be evaluated locally")
        resolved = {key: self.resolve(value) for key, value in node.items()}
        return {key: value for key, value in resolved.items() if value is not NO_VALUE}

    def _list(self, values: Any) -> list[Any]:
        resolved = self.resolve(values)
        if not isinstance(resolved, list):
            raise TemplateError(f"expected a list, got {resolved!r}")
        return resolved

    def _sub(self, arg: Any) -> str:
        if isinstance(arg, list):
            text, variables = str(arg[0]), {k: self.resolve(v) for k, v in (arg[1] or {}).items()}
        else:
            text, variables = str(arg), {}

        def replace(match: re.Match[str]) -> str:
            expression = match.group(1)
            if expression.startswith("!"):
                return "${" + expression[1:] + "}"
            if expression in variables:
                return scalar_text(variables[expression])
            if "." in expression and not expression.startswith("AWS::"):
                logical_id, _, attribute = expression.partition(".")
                return self.get_att(logical_id, attribute)
            return scalar_text(self.ref(expression))

        return re.sub(r"\$\{([^}]+)\}", replace, text)

    def evaluate(self, logical_id: str, what: str, node: Any) -> Any:
        """Resolve ``node`` with the resource and property in any error message."""
        try:
            return self.resolve(node)
        except TemplateError as exc:
            raise TemplateError(f"{logical_id}.{what}: {exc}") from None
        except (KeyError, IndexError, TypeError, ValueError) as exc:
            raise TemplateError(f"{logical_id}.{what}: cannot evaluate {node!r}: {exc!r}") from None


def scalar_text(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list):
        return ",".join(scalar_text(item) for item in value)
    return str(value)


def _local_names(template: Mapping[str, Any]) -> dict[str, str]:
    resources: Mapping[str, Any] = template.get("Resources", {})
    by_type: dict[str, list[str]] = {}
    for logical_id, resource in resources.items():
        if isinstance(resource, dict):
            by_type.setdefault(str(resource.get("Type", "")), []).append(logical_id)

    local: dict[str, str] = {}
    for kind in TABLE_TYPES:
        for logical_id in by_type.get(kind, []):
            local[logical_id] = names.table_name(logical_id)
    buckets = [lid for kind in BUCKET_TYPES for lid in by_type.get(kind, [])]
    main_bucket = _main_bucket(template, buckets)
    for logical_id in buckets:
        local[logical_id] = names.BUCKET if logical_id == main_bucket else names.other_bucket_name(logical_id)
    for kind in QUEUE_TYPES:
        for logical_id in by_type.get(kind, []):
            resource = resources[logical_id]
            fifo = bool((resource.get("Properties") or {}).get("FifoQueue"))
            local[logical_id] = names.queue_name(logical_id, fifo=fifo)
    for kind in STATE_MACHINE_TYPES:
        for logical_id in by_type.get(kind, []):
            local[logical_id] = names.state_machine_name(logical_id)
    for kind in EVENT_BUS_TYPES:
        for logical_id in by_type.get(kind, []):
            local[logical_id] = names.event_bus_name(logical_id)
    for kind in ROLE_TYPES:
        for logical_id in by_type.get(kind, []):
            local[logical_id] = names.role_name(logical_id)
    return local


def _main_bucket(template: Mapping[str, Any], buckets: list[str]) -> str | None:
    """The bucket the functions know as S3_BUCKET (or the only bucket): it gets the fixed local name."""
    if len(buckets) == 1:
        return buckets[0]
    variables = (((template.get("Globals") or {}).get("Function") or {}).get("Environment") or {}).get(
        "Variables"
    ) or {}
    ref = variables.get("S3_BUCKET")
    if isinstance(ref, dict) and ref.get("Ref") in buckets:
        return str(ref["Ref"])
    return buckets[0] if buckets else None


# --------------------------------------------------------------------------------------------------
# The model
# --------------------------------------------------------------------------------------------------
def read_model(
    path: Path,
    endpoint: str,
    parameter_overrides: Mapping[str, str] | None = None,
) -> LocalModel:
    """Everything the local stack creates and hosts, read from the template at ``path``.

    ``endpoint`` is the emulator's URL (queue URLs are built from it).
    """
    template = load_template(path)
    resolver = Resolver(template, endpoint, parameter_overrides)
    model = LocalModel(path=path, resolver=resolver)
    globals_ = template.get("Globals") or {}
    function_globals: Mapping[str, Any] = globals_.get("Function") or {}

    for logical_id, resource in resolver.resources.items():
        if not isinstance(resource, dict):
            raise TemplateError(f"resource {logical_id} is not a mapping")
        if "Condition" in resource and not resolver.condition(str(resource["Condition"])):
            continue
        kind = str(resource.get("Type", ""))
        raw = resource.get("Properties") or {}
        name = resolver.names.get(logical_id, logical_id)
        if kind in TABLE_TYPES:
            model.tables[logical_id] = TableDef(logical_id, name, _evaluated(resolver, logical_id, raw))
        elif kind in QUEUE_TYPES:
            model.queues[logical_id] = QueueDef(logical_id, name, _evaluated(resolver, logical_id, raw))
        elif kind in BUCKET_TYPES:
            model.buckets[logical_id] = BucketDef(logical_id, name, _evaluated(resolver, logical_id, raw))
        elif kind in HTTP_API_TYPES:
            cors = raw.get("CorsConfiguration", (globals_.get("HttpApi") or {}).get("CorsConfiguration"))
            model.cors[logical_id] = _cors(resolver, logical_id, cors)
            model.auth[logical_id] = _api_auth(
                resolver, logical_id, raw.get("Auth", (globals_.get("HttpApi") or {}).get("Auth"))
            )
        elif kind in COGNITO_TYPES:
            continue  # created by dfdlocal.cognito (see LocalModel.cognito)
        elif kind in FUNCTION_TYPES:
            _read_function(model, resolver, logical_id, raw, function_globals)
        elif kind in STATE_MACHINE_TYPES:
            model.state_machines[logical_id] = StateMachineDef(logical_id, name, dict(raw))
        elif kind in EVENT_BUS_TYPES:
            model.event_buses[logical_id] = name
        elif kind in ROLE_TYPES and not _assumed_by_a_service(raw):
            model.roles[logical_id] = RoleDef(logical_id, name, _evaluated(resolver, logical_id, raw))
        else:
            model.ignored[logical_id] = kind

    if any(route.api == IMPLICIT_HTTP_API for route in model.routes):
        implicit = (globals_.get("HttpApi") or {}).get("CorsConfiguration")
        model.cors[IMPLICIT_HTTP_API] = _cors(resolver, IMPLICIT_HTTP_API, implicit)
        model.auth[IMPLICIT_HTTP_API] = _api_auth(
            resolver, IMPLICIT_HTTP_API, (globals_.get("HttpApi") or {}).get("Auth")
        )
    model.routes = [_authorized(model, route) for route in model.routes]
    for source in model.sqs_sources:
        if source.queue_logical_id not in model.queues:
            raise TemplateError(f"{source.function}.Events.{source.event_name}: queue is not an AWS::SQS::Queue")
    for stream in model.stream_sources:
        where = f"{stream.function}.Events.{stream.event_name}"
        if stream.table_logical_id not in model.tables:
            raise TemplateError(f"{where}: stream is not an AWS::DynamoDB::Table's")
        if "StreamSpecification" not in model.tables[stream.table_logical_id].properties:
            raise TemplateError(f"{where}: table {stream.table_logical_id} has no StreamSpecification")
        if stream.on_failure_queue is not None and stream.on_failure_queue not in model.queues:
            raise TemplateError(f"{where}: the on-failure destination is not an AWS::SQS::Queue of the template")
    return model


def _assumed_by_a_service(raw: Mapping[str, Any]) -> bool:
    """Whether a role's trust policy names an AWS service (a function's role): such roles are not emulated."""
    statements = (raw.get("AssumeRolePolicyDocument") or {}).get("Statement") or []
    statements = statements if isinstance(statements, list) else [statements]
    return any(isinstance(s, dict) and "Service" in (s.get("Principal") or {}) for s in statements)


def _evaluated(resolver: Resolver, logical_id: str, raw: Mapping[str, Any]) -> dict[str, Any]:
    """The evaluated properties; a property whose value is ``AWS::NoValue`` (e.g. a false ``!If``) is removed."""
    evaluated = {key: resolver.evaluate(logical_id, key, value) for key, value in raw.items()}
    return {key: value for key, value in evaluated.items() if value is not NO_VALUE}


def _cors(resolver: Resolver, api: str, raw: Any) -> CorsConfig | None:
    if raw is None or raw is False:
        return None
    if raw is True:  # SAM: CorsConfiguration: true allows every origin
        return CorsConfig(allow_origins=("*",))
    if isinstance(raw, str):
        return CorsConfig(allow_origins=(raw.strip("'\""),))
    value = resolver.evaluate(api, "CorsConfiguration", raw)

    def strings(key: str) -> tuple[str, ...]:
        items = value.get(key) or []
        items = items if isinstance(items, list) else str(items).split(",")
        return tuple(str(item).strip() for item in items if str(item).strip())

    max_age = value.get("MaxAge")
    return CorsConfig(
        allow_origins=strings("AllowOrigins"),
        allow_methods=tuple(method.upper() for method in strings("AllowMethods")),
        allow_headers=tuple(header.lower() for header in strings("AllowHeaders")),
        expose_headers=strings("ExposeHeaders"),
        max_age=int(max_age) if max_age is not None else None,
        allow_credentials=str(value.get("AllowCredentials", "false")).lower() == "true",
    )


def _api_auth(resolver: Resolver, api: str, raw: Any) -> ApiAuth:
    """An HttpApi's Auth: its JWT authorizers (other kinds are refused: the local stack cannot check them)."""
    if not raw:
        return ApiAuth({}, None)
    authorizers: dict[str, JwtAuthorizerDef] = {}
    for name, spec in (raw.get("Authorizers") or {}).items():
        spec = spec or {}
        jwt = spec.get("JwtConfiguration")
        if not isinstance(jwt, dict):
            raise TemplateError(f"{api}.Auth.Authorizers.{name}: only JWT authorizers are emulated locally")
        scopes = resolver.evaluate(api, f"Auth.Authorizers.{name}.AuthorizationScopes", spec.get("AuthorizationScopes"))
        authorizers[str(name)] = JwtAuthorizerDef(
            api=api,
            name=str(name),
            identity_source=str(
                resolver.evaluate(api, f"Auth.Authorizers.{name}.IdentitySource", spec.get("IdentitySource"))
                or "$request.header.Authorization"
            ),
            issuer=jwt.get("issuer"),
            audience=jwt.get("audience"),
            scopes=tuple(str(scope) for scope in scopes or ()),
        )
    default = raw.get("DefaultAuthorizer")
    default = str(resolver.evaluate(api, "Auth.DefaultAuthorizer", default)) if default else None
    if default is not None and default != "NONE" and default not in authorizers:
        raise TemplateError(f"{api}.Auth.DefaultAuthorizer {default!r} is not one of its Authorizers")
    return ApiAuth(authorizers, None if default == "NONE" else default)


def _authorized(model: LocalModel, route: HttpRoute) -> HttpRoute:
    """The route with the authorizer and scopes that guard it: its own Auth (read by _read_function into
    ``route.authorizer``/``scopes`` as given), else the HttpApi's DefaultAuthorizer with that authorizer's scopes.
    SAM puts no authorizer on OPTIONS routes (preflights stay open) nor on an explicit ``Authorizer: NONE``."""
    auth = model.auth.get(route.api) or ApiAuth({}, None)
    name = route.authorizer if route.authorizer is not None else auth.default_authorizer
    if name is None or name == "NONE" or route.method == "OPTIONS":
        return replace(route, authorizer=None, scopes=())
    if name not in auth.authorizers:
        raise TemplateError(f"route {route.route_key} names the unknown authorizer {name!r}")
    scopes = route.scopes or auth.authorizers[name].scopes
    return replace(route, authorizer=name, scopes=scopes)


def _read_function(
    model: LocalModel,
    resolver: Resolver,
    logical_id: str,
    raw: Mapping[str, Any],
    function_globals: Mapping[str, Any],
) -> None:
    def prop(key: str, default: Any = None) -> Any:
        value = raw.get(key, function_globals.get(key, default))
        return resolver.evaluate(logical_id, key, value)

    handler = prop("Handler")
    if not isinstance(handler, str) or "." not in handler:
        raise TemplateError(f"{logical_id}.Handler must be module.function, got {handler!r}")
    variables: dict[str, str] = {}
    for source in (function_globals, raw):
        declared = ((source.get("Environment") or {}).get("Variables")) or {}
        for key, value in declared.items():
            resolved = resolver.evaluate(logical_id, f"Environment.Variables.{key}", value)
            if resolved is not NO_VALUE:
                variables[key] = scalar_text(resolved)
    for key, value in variables.items():
        known = model.environment.get(key)
        if known is not None and known != value:
            model.warnings.append(
                f"{logical_id} sets {key}={value!r} but another function uses {known!r}: handlers share one "
                "process environment locally, the first value wins"
            )
        model.environment.setdefault(key, value)
    model.functions[logical_id] = FunctionDef(
        logical_id=logical_id,
        handler=handler,
        code_uri=str(prop("CodeUri", ".") or "."),
        runtime=str(prop("Runtime", "")),
        timeout=int(prop("Timeout", 3)),
        memory_size=int(prop("MemorySize", 128)),
        environment=variables,
    )
    for event_name, event in (raw.get("Events") or {}).items():
        kind = event.get("Type")
        props = event.get("Properties") or {}
        where = f"Events.{event_name}"
        if kind == "HttpApi":
            api_ref = props.get("ApiId")
            api = api_ref["Ref"] if isinstance(api_ref, dict) and "Ref" in api_ref else IMPLICIT_HTTP_API
            path = str(resolver.evaluate(logical_id, where, props.get("Path", "$default")))
            method = str(resolver.evaluate(logical_id, where, props.get("Method", "ANY"))).upper()
            if path == "$default" or method in ("*", "X-AMAZON-APIGATEWAY-ANY-METHOD"):
                method = "ANY"
            route_auth = resolver.evaluate(logical_id, f"{where}.Auth", props.get("Auth") or {})
            authorizer = route_auth.get("Authorizer")
            scopes = tuple(str(scope) for scope in route_auth.get("AuthorizationScopes") or ())
            model.routes.append(
                HttpRoute(
                    method=method,
                    path=path,
                    function=logical_id,
                    api=api,
                    authorizer=str(authorizer) if authorizer else None,
                    scopes=scopes,
                )
            )
        elif kind == "SQS":
            queue = props.get("Queue")
            queue_id = _logical_id_of(queue)
            if queue_id is None:
                raise TemplateError(f"{logical_id}.{where}.Queue must be !GetAtt <Queue>.Arn, got {queue!r}")
            values = resolver.evaluate(logical_id, where, {k: v for k, v in props.items() if k != "Queue"})
            scaling = values.get("ScalingConfig") or {}
            model.sqs_sources.append(
                SqsSource(
                    function=logical_id,
                    event_name=event_name,
                    queue_logical_id=queue_id,
                    batch_size=int(values.get("BatchSize", 10)),
                    batching_window_seconds=int(values.get("MaximumBatchingWindowInSeconds", 0)),
                    report_batch_item_failures="ReportBatchItemFailures" in (values.get("FunctionResponseTypes") or []),
                    maximum_concurrency=(
                        int(scaling["MaximumConcurrency"]) if "MaximumConcurrency" in scaling else None
                    ),
                    enabled=str(values.get("Enabled", "true")).lower() != "false",
                )
            )
        elif kind == "DynamoDB":
            table_id = _logical_id_of(props.get("Stream"))
            if table_id is None:
                raise TemplateError(f"{logical_id}.{where}.Stream must be !GetAtt <Table>.StreamArn")
            failure = ((props.get("DestinationConfig") or {}).get("OnFailure") or {}).get("Destination")
            values = resolver.evaluate(
                logical_id, where, {k: v for k, v in props.items() if k not in ("Stream", "DestinationConfig")}
            )
            model.stream_sources.append(
                StreamSource(
                    function=logical_id,
                    event_name=event_name,
                    table_logical_id=table_id,
                    batch_size=int(values.get("BatchSize", 100)),
                    report_batch_item_failures="ReportBatchItemFailures" in (values.get("FunctionResponseTypes") or []),
                    maximum_retry_attempts=int(values.get("MaximumRetryAttempts", -1)),
                    on_failure_queue=_logical_id_of(failure) if failure is not None else None,
                    starting_position=str(values.get("StartingPosition", "TRIM_HORIZON")),
                    enabled=str(values.get("Enabled", "true")).lower() != "false",
                )
            )
        elif kind == "Schedule":
            values = resolver.evaluate(logical_id, where, props)
            model.schedule_sources.append(
                ScheduleSource(
                    function=logical_id,
                    event_name=event_name,
                    rate_seconds=rate_seconds(str(values.get("Schedule", ""))),
                    enabled=str(values.get("Enabled", "true")).lower() != "false",
                )
            )
        else:
            model.warnings.append(f"{logical_id}.{where}: event type {kind} is not emulated locally")


def _logical_id_of(node: Any) -> str | None:
    """The resource a ``!GetAtt X.Arn`` / ``!Ref X`` points at."""
    if isinstance(node, dict):
        if "Fn::GetAtt" in node:
            target = node["Fn::GetAtt"]
            return str(target.split(".", 1)[0] if isinstance(target, str) else target[0])
        if "Ref" in node:
            return str(node["Ref"])
    return None
