"""`asg-reconciler run` as a real process for the loop's tests and benchmarks: started with the test's
environment (moto, the fake API, the bare repo), scraped over HTTP, stopped with a real signal."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Mapping
from pathlib import Path

from prometheus_client.parser import text_string_to_metric_families

from tests.support.git import free_port

RUN_KEYS = {
    "interval": "30s",
    "applyPollInterval": "500ms",
    "debounce": "200ms",
    "leaseDuration": "3s",
    "renewDeadline": "2s",
    "retryPeriod": "500ms",
    "maxBackoff": "4s",
    "namespace": "kube-system",
}


def with_run(config: Path, stages: str, port: int, keys: Mapping[str, str] | None = None) -> Path:
    """A copy of `config` with a `run:` section for these stages and this metrics port."""
    target = config.with_name(f"run-{port}.yaml")
    merged = {**RUN_KEYS, **(keys or {}), "stages": f"[{stages}]", "metricsAddress": f"'127.0.0.1:{port}'"}
    target.write_text(
        config.read_text() + "run: {" + ", ".join(f"{k}: {v}" for k, v in merged.items()) + "}\n"
    )
    return target


class RunProcess:
    def __init__(
        self,
        config: Path,
        stages: str = "plan, apply",
        keys: Mapping[str, str] | None = None,
        env: Mapping[str, str] | None = None,
    ) -> None:
        self.port = free_port()
        self.config = with_run(config, stages, self.port, keys)
        self.log = config.with_name(f"run-{self.port}.log")
        self._log_file = open(self.log, "wb")  # noqa: SIM115 - open for the process's life
        self.process = subprocess.Popen(
            [sys.executable, "-m", "reconciler", "--log-level", "debug", "run", "--config", str(self.config)],
            stdout=self._log_file,
            stderr=subprocess.STDOUT,
            env={**os.environ, "PYTHONUNBUFFERED": "1", **(env or {})},
        )

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def get(self, path: str) -> tuple[int, str]:
        try:
            with urllib.request.urlopen(self.url + path, timeout=5) as reply:
                return reply.status, reply.read().decode()
        except urllib.error.HTTPError as exc:
            return exc.code, exc.read().decode()
        except OSError as exc:
            return 0, str(exc)

    def metrics(self) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
        """Every sample, keyed by name and sorted labels; none while the process is not serving."""
        code, text = self.get("/metrics")
        if code != 200:
            return {}
        return {
            (sample.name, tuple(sorted(sample.labels.items()))): sample.value
            for family in text_string_to_metric_families(text)
            for sample in family.samples
        }

    def metric(self, name: str, **labels: str) -> float | None:
        return self.metrics().get((name, tuple(sorted(labels.items()))))

    def output(self) -> str:
        return self.log.read_text(errors="replace")

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 30.0) -> int:
        if self.process.poll() is None:
            self.process.send_signal(sig)
        code = self.process.wait(timeout=timeout)
        self._log_file.close()
        return code

    def __enter__(self) -> RunProcess:
        return self

    def __exit__(self, *exc: object) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait(timeout=10)
        self._log_file.close()


def wait_for(
    what: Callable[[], object], timeout: float, message: str, *, log: Callable[[], str] | None = None
) -> object:
    """`what()` once it is truthy; else an AssertionError naming `message`, with the log as it is
    when the wait ends."""
    deadline = time.monotonic() + timeout
    while True:
        value = what()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {message}\n{log() if log else ''}")
        time.sleep(0.1)
