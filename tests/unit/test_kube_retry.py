"""no_answer: a refused connection is said as refused (urllib3 makes it a kind of timeout), a
silent server as timed out: the words every kube-edge module logs."""

from __future__ import annotations

import socket

import urllib3

from reconciler.kube.retry import no_answer, timed_out
from tests.support.git import free_port


def _failure(url: str) -> BaseException:
    pool = urllib3.PoolManager(retries=False, timeout=urllib3.Timeout(connect=1.0, read=0.3))
    try:
        pool.request("GET", url)
    except urllib3.exceptions.HTTPError as exc:
        return exc
    raise AssertionError("the request did not fail")


def test_refused_is_refused_and_silence_is_a_timeout() -> None:
    refused = _failure(f"http://127.0.0.1:{free_port()}/")  # nothing listens there
    assert no_answer(refused) == ("refused", "connection refused") and not timed_out(refused)
    with socket.socket() as silent:  # accepts (the backlog) and never answers
        silent.bind(("127.0.0.1", 0))
        silent.listen(1)
        hung = _failure(f"http://127.0.0.1:{silent.getsockname()[1]}/")
    assert no_answer(hung) == ("timed out", "timed out") and timed_out(hung)
