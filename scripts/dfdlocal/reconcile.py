"""The template's workflows, locally: their own ASL files executed by moto's Step Functions interpreter, and the
reconcile's timer.

There is no second implementation of a workflow here, only the plumbing around them:

* :func:`load_definition` applies ``DefinitionSubstitutions`` (``${Name}`` placeholders) to a state machine's
  ``DefinitionUri`` file (``statemachine/reconcile.asl.json``, ``statemachine/segments.asl.json``) the way
  CloudFormation does;
* :func:`create_state_machine` creates (or updates) one in the emulator; :func:`start_state_machines` creates
  every state machine of the template, under its local name (``Ref`` of it in a function's environment is that
  machine's ARN: the segment workflow the ingest starts);
* :func:`run_reconcile` starts an execution, follows its continuations (an execution that ran its budget of pages
  continues in a new one) and returns the final summary;
* :func:`start_reconcile_schedule` is the local stack's hook: called by ``LocalStack.start`` once the
  resources exist, it creates the template's state machine and runs it on a timer
  (``DFD_RECONCILE_INTERVAL`` seconds, default 60; 0 = never, ``scripts/reconcile`` still runs it);
* ``python -m dfdtools.reconcile`` (``scripts/reconcile``) runs it now against ``make run`` and prints the
  summary.

moto quirks handled here (see statemachine/README.md): executions only run after
``POST /moto-api/config {"stepfunctions": {"execute_state_machine": true}}``; their ``lambda:invoke`` tasks would
go to moto's own Lambda (Docker): :func:`patch_moto_lambda` sends them to the local stack's Lambda Invoke API,
where the template's functions run; an execution started without a name is named ``None`` (so every start here
passes one); and moto's ``states:startExecution`` integration sends the parameters with Step Functions'
PascalCase names straight to botocore, which only knows ``stateMachineArn``...
:func:`patch_moto_start_execution` renames them (in this process: the local stack's emulator runs here).
"""

from __future__ import annotations

import json
import logging
import os
import re
import threading
import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol
from urllib import request as urlrequest

from dfdlocal import motoversion
from dfdlocal.names import ACCOUNT_ID, RECONCILE_STATE_MACHINE
from dfdlocal.template import scalar_text

# the moto internals patched here are those of the locked release: another fails at import, saying which
motoversion.require_supported()

if TYPE_CHECKING:
    from dfdlocal.stack import LocalStack

log = logging.getLogger("dfdlocal.reconcile")

ROOT = Path(__file__).resolve().parents[2]
DEFINITION = ROOT / "statemachine" / "reconcile.asl.json"
LOGICAL_ID = "ReconcileStateMachine"
STATE_MACHINE_NAME = RECONCILE_STATE_MACHINE  # the local stack's name for ReconcileStateMachine
LOCAL_ROLE_ARN = f"arn:aws:iam::{ACCOUNT_ID}:role/dfd-reconcile"  # moto does not evaluate IAM
DEFAULT_INTERVAL = 60.0
INTERVAL_VARIABLE = "DFD_RECONCILE_INTERVAL"
# moto's interpreter logs at ERROR every JSONPath it does not find, including the absent ones a Choice rule
# tests with IsPresent (normal here): the local stack quiets it; failed executions are reported anyway.
MOTO_INTERPRETER_LOGGER = "moto.stepfunctions.parser.asl.component.eval_component"
_PLACEHOLDER = re.compile(r"\$\{([A-Za-z0-9_.:-]+)\}")
_FINISHED = {"SUCCEEDED", "FAILED", "TIMED_OUT", "ABORTED"}


class ReconcileError(RuntimeError):
    """An execution failed, timed out, or the workflow could not be started (the message says which)."""


# --------------------------------------------------------------------------------------------------
# Definition and state machine
# --------------------------------------------------------------------------------------------------
def placeholders(text: str) -> set[str]:
    """The ``${Name}`` placeholders of a definition (what DefinitionSubstitutions must provide)."""
    return set(_PLACEHOLDER.findall(text))


def load_definition(substitutions: Mapping[str, Any], path: Path = DEFINITION) -> str:
    """The ASL text with every ``${Name}`` replaced (JSON-escaped); a placeholder without a value is an error."""
    text = path.read_text(encoding="utf-8")
    missing = sorted(placeholders(text) - set(substitutions))
    if missing:
        raise ReconcileError(f"{path.name}: no substitution for {', '.join(missing)}")

    def replace(match: re.Match[str]) -> str:
        return json.dumps(str(substitutions[match.group(1)]))[1:-1]

    definition = _PLACEHOLDER.sub(replace, text)
    json.loads(definition)  # still JSON
    return definition


def find_state_machine(sfn: Any, name: str = STATE_MACHINE_NAME) -> str | None:
    for page in sfn.get_paginator("list_state_machines").paginate():
        for machine in page.get("stateMachines", []):
            if machine["name"] == name:
                return str(machine["stateMachineArn"])
    return None


def create_state_machine(
    sfn: Any,
    substitutions: Mapping[str, Any],
    *,
    name: str = STATE_MACHINE_NAME,
    definition_path: Path = DEFINITION,
    role_arn: str = LOCAL_ROLE_ARN,
) -> str:
    """Create the state machine from the ASL file (or update the definition of one with that name)."""
    definition = load_definition(substitutions, definition_path)
    existing = find_state_machine(sfn, name)
    if existing is not None:
        sfn.update_state_machine(stateMachineArn=existing, definition=definition, roleArn=role_arn)
        return existing
    created = sfn.create_state_machine(name=name, definition=definition, roleArn=role_arn, type="STANDARD")
    return str(created["stateMachineArn"])


def template_state_machine(template: Path, endpoint: str) -> tuple[str, Path, dict[str, str]]:
    """(local name, definition file, evaluated substitutions) of the template's reconcile state machine."""
    from dfdlocal.template import read_model

    model = read_model(template, endpoint)
    return state_machine_from_model(model)


def state_machine_from_model(model: Any, logical_id: str = LOGICAL_ID) -> tuple[str, Path, dict[str, str]]:
    """(local name, definition file, evaluated substitutions) of the template's state machine `logical_id`."""
    machine = model.state_machines.get(logical_id)
    if machine is None:
        raise ReconcileError(f"{model.path}: no {logical_id} resource")
    props = machine.properties
    uri = props.get("DefinitionUri")
    if not isinstance(uri, str):
        raise ReconcileError(f"{logical_id}.DefinitionUri must be a path relative to the template")
    raw = props.get("DefinitionSubstitutions") or {}
    evaluated = model.resolver.evaluate(logical_id, "DefinitionSubstitutions", raw)
    substitutions = {str(key): scalar_text(value) for key, value in evaluated.items()}
    return machine.name, Path(model.path).parent / uri, substitutions


# --------------------------------------------------------------------------------------------------
# moto
# --------------------------------------------------------------------------------------------------
def enable_executions(endpoint: str) -> None:
    """moto only runs executions once told to (server mode)."""
    body = json.dumps({"stepfunctions": {"execute_state_machine": True}}).encode()
    url = endpoint.rstrip("/") + "/moto-api/config"
    if not url.startswith(("http://", "https://")):
        raise ReconcileError(f"not an HTTP endpoint: {endpoint}")
    req = urlrequest.Request(url, data=body, method="POST", headers={"Content-Type": "application/json"})  # noqa: S310
    with urlrequest.urlopen(req, timeout=10) as response:  # noqa: S310 - checked above: the emulator's URL
        response.read()


def patch_moto_start_execution() -> bool:
    """Make moto's ``states:startExecution`` integration accept Step Functions' parameter names.

    Step Functions documents ``StateMachineArn``/``Input``/``Name`` and answers ``ExecutionArn``; moto passes
    the parameters to botocore unchanged (whose SFN members are ``stateMachineArn``...) and returns botocore's
    response keys. Idempotent; False when moto's layout changed (continuations then fail loudly).
    """
    try:
        from moto.stepfunctions.parser.asl.component.state.exec.state_task.service import (
            state_task_service_sfn as module,
        )
    except ImportError:  # pragma: no cover - moto without its Step Functions interpreter
        return False
    cls: Any = getattr(module, "StateTaskServiceSfn", None)
    if cls is None or not hasattr(cls, "_normalise_parameters") or not hasattr(cls, "_normalise_response"):
        log.warning("moto changed: states:startExecution continuations will not work locally")
        return False
    if getattr(cls, "_dfd_patched", False):
        return True
    original_parameters = cls._normalise_parameters
    original_response = cls._normalise_response

    def normalise_parameters(self: Any, parameters: dict[str, Any], *args: Any, **kwargs: Any) -> None:
        original_parameters(self, parameters, *args, **kwargs)
        for key in [k for k in parameters if k[:1].isupper()]:
            parameters[key[0].lower() + key[1:]] = parameters.pop(key)

    def normalise_response(self: Any, response: Any, *args: Any, **kwargs: Any) -> None:
        original_response(self, response, *args, **kwargs)
        if isinstance(response, dict):
            for key in [k for k in response if k[:1].islower()]:
                response[key[0].upper() + key[1:]] = response.pop(key)

    cls._normalise_parameters = normalise_parameters
    cls._normalise_response = normalise_response
    cls._dfd_patched = True
    return True


# where the interpreter's lambda:invoke tasks go: the local stack's Lambda Invoke API (dfdlocal.lambda_api)
_LAMBDA_ENDPOINT: dict[str, str] = {}
# a reconcile page runs up to the function's Timeout: the interpreter's client waits for it (one attempt: the
# definition's Retry is the retry)
_LAMBDA_READ_TIMEOUT = 900


def patch_moto_lambda(endpoint: str) -> bool:
    """Point moto's ``lambda:invoke`` integration at the local runtime's Lambda Invoke API at `endpoint`.

    moto's interpreter invokes functions through a botocore client of its own server, whose Lambda would run
    the code in Docker; the local stack hosts the template's functions itself (dfdlocal.runtime) and serves
    Lambda's Invoke API for them, so the reconcile's tasks run the same handler Lambda runs. The last endpoint
    given wins (one local stack per process). False when moto's layout changed."""
    try:
        from moto.stepfunctions.parser.asl.component.state.exec.state_task import lambda_eval_utils
    except ImportError:  # pragma: no cover - moto without its Step Functions interpreter
        return False
    module: Any = lambda_eval_utils
    if not hasattr(module, "boto_client_for"):
        log.warning("moto changed: lambda:invoke tasks will not reach the local runtime")
        return False
    _LAMBDA_ENDPOINT["url"] = endpoint
    if getattr(module, "_dfd_patched", False):
        return True
    original = module.boto_client_for

    def client_for(region: str, service: str, state_credentials: Any = None) -> Any:
        if service != "lambda":
            return original(region=region, service=service, state_credentials=state_credentials)
        import boto3
        from botocore.config import Config

        return boto3.client(
            "lambda",
            endpoint_url=_LAMBDA_ENDPOINT["url"],
            region_name=region,
            aws_access_key_id="ak",
            aws_secret_access_key="sk",  # noqa: S106 - the local Invoke API checks no signature
            config=Config(
                parameter_validation=False,
                retries={"total_max_attempts": 1},
                connect_timeout=10,
                read_timeout=_LAMBDA_READ_TIMEOUT,
            ),
        )

    module.boto_client_for = client_for
    module._dfd_patched = True
    return True


# --------------------------------------------------------------------------------------------------
# Running it
# --------------------------------------------------------------------------------------------------
def execution_name() -> str:
    return f"reconcile-{time.strftime('%Y%m%dT%H%M%S', time.gmtime())}-{uuid.uuid4().hex[:8]}"


def wait_for(sfn: Any, execution_arn: str, deadline: float, poll: float) -> dict[str, Any]:
    while True:
        described: dict[str, Any] = sfn.describe_execution(executionArn=execution_arn)
        if described["status"] in _FINISHED:
            return described
        if time.monotonic() >= deadline:
            raise ReconcileError(f"{execution_arn} still {described['status']} after the timeout")
        time.sleep(poll)


def run_reconcile(
    sfn: Any,
    state_machine_arn: str,
    timeout: float = 120.0,
    *,
    execution_input: Mapping[str, Any] | None = None,
    poll: float = 0.05,
    wait_for_turn: bool = False,
) -> dict[str, Any]:
    """Run the workflow to the end (following its continuations) and return its summary.

    The summary: ``{"redriven": n, "expired": n, "failed": n, "reaped": n, "refs_reaped": n,
    "orphans": n | None, "drift": {"files": d, "bytes": d} | None,
    "now": ..., "executions": k}`` (``None``: not checked by a ``{"sweep": false}`` run), or
    ``{"skipped": why, ...}`` when another run held the turn. ``wait_for_turn`` starts again after a skipped run
    until one runs: someone asking for a run now wants its summary, not the news that the timer's run was busy.
    Raises :class:`ReconcileError` when no execution succeeds within ``timeout`` seconds (for the whole chain).
    """
    deadline = time.monotonic() + timeout
    while True:
        summary = _run_once(sfn, state_machine_arn, deadline, execution_input, poll)
        if not (wait_for_turn and "skipped" in summary):
            return summary
        if time.monotonic() >= deadline:
            raise ReconcileError(f"no turn to run within {timeout:g} s: {summary['skipped']}")
        log.debug("reconcile skipped (%s): starting again", summary["skipped"])
        time.sleep(max(poll, 0.5))


def _run_once(
    sfn: Any, state_machine_arn: str, deadline: float, execution_input: Mapping[str, Any] | None, poll: float
) -> dict[str, Any]:
    started = sfn.start_execution(
        stateMachineArn=state_machine_arn,
        name=execution_name(),
        input=json.dumps(dict(execution_input or {})),
    )
    execution_arn = str(started["executionArn"])
    while True:
        described = wait_for(sfn, execution_arn, deadline, poll)
        if described["status"] != "SUCCEEDED":
            raise ReconcileError(
                f"{execution_arn} {described['status']}: {described.get('error', '')} {described.get('cause', '')}"
            )
        output: dict[str, Any] = json.loads(described.get("output") or "{}")
        following = output.get("continued")
        if not following:
            return output
        log.debug("reconcile %s continues in %s", execution_arn, following)
        execution_arn = str(following)


def describe_summary(summary: Mapping[str, Any]) -> str:
    drift = summary.get("drift")
    drift_text = "not audited" if drift is None else f"files {drift['files']:+d}, bytes {drift['bytes']:+d}"
    orphans = summary.get("orphans")
    return (
        f"re-driven {summary.get('redriven', 0)}, expired {summary.get('expired', 0)}, "
        f"failed {summary.get('failed', 0)}, "
        f"reaped {summary.get('reaped', 0)} deleted contents and {summary.get('refs_reaped', 0)} tenant references, "
        f"orphans {'not swept' if orphans is None else orphans}, drift: {drift_text}"
    )


# --------------------------------------------------------------------------------------------------
# The local stack's timer
# --------------------------------------------------------------------------------------------------
class ReconcileSchedule(Protocol):
    def stop(self) -> None: ...

    def describe(self) -> str:
        """One banner line: state machine name and interval."""
        ...


@dataclass
class _Timer:
    client: Any
    state_machine_arn: str
    name: str
    interval: float
    timeout: float = 300.0
    runs: int = 0
    last: dict[str, Any] | None = None
    first: float | None = None  # seconds to the first run (default: interval)
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def start(self) -> None:
        if self.interval <= 0:
            return
        self._thread = threading.Thread(target=self._loop, name="reconcile-timer", daemon=True)
        self._thread.start()

    def _loop(self) -> None:
        wait = self.interval if self.first is None else self.first
        while not self._stop.wait(wait):
            wait = self.interval
            try:
                summary = run_reconcile(self.client, self.state_machine_arn, self.timeout)
            except Exception as error:  # the timer must outlive a failed run (it is logged, like AWS's alarm)
                if self._stop.is_set():
                    return
                log.warning("reconcile run failed: %s", error)
                continue
            self.runs += 1
            self.last = summary
            changed = summary.get("redriven") or summary.get("expired") or summary.get("orphans")
            drift = summary.get("drift") or {}
            level = logging.INFO if changed or drift.get("files") or drift.get("bytes") else logging.DEBUG
            log.log(level, "reconcile: %s", describe_summary(summary))

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(5)

    def describe(self) -> str:
        every = f"every {self.interval:g} s" if self.interval > 0 else "timer off"
        return f"{self.name} (Step Functions on moto), {every} ({INTERVAL_VARIABLE}); scripts/reconcile runs it now"


def interval_from_env() -> float:
    raw = os.environ.get(INTERVAL_VARIABLE, "").strip()
    if not raw:
        return DEFAULT_INTERVAL
    try:
        return max(0.0, float(raw))
    except ValueError:
        raise ReconcileError(f"{INTERVAL_VARIABLE}={raw!r} is not a number of seconds") from None


def free_orphaned_lease(dynamodb: Any, counters_table: str) -> str | None:
    """Release the reconcile's lease (dfd.adapters.dynamo.lease) held by a run of an earlier start of this stack:
    the emulator keeps no reconcile execution across a restart (dfdlocal.sfnpersist), so that run is over and would
    otherwise keep every run out until its lease expired (15 minutes). The holder freed, or None."""
    from dfd.adapters.dynamo.base import to_item
    from dfd.reconcile import codec as reconcile_codec

    key = to_item(reconcile_codec.lease_key())
    holder = dynamodb.get_item(TableName=counters_table, Key=key, ConsistentRead=True).get("Item", {}).get("holder")
    if not holder:
        return None
    try:
        dynamodb.update_item(
            TableName=counters_table,
            Key=key,
            UpdateExpression="REMOVE holder, expires_at",
            ConditionExpression="holder = :me",
            ExpressionAttributeValues={":me": holder},
        )
    except dynamodb.exceptions.ConditionalCheckFailedException:
        return None  # taken over meanwhile
    return str(holder.get("S"))


def start_state_machines(stack: LocalStack) -> dict[str, str]:
    """Create every state machine of the template in the emulator (or update those it has), their executions run
    by moto's interpreter, their ``lambda:invoke`` tasks by the local runtime; logical id -> ARN."""
    model = stack.model
    if model is None or not model.state_machines:
        return {}
    patch_moto_start_execution()
    patch_moto_lambda(stack.lambda_url)
    logging.getLogger(MOTO_INTERPRETER_LOGGER).setLevel(logging.CRITICAL)
    enable_executions(stack.aws_url)
    client = stack.client("stepfunctions")
    arns: dict[str, str] = {}
    for logical_id in model.state_machines:
        name, path, substitutions = state_machine_from_model(model, logical_id)
        arns[logical_id] = create_state_machine(client, substitutions, name=name, definition_path=path)
        log.debug("state machine %s created (%s)", name, arns[logical_id])
    return arns


def start_reconcile_schedule(
    stack: LocalStack,
    interval: float | None = None,
    first: float | None = None,
    machines: Mapping[str, str] | None = None,
) -> ReconcileSchedule | None:
    """Run the template's reconcile state machine every ``interval`` seconds.

    Called by ``LocalStack.start`` once the resources exist, with the state machines :func:`start_state_machines`
    created (without them, it creates them); ``stop()`` on the result ends the timer. None when the template has
    no reconcile state machine.
    """
    model = stack.model
    if model is None or LOGICAL_ID not in model.state_machines:
        return None
    arn = (start_state_machines(stack) if machines is None else machines)[LOGICAL_ID]
    name = model.state_machines[LOGICAL_ID].name
    client = stack.client("stepfunctions")
    timer = _Timer(client, arn, name, interval_from_env() if interval is None else interval, first=first)
    timer.start()
    return timer
