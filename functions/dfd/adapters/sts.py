"""STS for prefix-scoped S3 credentials (dfd.identity.s3credentials.Sts): AssumeRole with a session policy.

Throttling and STS not answering (after botocore's standard-mode retries) are 503 ``service_unavailable``, the
client may retry; any other refusal (the role's trust, MaxSessionDuration, a malformed policy: the deployment's
fault, never the caller's) is 502 ``upstream_error``. Neither message carries a credential.
"""

from __future__ import annotations

from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from dfd.core.errors import ServiceUnavailable, UpstreamFailed
from dfd.identity.s3credentials import IssuedCredentials

_RETRYABLE = {"Throttling", "ThrottlingException", "RequestLimitExceeded", "ServiceUnavailable", "InternalFailure"}


class StsRoles:
    def __init__(self, client: Any) -> None:
        self._sts = client

    def assume_role(self, role_arn: str, session_name: str, policy: str, duration_seconds: int) -> IssuedCredentials:
        try:
            answer = self._sts.assume_role(
                RoleArn=role_arn, RoleSessionName=session_name, Policy=policy, DurationSeconds=duration_seconds
            )
        except ClientError as error:
            code = str(error.response.get("Error", {}).get("Code", ""))
            status = int(error.response.get("ResponseMetadata", {}).get("HTTPStatusCode", 0) or 0)
            if code in _RETRYABLE or status >= 500:
                raise ServiceUnavailable(f"STS AssumeRole is throttled or unavailable ({code})") from None
            raise UpstreamFailed(f"STS refused AssumeRole ({code})") from None
        except BotoCoreError as error:
            raise ServiceUnavailable(f"STS did not answer: {type(error).__name__}") from None
        credentials = answer["Credentials"]
        return IssuedCredentials(
            access_key_id=credentials["AccessKeyId"],
            secret_access_key=credentials["SecretAccessKey"],
            session_token=credentials["SessionToken"],
            expiration=credentials["Expiration"],
        )
