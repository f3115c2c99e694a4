"""``scripts/reconcile``: run the reconcile workflow now on the local stack (``make run``), or on a deployed stack
(``--stack NAME``: its state machine from the stack's outputs), and print its summary.

The workflow's local plumbing (definition, state machine, executions) is :mod:`dfdlocal.reconcile`; this is
its command line. The state machine is created from the template when the emulator has none of that name.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
from pathlib import Path
from typing import Any
from urllib.error import URLError

from dfdlocal.names import CREDENTIALS, REGION
from dfdlocal.reconcile import (
    STATE_MACHINE_NAME,
    create_state_machine,
    describe_summary,
    enable_executions,
    find_state_machine,
    run_reconcile,
    template_state_machine,
)
from dfdlocal.template import TEMPLATE
from dfdtools.tools import LOCAL_AWS, StackError, interruptible, require_output, stack_outputs

DEFAULT_ENDPOINT = LOCAL_AWS  # make run's, at DFD_AWS_PORT when set


@interruptible
def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="scripts/reconcile",
        description="Run the reconcile workflow now on the local stack (make run), or a deployed stack's, and print "
        "its summary.",
    )
    parser.add_argument("--stack", help="a deployed stack: its state machine from its outputs (DescribeStacks)")
    parser.add_argument("--profile", help="AWS profile (with --stack)")
    parser.add_argument("--region", help="AWS region (with --stack)")
    parser.add_argument("--endpoint-url", default=DEFAULT_ENDPOINT, help="AWS emulator (default: make run)")
    parser.add_argument("--name", default=STATE_MACHINE_NAME, help="state machine name (created if absent)")
    parser.add_argument("--template", type=Path, default=TEMPLATE, help="template defining it (when creating it)")
    parser.add_argument("--pending-only", action="store_true", help="only pending uploads (no sweep, no audit)")
    parser.add_argument("--timeout", type=float, default=300.0, help="seconds to wait for the whole run")
    parser.add_argument(
        "--now",
        help="run as if it were this UTC time (YYYY-MM-DDTHH:MM:SSZ), e.g. past the grace period and URL expiry",
    )
    args = parser.parse_args(argv)
    execution_input: dict[str, Any] = {}
    if args.pending_only:
        execution_input["sweep"] = False
    if args.now:
        if not re.fullmatch(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}Z", args.now):
            parser.error("--now must look like 2030-01-01T00:00:00Z")
        execution_input["now"] = args.now

    import boto3

    if args.stack:
        session = boto3.Session(profile_name=args.profile, region_name=args.region)
        try:
            outputs = stack_outputs(session.client("cloudformation"), args.stack)
            (machine,) = require_output(outputs, "ReconcileStateMachineArn")
            # polled every 2 s: DescribeExecution is throttled on AWS
            summary = run_reconcile(
                session.client("stepfunctions"),
                machine,
                args.timeout,
                execution_input=execution_input,
                poll=2.0,
                wait_for_turn=True,
            )
        except StackError as error:
            print(f"error: {error}", file=sys.stderr)
            return 2
        except Exception as error:
            print(f"reconcile failed: {error}", file=sys.stderr)
            return 1
        return _report(summary)
    for variable in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"):
        os.environ.setdefault(variable, CREDENTIALS[variable])

    sfn = boto3.client("stepfunctions", endpoint_url=args.endpoint_url, region_name=REGION)
    try:
        arn = find_state_machine(sfn, args.name)
        if arn is None:
            enable_executions(args.endpoint_url)
            name, path, substitutions = template_state_machine(args.template, args.endpoint_url)
            arn = create_state_machine(sfn, substitutions, name=args.name or name, definition_path=path)
            print(f"created state machine {args.name}", file=sys.stderr)
        summary = run_reconcile(sfn, arn, args.timeout, execution_input=execution_input, wait_for_turn=True)
    except (URLError, ConnectionError) as error:
        print(f"cannot reach {args.endpoint_url} ({error}): is `make run` running?", file=sys.stderr)
        return 2
    except Exception as error:
        if type(error).__name__ == "EndpointConnectionError":
            print(f"cannot reach {args.endpoint_url}: is `make run` running?", file=sys.stderr)
            return 2
        print(f"reconcile failed: {error}", file=sys.stderr)
        return 1
    return _report(summary)


def _report(summary: dict[str, Any]) -> int:
    print(json.dumps(summary, indent=2))
    print(describe_summary(summary), file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
