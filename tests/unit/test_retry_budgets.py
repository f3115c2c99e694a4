"""The one retry policy (dfd.core.retry, docs/retries.md): every client in botocore's standard mode within its written
limits, and every function's written attempt budget within its Timeout as template.yaml sets it."""

from __future__ import annotations

import random
from typing import Any

import pytest
from botocore.retries.standard import ExponentialBackoff

from dfd import deps
from dfd.adapters import aws
from dfd.core import retry
from dfd.core.retry import API_CALLS, BUDGETS, COMPLETE_CALL, OBJECT_READS, Backoff, CallLimits
from dfdlocal.template import load_template
from tests.support import ROOT


def _functions() -> dict[str, float]:
    """Every function of the template and its Timeout (the Globals' when it sets none)."""
    template = load_template(ROOT / "template.yaml")
    default = template["Globals"]["Function"]["Timeout"]
    return {
        name: float(resource["Properties"].get("Timeout", default))
        for name, resource in template["Resources"].items()
        if resource["Type"] == "AWS::Serverless::Function"
    }


def test_every_function_has_a_budget_within_its_timeout() -> None:
    timeouts = _functions()
    budgets = {budget.function: budget for budget in BUDGETS}
    assert sorted(budgets) == sorted(timeouts), "a function without a budget, or a budget without its function"
    over = {
        name: (round(budget.seconds(), 2), timeouts[name])
        for name, budget in budgets.items()
        if budget.seconds() > timeouts[name]
    }
    assert not over, f"retries may outlive the function (budget s, Timeout s): {over}"


def test_a_budget_counts_every_attempt_at_its_timeouts_and_every_pause_at_its_longest() -> None:
    limits = CallLimits(attempts=3, connect_timeout=0.5, read_timeout=1.0)
    assert limits.worst_seconds() == 3 * 1.5 + (1 + 2)  # botocore's throttling pauses: up to 1 s, then 2 s
    assert retry.Budget("F", limits, 4, "").seconds() == 4 * Backoff.LONGEST + 7.5
    # for scale: adaptive mode's 6 attempts of 60 s timeouts under 8 domain attempts
    assert CallLimits(attempts=6, connect_timeout=60, read_timeout=60).worst_seconds() > 10 * 60


def test_the_pause_formula_is_botocores() -> None:
    """The budget's botocore pauses are the standard mode's throttling pauses of this botocore."""
    backoff = ExponentialBackoff(random=lambda: 1.0)
    scale = ExponentialBackoff._DEFAULT_BACKOFF_CONFIG["throttling_base_scale"]
    assert scale == retry.BOTOCORE_THROTTLING_SCALE and backoff._max_backoff == retry.BOTOCORE_MAX_BACKOFF
    assert ExponentialBackoff._BASE == 2


@pytest.mark.parametrize(
    ("factory", "limits"),
    [
        (aws._dynamodb, API_CALLS),
        (aws._s3, API_CALLS),
        (aws._s3_ingest, OBJECT_READS),
        (aws._s3_complete, COMPLETE_CALL),
        (aws._sqs, API_CALLS),
        (aws._events, API_CALLS),
        (aws._cognito, API_CALLS),
    ],
)
def test_every_client_retries_in_standard_mode_within_its_limits(
    monkeypatch: pytest.MonkeyPatch, factory: Any, limits: CallLimits
) -> None:
    for name in ("AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_S3"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_DEFAULT_REGION", "eu-west-1")
    deps.reset()
    config = factory().meta.config
    assert config.retries == {"mode": "standard", "total_max_attempts": limits.attempts}
    assert (config.connect_timeout, config.read_timeout) == (limits.connect_timeout, limits.read_timeout)


def test_an_emulator_gets_longer_timeouts_but_the_same_attempts(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:1")
    config = API_CALLS.config()
    assert config["read_timeout"] == API_CALLS.read_timeout * retry.EMULATOR_TIMEOUT_FACTOR
    assert config["retries"]["total_max_attempts"] == API_CALLS.attempts
    assert COMPLETE_CALL.config()["read_timeout"] == COMPLETE_CALL.read_timeout  # its timeout is the answer's


def test_the_backoff_is_exponential_jittered_and_capped() -> None:
    pauses: list[float] = []
    backoff = Backoff(pauses.append, random.Random(7))
    for attempt in range(1, 10):
        backoff(attempt)
    for attempt, pause in enumerate(pauses, start=1):
        expected = min(Backoff.CAP, Backoff.BASE * 2**attempt)
        assert 0.5 * expected <= pause <= 1.5 * expected <= Backoff.LONGEST
    assert len({round(p, 6) for p in pauses}) == len(pauses)  # jittered: no two alike
