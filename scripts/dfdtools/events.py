"""``scripts/events``: dfd's outcome events as they arrive (docs/events/).

Locally (make run) every event on the stack's bus is delivered to the SQS queue `dfd-events`; this reads it.
Against a deployed stack, name a queue a rule of yours routes the bus's events to (`--aws --queue URL`, e.g.
the example consumer's EventsExampleQueue). Each event is printed as one line (or as its JSON with --json),
and removed from the queue unless --keep.

Exit status: 0; 2 when the endpoint cannot be reached or the queue does not exist.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from typing import Any

from dfdlocal import names
from dfdtools.tools import add_target_args, reports_unreachable, target

WAIT_SECONDS = 10


def line(event: dict[str, Any]) -> str:
    detail = event.get("detail") or {}
    who = (
        f" {detail.get('tenant')}/{detail.get('owner')} upload {detail.get('upload_id')} {detail.get('filename')!r}"
        f" via {detail.get('via')}"
    )
    return (
        f"{detail.get('occurred_at', event.get('time'))}  {event.get('detail-type', '?'):<20}"
        f" {str(detail.get('sha256'))[:12]} {detail.get('size')} bytes"
        f"{who if str(event.get('detail-type', '')).startswith('Upload ') else ''}  id {detail.get('event_id')}"
    )


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="scripts/events", description=__doc__.split("\n\n")[0])
    add_target_args(parser)
    parser.add_argument("--queue", help=f"queue URL or name (default: the local stack's {names.EVENTS_QUEUE})")
    parser.add_argument("--follow", "-f", action="store_true", help="keep printing events as they arrive")
    parser.add_argument("--json", action="store_true", help="print each event's JSON, one per line")
    parser.add_argument("--keep", action="store_true", help="leave the events on the queue")
    args = parser.parse_args(argv)
    if args.aws and not args.queue:
        parser.error("--aws needs --queue: the URL of a queue a rule routes your stack's events to")
    return args


@reports_unreachable
def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    sqs = target(args).client("sqs")
    queue = args.queue or names.EVENTS_QUEUE
    try:
        url = queue if queue.startswith(("http://", "https://")) else sqs.get_queue_url(QueueName=queue)["QueueUrl"]
    except sqs.exceptions.QueueDoesNotExist:
        print(f"no queue {queue!r}: is `make run` running? (or name a queue with --queue)", file=sys.stderr)
        return 2
    try:
        while True:
            response = sqs.receive_message(
                QueueUrl=url, MaxNumberOfMessages=10, WaitTimeSeconds=WAIT_SECONDS if args.follow else 1
            )
            messages = response.get("Messages", [])
            for message in messages:
                event = json.loads(message["Body"])
                print(json.dumps(event) if args.json else line(event), flush=True)
                if not args.keep:
                    sqs.delete_message(QueueUrl=url, ReceiptHandle=message["ReceiptHandle"])
            if not messages and not args.follow:
                return 0
    except KeyboardInterrupt:
        return 0


if __name__ == "__main__":
    sys.exit(main())
