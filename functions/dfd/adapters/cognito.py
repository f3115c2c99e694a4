"""The user directory of personal access tokens (dfd.identity.ports.UserDirectory): the Cognito user pool.

A token's user is looked up by username (AdminGetUser: its sub and whether it is enabled; AdminListGroupsForUser:
its groups) and the answer kept CACHE_SECONDS per process, so a git push's dozens of requests cost the pool one
lookup, and a change of the user's groups (or a disabled user) applies within that time.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from dfd.core.errors import ServiceUnavailable
from dfd.identity.ports import DirectoryUser

CACHE_SECONDS = 60.0
_GONE = {"UserNotFoundException", "ResourceNotFoundException"}


class CognitoDirectory:
    def __init__(self, client: Any, user_pool_id: str, *, clock: Callable[[], float] = time.monotonic) -> None:
        self._idp = client
        self._pool = user_pool_id
        self._clock = clock
        self._cache: dict[str, tuple[float, DirectoryUser | None]] = {}
        self._lock = threading.Lock()

    def user(self, username: str) -> DirectoryUser | None:
        now = self._clock()
        with self._lock:
            cached = self._cache.get(username)
        if cached is not None and cached[0] > now:
            return cached[1]
        found = self._lookup(username)
        with self._lock:
            self._cache[username] = (now + CACHE_SECONDS, found)
        return found

    def _lookup(self, username: str) -> DirectoryUser | None:
        try:
            user = self._idp.admin_get_user(UserPoolId=self._pool, Username=username)
            if not user.get("Enabled", True):
                return None
            sub = next((a["Value"] for a in user.get("UserAttributes", []) if a.get("Name") == "sub"), None)
            groups: list[str] = []
            token: str | None = None
            while True:
                kwargs: dict[str, Any] = {"UserPoolId": self._pool, "Username": username}
                if token:
                    kwargs["NextToken"] = token
                page = self._idp.admin_list_groups_for_user(**kwargs)
                groups += [group["GroupName"] for group in page.get("Groups", [])]
                token = page.get("NextToken")
                if not token:
                    break
        except ClientError as error:
            if error.response.get("Error", {}).get("Code") in _GONE:
                return None
            raise ServiceUnavailable(
                f"the user pool did not answer ({error.response.get('Error', {}).get('Code')})"
            ) from error
        except BotoCoreError as error:
            raise ServiceUnavailable(f"the user pool did not answer: {error}") from error
        return DirectoryUser(sub, tuple(groups)) if sub else None
