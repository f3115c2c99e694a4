"""The lazy X-Ray provider: no SDK unless an invocation is traced and sampled."""

from __future__ import annotations

import pytest

from dfd.core.observability import LazyXRayProvider, _unsampled

ROOT = "Root=1-67407c00-0123456789abcdef01234567;Parent=0123456789abcdef"


@pytest.mark.parametrize(
    ("header", "unsampled"),
    [(f"{ROOT};Sampled=0", True), (f"{ROOT};Sampled=1", False), (f"{ROOT};Sampled=?", False), ("", False)],
)
def test_unsampled_reads_lambdas_decision(header: str, unsampled: bool) -> None:
    assert _unsampled(header) is unsampled


def test_an_unsampled_invocation_never_loads_the_sdk(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWS_XRAY_SDK_ENABLED", "true")
    monkeypatch.setenv("_X_AMZN_TRACE_ID", f"{ROOT};Sampled=0")
    provider = LazyXRayProvider()
    with provider.in_subsegment(name="## handler") as subsegment:
        subsegment.put_annotation("ColdStart", True)
        subsegment.put_metadata("handler response", {"statusCode": 200})
    provider.put_annotation("Service", "dfd")
    assert provider._recorder is None
