"""Step Functions adapter of the segment workflow's start (dfd.ingest.ports.HashingStarter): StartExecution of the
state machine with the execution's name; ExecutionAlreadyExists (the name is taken by a running or finished
execution) is an answer, not an error."""

from __future__ import annotations

import json
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from dfd.core.errors import ServiceUnavailable


class SegmentWorkflow:
    def __init__(self, client: Any, state_machine_arn: str) -> None:
        self._sfn = client
        self._arn = state_machine_arn

    def start_hashing(self, name: str, event_key: str) -> bool:
        try:
            self._sfn.start_execution(stateMachineArn=self._arn, name=name, input=json.dumps({"event_key": event_key}))
        except ClientError as error:
            if error.response.get("Error", {}).get("Code") == "ExecutionAlreadyExists":
                return False
            raise ServiceUnavailable(f"Step Functions StartExecution failed: {error}") from error
        except BotoCoreError as error:
            raise ServiceUnavailable(f"Step Functions StartExecution failed: {error}") from error
        return True

    def died(self, name: str) -> bool:
        # an execution's ARN: the state machine's, with :execution: and the name in place of :stateMachine:
        arn = self._arn.replace(":stateMachine:", ":execution:", 1) + ":" + name
        try:
            found = self._sfn.describe_execution(executionArn=arn)
        except (ClientError, BotoCoreError) as error:
            raise ServiceUnavailable(f"Step Functions DescribeExecution failed: {error}") from error
        return str(found.get("status")) in DIED


DIED = {"FAILED", "TIMED_OUT", "ABORTED"}
