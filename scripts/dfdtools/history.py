"""``scripts/history``: a simulated stretch of the counters' history on the local stack (``make run``).

Hour by hour over ``--days`` ending at ``--end`` (default: now), it uploads ``--uploads-per-hour`` small files as
``--user`` through the API (every third one the content of the one before: a 409 precheck duplicate), then invokes
SnapshotFunction through the local Lambda Invoke API once per ``--every`` seconds of that hour (300: every 5-minute
interval; 3600, the default: once, at its start) with that time as ``now``: the snapshots hold the real counters (an
ingest still running shows in a later one), taken at a simulated clock. GET /admin/stats/history then reads the
whole stretch.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta
from pathlib import Path

import requests

from dfdtools.token import add_local_sign_in_args, local_token
from dfdtools.tools import LOCAL_API, LOCAL_LAMBDA, interruptible, reports_unreachable
from dfdtools.upload import upload_one

FUNCTION = "SnapshotFunction"
STEP = 300


def invoke_snapshot(session: requests.Session, lambda_url: str, moment: datetime) -> dict[str, object]:
    """One snapshot at `moment` (SnapshotFunction's result: its time and totals)."""
    url = f"{lambda_url}/2015-03-31/functions/{FUNCTION}/invocations"
    answer = session.post(url, json={"now": moment.strftime("%Y-%m-%dT%H:%M:%SZ")}, timeout=30)
    answer.raise_for_status()
    result: dict[str, object] = answer.json()
    if "errorMessage" in result:
        raise RuntimeError(f"{FUNCTION} failed: {result['errorMessage']}")
    return result


def content(seed: int, n: int) -> bytes:
    """The n-th upload's bytes of a run (`seed`: its start): every third one repeats the content of the one before
    it; another run's contents are its own."""
    base = n - 1 if n % 3 == 2 else n
    return f"dfd simulated history {seed}, content {base}\n".encode() * (8 + base % 50)


@interruptible
@reports_unreachable
def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="scripts/history", description=__doc__.split("\n\n")[1])
    parser.add_argument("--days", type=float, default=7.0, help="how long a history to write (default 7)")
    parser.add_argument("--uploads-per-hour", type=int, default=1, help="uploads each hour (default 1)")
    parser.add_argument(
        "--every", type=int, choices=(STEP, 3600), default=3600, help="seconds between snapshots (default 3600)"
    )
    parser.add_argument("--end", help="the simulated end, YYYY-MM-DDTHH:MM:SSZ (default: now)")
    parser.add_argument("--api", default=LOCAL_API, help=f"API base URL (default: make run's, {LOCAL_API})")
    parser.add_argument("--lambda-url", default=LOCAL_LAMBDA, help=f"Lambda Invoke API (default: {LOCAL_LAMBDA})")
    add_local_sign_in_args(parser)
    args = parser.parse_args(argv)
    if not 0 < args.days <= 400 or args.uploads_per_hour < 0:
        parser.error("--days must be in (0, 400] and --uploads-per-hour >= 0")
    if args.end and not re.fullmatch(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}Z", args.end):
        parser.error("--end must look like 2030-01-01T00:00:00Z")
    end = datetime.fromisoformat(args.end) if args.end else datetime.now(UTC)
    end = end.replace(microsecond=0) - timedelta(seconds=int(end.timestamp()) % STEP)
    start = end - timedelta(days=args.days)
    session = requests.Session()
    session.headers["Authorization"] = f"Bearer {local_token(args.user, args.password, args.endpoint_url)}"
    uploads = snapshots = 0
    outcomes: dict[str, int] = {}
    with tempfile.TemporaryDirectory(prefix="dfd-history-") as scratch, ThreadPoolExecutor(4) as pool:
        hour = start
        while hour < end:
            for _ in range(args.uploads_per_hour):
                uploads += 1
                path = Path(scratch) / f"history-{uploads:05d}.txt"
                path.write_bytes(content(int(start.timestamp()), uploads))
                result = upload_one(args.api, path, wait=0.0, bar=False, session=session)
                outcomes[result.outcome] = outcomes.get(result.outcome, 0) + 1
            ticks = [hour + timedelta(seconds=args.every * n) for n in range(3600 // args.every)]
            taken = list(
                pool.map(lambda tick: invoke_snapshot(session, args.lambda_url, tick), [t for t in ticks if t <= end])
            )
            snapshots += len(taken)
            hour += timedelta(hours=1)
    summary = {"from": start.isoformat(), "to": end.isoformat(), "snapshots": snapshots, "uploads": outcomes}
    print(json.dumps(summary), file=sys.stdout)
    return 0


if __name__ == "__main__":
    sys.exit(main())
