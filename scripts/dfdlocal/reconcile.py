"""Hook for the reconcile workflow: a timer starting Step Functions executions. NOT WIRED YET.

:func:`start_reconcile_schedule` is called by :meth:`dfdlocal.stack.LocalStack.start` once the resources
exist and the handlers are loaded; :meth:`~dfdlocal.stack.LocalStack.stop` calls ``stop()`` on what it
returned. Today it creates nothing and returns None. To wire it (the reconcile issue):

1. enable moto's executor: ``POST {stack.aws_url}/moto-api/config`` with
   ``{"stepfunctions": {"execute_state_machine": true}}`` (MOTO_PORT is already exported, the executor calls
   back to the emulator);
2. for each ``stack.model.state_machines`` entry: read its ``DefinitionUri`` (relative to the template),
   substitute ``DefinitionSubstitutions`` evaluated with ``stack.model.resolver`` (local table names, queue
   URL...), ``create_state_machine`` via ``stack.client("stepfunctions")``;
3. start a daemon thread that calls ``start_execution`` every N seconds (the template's Schedule, shortened
   locally; make it an option) until ``stop()`` is called; log each execution's outcome;
4. add a line to the banner (``dfdlocal.__main__.banner``) and a test in tests/e2e.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from dfdlocal.stack import LocalStack


class ReconcileSchedule(Protocol):
    def stop(self) -> None: ...

    def describe(self) -> str:
        """One banner line: state machine name and interval."""
        ...


def start_reconcile_schedule(stack: LocalStack) -> ReconcileSchedule | None:
    """Start the timer that runs the reconcile workflow; None while it is not implemented."""
    del stack
    return None
