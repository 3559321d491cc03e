"""What every watch of ours shares (the cluster cache's reflectors, the wake-up hint's key watch):
reading the stream a line at a time, shutting it from another thread, and naming a failure once."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import Any

import msgspec
import urllib3
from kubernetes.client.exceptions import ApiException

from reconciler.domain.errors import ReconcilerError
from reconciler.kube.retry import no_answer

_log = logging.getLogger(__name__)


def lines(response: Any) -> Iterator[bytes]:
    """The stream's newline-delimited JSON, a line at a time (kubernetes.watch's protocol)."""
    buffer = b""
    for chunk in response.stream(amt=None, decode_content=False):
        buffer += chunk
        *complete, buffer = buffer.split(b"\n")
        for line in complete:
            if line.strip():
                yield line
    if buffer.strip():
        yield buffer


def shut(response: Any) -> None:
    """Stop a read in progress on another thread: shut the socket down under it."""
    try:
        response.shutdown()
    except Exception:  # already closed, or a response without a socket
        _log.debug("shutting a watch stream down failed", exc_info=True)


def describe(exc: Exception, host: str, failed: tuple[type[Exception], ...] = ()) -> tuple[str, str]:
    """(kind, message) of a watch's failure; the kind decides when a new warning is worth logging
    (each kind once per outage). `failed`: the caller's own "this attempt failed" types."""
    if isinstance(exc, ApiException):
        return f"HTTP {exc.status}", f"HTTP {exc.status} {exc.reason or 'error'}"
    if isinstance(exc, urllib3.exceptions.HTTPError):
        kind, why = no_answer(exc)
        return kind, f"{'cannot reach' if kind == 'refused' else 'no answer from'} {host}: {why}"
    if isinstance(exc, (*failed, ReconcilerError)):  # a list that failed, an object we cannot read
        return "failed", str(exc)
    if isinstance(exc, msgspec.DecodeError):
        return "unreadable", f"unreadable reply: {exc}"
    return "bug", f"unexpected error: {exc!r}"
