"""A moment's trouble with the API server is not a failure: one policy for retrying a call.

Transient: a 500, 502, 503 or 504, a 429 (unless the caller gives it a meaning of its own, as an
eviction's "the disruption budget says not now" has), and a dropped or refused connection. Anything
else (401, 403, 404, 409, 422, ...) is an answer, raised at once.

A timeout (`kubernetes.requestTimeout`, set on every call by `kube.client`) is tried once more and
no further: a hung API server costs one call at most 2 x the timeout plus BACKOFF_FIRST, not
ATTEMPTS x the timeout. urllib3 itself never retries a timeout (`kube.client`), so nothing
multiplies that bound.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

import tenacity
import urllib3
from kubernetes.client.exceptions import ApiException

from reconciler.domain.backoff import Backoff

ATTEMPTS = 4  # tries of one call
TIMEOUT_ATTEMPTS = 2  # of which may time out: a timeout after the first try is final
BACKOFF_FIRST = 0.2  # seconds before the second try; doubled each time, at most BACKOFF_MAX
BACKOFF_MAX = 2.0
TRANSIENT = frozenset({500, 502, 503, 504})
SCHEDULE = Backoff(BACKOFF_FIRST, BACKOFF_MAX)

T = TypeVar("T")


def timed_out(exc: BaseException | None) -> bool:
    """A connect or read timeout, bare or as the reason of urllib3's MaxRetryError. A refused
    connection is not one, although urllib3 makes NewConnectionError a ConnectTimeoutError."""
    if isinstance(exc, urllib3.exceptions.MaxRetryError):
        exc = exc.reason
    return isinstance(exc, urllib3.exceptions.TimeoutError) and not isinstance(
        exc, urllib3.exceptions.NewConnectionError
    )


def no_answer(exc: BaseException) -> tuple[str, str]:
    """(kind, reason) of a call that got no HTTP answer: timed out, refused, else urllib3's first
    line. One place, since urllib3 makes a refused connection a kind of ConnectTimeoutError."""
    cause: BaseException = exc
    if isinstance(exc, urllib3.exceptions.MaxRetryError) and exc.reason is not None:
        cause = exc.reason
    text = str(cause).splitlines()[0] if str(cause) else type(cause).__name__
    if "Connection refused" in text:
        return "refused", "connection refused"
    if timed_out(exc):
        return "timed out", "timed out"
    return type(cause).__name__, text


class _TimedOutAgain(tenacity.stop.stop_base):
    def __call__(self, state: tenacity.RetryCallState) -> bool:
        outcome = state.outcome
        return (
            state.attempt_number >= TIMEOUT_ATTEMPTS
            and outcome is not None
            and outcome.failed
            and timed_out(outcome.exception())
        )


def transient(exc: BaseException, retry_429: bool = True) -> bool:
    if isinstance(exc, urllib3.exceptions.HTTPError):
        return True
    if isinstance(exc, ApiException):
        return exc.status in TRANSIENT or (retry_429 and exc.status == 429)
    return False


def with_retries(
    call: Callable[[], T], *, retry_429: bool = True, sleep: Callable[[float], None] = time.sleep
) -> T:
    """`call()`, tried again after a transient failure, ATTEMPTS tries in all (a timeout only on the
    first try); the last failure is raised as it came. A fresh Retrying per call, so threads share
    nothing."""
    retrying = tenacity.Retrying(
        stop=tenacity.stop_after_attempt(ATTEMPTS) | _TimedOutAgain(),
        wait=lambda state: SCHEDULE.delay(state.attempt_number - 1),
        retry=tenacity.retry_if_exception(functools.partial(transient, retry_429=retry_429)),
        sleep=sleep,
        reraise=True,
    )
    began = time.monotonic()
    try:
        return retrying(call)
    except Exception as exc:
        if timed_out(exc):
            tries = int(retrying.statistics.get("attempt_number", 1))
            setattr(exc, _SPENT, Spent(tries, time.monotonic() - began))  # on urllib3's own exception
        raise


_SPENT = "_asg_reconciler_spent"


@dataclass(frozen=True)
class Spent:
    """What a call that timed out cost in all: its tries and the seconds from the first to the end,
    so the message states the real bound, not one try's timeout."""

    tries: int
    seconds: float


def spent(exc: BaseException) -> Spent | None:
    """The tries and time `with_retries` spent before `exc`, a timeout; None if it did not come
    through it."""
    found = getattr(exc, _SPENT, None)
    return found if isinstance(found, Spent) else None
