"""A moment's trouble with the API server is not a failure: one policy for retrying a call.

Transient: a 500, 502, 503 or 504, a 429 (unless the caller gives it a meaning of its own, as an
eviction's "the disruption budget says not now" has), and a dropped or refused connection. Anything
else (401, 403, 404, 409, 422, ...) is an answer, raised at once.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable
from typing import TypeVar

import tenacity
import urllib3
from kubernetes.client.exceptions import ApiException

ATTEMPTS = 4  # tries of one call
BACKOFF_FIRST = 0.2  # seconds before the second try; doubled each time, at most BACKOFF_MAX
BACKOFF_MAX = 2.0
TRANSIENT = frozenset({500, 502, 503, 504})

T = TypeVar("T")


def transient(exc: BaseException, retry_429: bool = True) -> bool:
    if isinstance(exc, urllib3.exceptions.HTTPError):
        return True
    if isinstance(exc, ApiException):
        return exc.status in TRANSIENT or (retry_429 and exc.status == 429)
    return False


def with_retries(
    call: Callable[[], T], *, retry_429: bool = True, sleep: Callable[[float], None] = time.sleep
) -> T:
    """`call()`, tried again after a transient failure, ATTEMPTS tries in all; the last failure is
    raised as it came. A fresh Retrying per call, so threads share nothing."""
    retrying = tenacity.Retrying(
        stop=tenacity.stop_after_attempt(ATTEMPTS),
        wait=tenacity.wait_exponential(multiplier=BACKOFF_FIRST, max=BACKOFF_MAX),
        retry=tenacity.retry_if_exception(functools.partial(transient, retry_429=retry_429)),
        sleep=sleep,
        reraise=True,
    )
    return retrying(call)
