"""The simulation's scheduler: every operation runs on a thread of its own, and exactly one runs at a time — it
passes the baton back at each port call (:meth:`Scheduler.call`), where the scheduler picks which pending operation
makes its next call and which fault that call meets. One seed, one sequence of choices: the same run.

Threads, not Hypothesis's stateful rules: a rule runs to its end, while a race lives between two port calls of two
operations (two ingests of one content between their reads and their commits, a delete between an ingest's read
and its commit). The real services are synchronous code that calls their ports; a thread per operation suspends
each at any call without rewriting them, and the baton keeps the run deterministic.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any


class Crash(BaseException):
    """The process running the operation ends at this port call — a Lambda timeout, an out-of-memory kill, a
    SIGKILL: nothing after it runs, no handler sees it (a BaseException: the services catch Exception only)."""


class Stop(BaseException):
    """The episode is over: a thread still waiting ends without running on."""


@dataclass
class Op:
    """One operation in flight: an API request, one delivery of a queue message, a reconcile run, a client's PUT."""

    ident: int
    kind: str
    label: str
    fn: Callable[[], Any]
    message: Any = None  # the queue message a delivery handles (redelivered when the delivery does not finish)
    point: str = "start"  # the port call it waits at
    done: bool = False
    crashed: bool = False
    result: Any = None
    error: BaseException | None = None
    calls: int = 0
    deadline: Any = None  # its function's timeout from its start: a call after it is the timeout's crash
    fault: str | None = None  # the fault its pending call meets (set by the scheduler as it resumes it)
    resume: threading.Event = field(default_factory=threading.Event)
    thread: threading.Thread | None = None


class Scheduler:
    def __init__(self) -> None:
        self._local = threading.local()
        self._back = threading.Event()
        self.stopping = False

    # ------------------------------------------------------------------ in an operation's thread
    def current(self) -> Op | None:
        return getattr(self._local, "op", None)

    def call(self, point: str) -> str | None:
        """Called by a port proxy before its call: waits for the scheduler's turn; the fault the call meets."""
        op = self.current()
        if op is None:  # the world's own bookkeeping (checks, seeding): no turn to wait for
            return None
        op.point = point
        self._back.set()
        op.resume.wait()
        op.resume.clear()
        if self.stopping:
            raise Stop
        op.calls += 1
        return op.fault

    # ------------------------------------------------------------------ in the main thread
    def start(self, op: Op) -> None:
        """Runs `op` up to its first port call (or its end)."""

        def body() -> None:
            self._local.op = op
            try:
                op.result = op.fn()
            except Crash:
                op.crashed = True
            except Stop:
                pass
            except Exception as error:  # the operation's failure is its outcome
                op.error = error
            finally:
                op.done = True
                self._back.set()

        self._back.clear()
        op.thread = threading.Thread(target=body, name=f"sim-{op.ident}-{op.kind}", daemon=True)
        op.thread.start()
        self._back.wait()

    def step(self, op: Op, fault: str | None) -> None:
        """Lets `op` make its pending call (meeting `fault`) and run on to its next call (or its end)."""
        assert not op.done
        op.fault = fault
        self._back.clear()
        op.resume.set()
        self._back.wait()
        if op.done and op.thread is not None:
            op.thread.join()

    def stop(self, ops: list[Op]) -> None:
        """Ends every thread still waiting (an abandoned episode: a failed check stops the run)."""
        self.stopping = True
        for op in ops:
            if not op.done:
                self._back.clear()
                op.resume.set()
                if op.thread is not None:
                    op.thread.join(timeout=5)
