"""Runs the simulation: episodes of a fresh world, each from one seed; a failing one printed with its seed and a
shrunk trace. docs/design/simulation.md.

    python -m tests.sim.runner --seed 42              # one episode, exactly as it ran (make sim SEED=42)
    python -m tests.sim.runner --duration 600         # episodes until the time is up (make soak DURATION=600)
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any
from unittest import mock

from dfd.core.errors import DfdError
from tests.sim.checks import Violation, on_fakes, quiet_checks, step_checks
from tests.sim.scheduler import Op
from tests.sim.world import CONTENTS, USERS, Message, World, faults_at, reads_only

STEPS = 400  # decisions an episode makes before it quiets down
FAULT_RATE = 0.2  # of the port calls the scheduler resumes
Entry = tuple[Any, ...]
# each operation's function timeout (template.yaml): IngestFunction 900 s, a reconcile run's pages 300 s each
# (a run of a few pages: 900 s), the API's functions 29 s; the clients' own PUTs have none
TIMEOUTS = {"deliver": 900, "reconcile": 900, "upload": 29, "delete": 29, "lfs": 29, "drop": 3600}


@dataclass
class Coverage:
    points: set[str] = field(default_factory=set)  # port calls made
    reached: set[tuple[str, str]] = field(default_factory=set)  # (port call, fault) injected
    races: set[tuple[str, str, str, str]] = field(default_factory=set)  # (op a, its call, op b, its call)
    steps: int = 0  # decisions carried out (the quiet phase's included)
    calls: int = 0  # port calls the operations made
    episodes: int = 0

    def possible(self) -> set[tuple[str, str]]:
        return {(point, fault) for point in self.points for fault in faults_at(point)}

    def merge(self, other: Coverage) -> None:
        self.points |= other.points
        self.reached |= other.reached
        self.races |= other.races
        self.steps += other.steps
        self.calls += other.calls
        self.episodes += other.episodes

    def summary(self) -> dict[str, Any]:
        possible = self.possible()
        missed = sorted(f"{p} x {f}" for p, f in possible - self.reached)
        return {
            "episodes": self.episodes,
            "steps": self.steps,
            "port_calls_made": self.calls,
            "distinct_port_calls": len(self.points),
            "faults_reached": f"{len(self.reached & possible)}/{len(possible)}",
            "racing_interleavings": len(self.races),
            "faults_missed": missed[:40],
        }


@dataclass
class Failure:
    seed: int
    check: str
    message: str
    trace: list[Entry]


@contextmanager
def deterministic(seed: int) -> Iterator[None]:
    """The random ids the services draw (upload ids, commit nonces, reconcile run ids), from the seed."""
    rng = random.Random(f"ids-{seed}")
    with (
        mock.patch("secrets.token_hex", lambda n=32: rng.getrandbits(8 * n).to_bytes(n, "big").hex()),
        mock.patch("uuid.uuid4", lambda: uuid.UUID(int=rng.getrandbits(128), version=4)),
    ):
        yield


class Episode:
    """One world and the decisions made in it: drawn from the seed, or replayed from a script (a shrunk trace;
    a decision naming an operation or message the script no longer makes is skipped)."""

    def __init__(self, seed: int, script: list[Entry] | None = None, steps: int = STEPS) -> None:
        self.seed = seed
        self.script = script
        self.steps = steps
        self.rng = random.Random(seed)
        self.world = World(seed)
        self.ops: dict[str, Op] = {}
        self.trace: list[Entry] = []
        self.coverage = Coverage(episodes=1)
        self._last: Op | None = None
        self.changed = True  # the last decision may have changed the world (else its checks are skipped)

    # ------------------------------------------------------------------ decisions
    def _draw(self, position: int) -> Entry:
        rng, world = self.rng, self.world
        pending = [op for op in self.ops.values() if not op.done]
        r = rng.random()
        busy = min(0.9, 0.4 + 0.1 * len(pending))  # the more in flight, the more often one moves on
        if pending and r < busy:
            op = rng.choice(pending)
            kinds = faults_at(op.point)
            fault = None
            # a reconcile run makes dozens of calls: at the same rate, a fault would end nearly every run before its
            # reaper's phases
            rate = FAULT_RATE / 6 if op.kind == "reconcile" else FAULT_RATE
            if kinds and rng.random() < rate:
                # the faults this episode has not met at this call yet, first
                fresh = [kind for kind in kinds if (op.point, kind) not in world.reached]
                fault = rng.choice(fresh or kinds)
            return ("step", op.label, fault)
        if world.messages and r < busy + (1 - busy) * 0.5:
            return ("deliver", f"d{position}", rng.choice(world.messages).ident)
        label = f"o{position}"
        r = rng.random()
        if r < 0.45:
            return ("upload", label, rng.randrange(len(USERS)), rng.randrange(len(CONTENTS) - 1), rng.random() < 0.3)
        if r < 0.65 and world.issued:
            stored = [i for i in world.issued if world.repo.uploads.get(i.upload_id, {}).get("status") == "stored"]
            # mostly the stored ones: deleting every reference to a content is what the reaper needs
            issued = rng.choice(stored if stored and rng.random() < 0.7 else world.issued)
            owner = USERS.index(issued.user) if rng.random() < 0.9 else rng.randrange(len(USERS))
            return ("delete", label, owner, issued.ordinal)
        if r < 0.72:
            return ("drop", label, rng.randrange(len(USERS)), rng.randrange(len(CONTENTS)))
        if r < 0.78:
            return ("lfs", label, rng.randrange(len(USERS)), rng.randrange(len(CONTENTS) - 1))
        if r < 0.83:
            return ("reconcile", label, rng.random() < 0.5)  # the scheduled run, or one with the files' sweep
        if r < 0.97:
            seconds = rng.choice((1, 5, 30, 120, 600, 1000, 3700, 4 * 3600, 8 * 24 * 3600))
            return ("tick", seconds)
        return ("ttl",)

    def _apply(self, entry: Entry) -> bool:
        """Carries out one decision; False: it names nothing this run has (a shrunk script's leftover)."""
        world, kind = self.world, entry[0]
        if kind == "step":
            op = self.ops.get(entry[1])
            if op is None or op.done:
                return False
            fault = entry[2] if entry[2] in faults_at(op.point) else None
            if op.deadline is not None and world.now > op.deadline and "crash" in faults_at(op.point):
                fault = "crash"  # its function's timeout ended it (Lambda: the process is stopped)
            self._race(op)
            self.coverage.points.add(op.point)
            self.changed = not reads_only(op.point)
            world.scheduler.step(op, fault)
            self._finished(op)
            return True
        if kind == "deliver":
            message = next((m for m in world.messages if m.ident == entry[2]), None)
            if message is None:
                return False
            world.messages.remove(message)
            self._start(Op(len(self.ops), "deliver", entry[1], world.op_deliver(message), message=message))
            return True
        if kind == "upload":
            _, label, user, content, checksum = entry
            self._start(Op(len(self.ops), "upload", label, world.op_upload(USERS[user], content, checksum)))
            return True
        if kind == "delete":
            _, label, user, ordinal = entry
            issued = next((i for i in world.issued if i.ordinal == ordinal), None)
            if issued is None:
                return False
            if USERS[user] == issued.user:
                issued.deleted = True  # sent: its outcome may be unknown to the client, never "acknowledged, kept"
            self._start(Op(len(self.ops), "delete", label, world.op_delete(USERS[user], issued.upload_id)))
            return True
        if kind == "drop":
            _, label, user, content = entry
            self._start(Op(len(self.ops), "drop", label, world.op_drop(USERS[user], content)))
            return True
        if kind == "lfs":
            _, label, user, content = entry
            self._start(Op(len(self.ops), "lfs", label, world.op_lfs(USERS[user], content)))
            return True
        if kind == "reconcile":
            sweep = bool(entry[2]) if len(entry) > 2 else True
            self._start(Op(len(self.ops), "reconcile", entry[1], world.op_reconcile(sweep=sweep)))
            return True
        if kind == "tick":
            world.now += timedelta(seconds=entry[1])
            return True
        if kind == "ttl":
            world.ttl()
            return True
        raise ValueError(entry)

    def _start(self, op: Op) -> None:
        self.changed = False  # an operation runs up to its first port call: nothing written yet
        op.deadline = self.world.now + timedelta(seconds=TIMEOUTS.get(op.kind, 29))
        self.ops[op.label] = op
        self._last = op
        self.world.scheduler.start(op)
        self._finished(op)

    def _race(self, op: Op) -> None:
        """An interleaving of a racing pair: `op` makes its call while another operation it switched from waits."""
        last = self._last
        if last is not None and last is not op and not last.done:
            self.coverage.races.add((last.kind, last.point, op.kind, op.point))
        self._last = op

    def _finished(self, op: Op) -> None:
        if not op.done:
            return
        error = op.error
        if error is not None and not isinstance(error, DfdError):
            raise Violation("no 500: an operation raised what is no DfdError", [f"{op.kind} {op.label}: {error!r}"])
        if op.kind == "deliver" and (op.crashed or error is not None):
            self.world.redeliver(op.message)

    # ------------------------------------------------------------------ the run
    def run(self) -> Failure | None:
        with deterministic(self.seed), on_fakes(self.world):
            try:
                self._run()
            except Violation as violation:
                return Failure(self.seed, violation.check, str(violation), self.trace)
            finally:
                self.world.scheduler.stop(list(self.ops.values()))
                self.coverage.reached |= self.world.reached
                self.coverage.calls = sum(op.calls for op in self.ops.values())
        return None

    def _run(self) -> None:
        source = iter(self.script) if self.script is not None else None
        for position in range(self.steps if source is None else len(self.script or [])):
            entry = self._draw(position) if source is None else next(source)
            self.world.now += timedelta(seconds=1)  # each decision takes its time (records' stamps are seconds)
            self.changed = True
            if self._apply(entry):
                self.trace.append(entry)
                self.coverage.steps += 1
                if self.changed:  # a read, a pause or a start changes nothing the checks see
                    step_checks(self.world)
        self._quiesce()
        quiet_checks(self.world)

    def _quiesce(self) -> None:
        """No more faults: every operation finishes, every message is delivered, the clock passes the grace periods
        and the URLs' expiry, and the reconcile runs (its re-drives delivered in turn), three times over."""
        world = self.world

        def drain() -> None:
            for _ in range(10_000):
                pending = [op for op in self.ops.values() if not op.done]
                if pending:
                    self._apply(("step", pending[0].label, None))
                elif world.messages:
                    message: Message = world.messages[0]
                    self._apply(("deliver", f"q{len(self.ops)}", message.ident))
                else:
                    return
                self.coverage.steps += 1
                if self.changed:
                    step_checks(world)
            raise Violation("quiet: the world settles", ["operations or messages still going after 10000 steps"])

        for _ in range(3):
            drain()
            world.now += timedelta(hours=2)
            self._apply(("reconcile", f"r{len(self.ops)}"))
            drain()


def shrink(failure: Failure, budget: float = 60.0) -> Failure:
    """The failure's trace with as many decisions removed as keep it failing the same check (delta debugging)."""
    deadline = time.monotonic() + budget
    best = failure

    def fails(candidate: list[Entry]) -> Failure | None:
        found = Episode(failure.seed, candidate).run()
        return found if found is not None and found.check == failure.check else None

    # first whole operations: each one's start and every step of it (and the ticks, one by one)
    labels = list(dict.fromkeys(str(entry[1]) for entry in best.trace if entry[0] not in ("tick", "ttl")))
    for label in labels:
        if time.monotonic() >= deadline:
            break
        candidate = [entry for entry in best.trace if entry[0] in ("tick", "ttl") or str(entry[1]) != label]
        if len(candidate) < len(best.trace) and (found := fails(candidate)) is not None:
            best = found
    chunk = max(1, len(best.trace) // 2)
    while chunk >= 1 and time.monotonic() < deadline:
        start, shrunk = 0, False
        while start < len(best.trace) and time.monotonic() < deadline:
            found = fails(best.trace[:start] + best.trace[start + chunk :])
            if found is not None:
                best, shrunk = found, True
            else:
                start += chunk
        if not shrunk:
            chunk //= 2
    return best


def explore(seeds: Iterator[int], *, deadline: float, steps: int = STEPS) -> tuple[Coverage, Failure | None]:
    """Episodes of the given seeds until the deadline (time.monotonic) or a failure."""
    coverage = Coverage()
    for seed in seeds:
        if time.monotonic() >= deadline:
            break
        episode = Episode(seed, steps=steps)
        failure = episode.run()
        coverage.merge(episode.coverage)
        if failure is not None:
            return coverage, failure
    return coverage, None


def report(failure: Failure) -> str:
    shrunk = shrink(failure)
    lines = [
        f"simulation seed {failure.seed} fails: {failure.message}",
        f"replay: make sim SEED={failure.seed}",
        f"shrunk trace ({len(shrunk.trace)} of {len(failure.trace)} decisions; {shrunk.message}):",
    ]
    lines += [f"  {json.dumps(entry)}" for entry in shrunk.trace]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.sim.runner", description=__doc__)
    parser.add_argument("--seed", type=int, help="one episode of this seed (default: episodes from a random seed)")
    parser.add_argument("--duration", type=float, default=0, help="run episodes this many seconds")
    parser.add_argument("--steps", type=int, default=STEPS, help="decisions per episode")
    args = parser.parse_args(argv)
    started = time.monotonic()
    if args.seed is not None and not args.duration:
        seeds: Iterator[int] = iter([args.seed])
        deadline = float("inf")
    else:
        first = args.seed if args.seed is not None else random.SystemRandom().randrange(2**31)
        seeds = iter(range(first, first + 10**9))
        deadline = started + args.duration
    coverage, failure = explore(seeds, deadline=deadline, steps=args.steps)
    elapsed = time.monotonic() - started
    summary = coverage.summary() | {"seconds": round(elapsed, 1), "steps_per_second": round(coverage.steps / elapsed)}
    print(json.dumps(summary, indent=1))
    if failure is not None:
        print(report(failure), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
