"""Step Functions executions in flight, kept across a restart: moto holds executions in memory only, so a kill of
the local stack would end every running execution for good, where on AWS a Standard execution outlives any host
(a large object's segment workflow runs for hours). With a data directory, every StartExecution the emulator
accepts is answered only once the executions still running, this one included, are on disk
(``sfn-executions.json``, written whole); a watcher rewrites the file within a second of an execution ending. At
start, :func:`resume` starts each kept execution again, same state machine, name and input: the workflow begins
anew from that input (the segment workflow's input names only the object version; its state is the one stored in
DynamoDB, so it goes on from the last segment that landed).

A kill can leave an execution that had just ended in the file: it runs once more. That is a replay the segment
workflow takes (a finished hashing answers ``done`` again and its commit is a replay). The reconcile's executions
are not kept: a restart runs the reconcile at once anyway. Executions that ended before the kill are forgotten, as
moto forgets them: their names can be taken again after a restart, where AWS keeps a Standard execution's name for
90 days.

The moto internals used are those of the locked release (dfdlocal.motoversion)."""

from __future__ import annotations

import json
import logging
import threading
from pathlib import Path
from typing import Any

from dfdlocal import motoversion
from dfdlocal.names import ACCOUNT_ID, REGION
from dfdlocal.persist import read_state, write_whole

motoversion.require_supported()

log = logging.getLogger("dfdlocal.sfnpersist")

EXECUTIONS = "sfn-executions.json"
WATCH_SECONDS = 1.0


def _backend() -> Any:
    from moto.stepfunctions.parser.models import stepfunctions_parser_backends

    return stepfunctions_parser_backends[ACCOUNT_ID][REGION]


def running(skip: frozenset[str] = frozenset()) -> list[dict[str, str]]:
    """The emulator's running executions (but those of the state machines `skip` names): state machine ARN, name
    and input of each, oldest first."""
    found: list[tuple[Any, dict[str, str]]] = []
    for machine in list(_backend().state_machines):
        if machine.arn in skip:
            continue
        for execution in list(machine.executions):
            status = getattr(execution.exec_status, "value", execution.exec_status)
            if status == "RUNNING":
                kept = {"state_machine_arn": machine.arn, "name": execution.name, "input": execution.execution_input}
                found.append((execution.start_date, kept))
    return [kept for _, kept in sorted(found, key=lambda pair: pair[0])]


class KeptExecutions:
    """The file of running executions in ``data_dir``: written before a StartExecution is answered
    (:meth:`install` wraps moto's backend) and within a second of an execution ending (:meth:`start`). The
    executions of the state machines `skip` names are not kept (the reconcile's: its timer runs it at once after a
    restart, dfdlocal.reconcile.free_orphaned_lease)."""

    def __init__(self, data_dir: Path, skip: frozenset[str] = frozenset(), interval: float = WATCH_SECONDS) -> None:
        self.path = data_dir / EXECUTIONS
        self.skip = skip
        self.interval = interval
        self._lock = threading.Lock()
        self._last: list[dict[str, str]] | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def save(self) -> None:
        with self._lock:
            now = running(self.skip)
            if now != self._last:
                write_whole(self.path, json.dumps(now).encode())
                self._last = now

    def install(self) -> None:
        """Every execution the emulator starts is saved before StartExecution answers (this process's backend)."""
        from moto.stepfunctions.parser.models import StepFunctionsParserBackend

        cls: Any = StepFunctionsParserBackend
        original = getattr(cls, "_dfd_original_start_execution", cls.start_execution)
        keeper = self

        def start_execution(self: Any, *args: Any, **kwargs: Any) -> Any:
            execution = original(self, *args, **kwargs)
            hook = getattr(cls, "_dfd_keeper", None)
            if hook is not None:
                hook.save()
            return execution

        cls._dfd_original_start_execution = original
        cls._dfd_keeper = keeper
        cls.start_execution = start_execution

    def start(self) -> None:
        self._thread = threading.Thread(target=self._watch, name="sfn-executions", daemon=True)
        self._thread.start()

    def _watch(self) -> None:
        while not self._stop.wait(self.interval):
            try:
                self.save()
            except OSError as error:  # the next StartExecution or tick writes it again
                log.warning("could not keep the running executions: %s", error)

    def stop(self) -> None:
        """Stop watching and forget this keeper (executions started later are not saved)."""
        from moto.stepfunctions.parser.models import StepFunctionsParserBackend

        cls: Any = StepFunctionsParserBackend
        if getattr(cls, "_dfd_keeper", None) is self:
            cls._dfd_keeper = None
        self._stop.set()
        if self._thread is not None:
            self._thread.join(5)


def kept(data_dir: Path) -> list[dict[str, str]]:
    """The executions the last run of the stack kept (running when it ended)."""
    path = data_dir / EXECUTIONS
    if not path.exists():
        return []
    entries = json.loads(read_state(path))
    return [entry for entry in entries if isinstance(entry, dict)]


def resume(data_dir: Path, sfn: Any) -> int:
    """Start again every execution the last run of the stack left running (same machine, name, input); how many.
    A machine the template no longer has is skipped, with a warning."""
    machines = {machine["stateMachineArn"] for machine in sfn.list_state_machines().get("stateMachines", [])}
    resumed = 0
    for entry in kept(data_dir):
        if entry.get("state_machine_arn") not in machines:
            log.warning("execution %s not resumed: its state machine is gone", entry.get("name"))
            continue
        sfn.start_execution(stateMachineArn=entry["state_machine_arn"], name=entry["name"], input=entry["input"])
        resumed += 1
    return resumed
