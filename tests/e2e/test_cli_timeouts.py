"""Issue 9: no command hangs on a server that never answers, and Ctrl-C ends any command at once.

The hung server is real: a TCP socket that accepts connections and never writes a byte. The CLI
runs as a subprocess, as a user starts it, and Ctrl-C is SIGINT to its process group, as a terminal
sends it (git's children get it too).
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest
import urllib3
from kubernetes import client as k8s

from reconciler.aws import clients as aws_clients
from reconciler.config.settings import KubernetesConfig
from reconciler.kube.client import api_client
from reconciler.kube.retry import TIMEOUT_ATTEMPTS
from tests.support import k8s_objects as k
from tests.support.aws import isolate_aws_env
from tests.support.cli import run
from tests.support.kube import write_kubeconfig
from tests.support.terminal import from_a_terminal

# Real processes with timing bounds: one worker, in turn.
pytestmark = pytest.mark.xdist_group("timing")


class BlackHole:
    """Accepts TCP connections, never answers and never closes them (until the test ends)."""

    def __init__(self) -> None:
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port: int = self._listener.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}"
        self.connections: list[socket.socket] = []
        self.connected = threading.Event()
        threading.Thread(target=self._accept, name="black-hole", daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                connection, _ = self._listener.accept()
            except OSError:
                return
            self.connections.append(connection)
            self.connected.set()

    def close(self) -> None:
        for sock in [self._listener, *self.connections]:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
            sock.close()


@pytest.fixture
def hole() -> Iterator[BlackHole]:
    server = BlackHole()
    try:
        yield server
    finally:
        server.close()


def write_config(tmp_path: Path, kubeconfig: Path, extra: str = "") -> Path:
    path = tmp_path / "asg-reconciler.yaml"
    path.write_text(
        "cluster: prod\nregion: us-east-1\nnodeGroups:\n  explicit: ['0:6:general']\n"
        f"kubernetes:\n  kubeconfig: '{kubeconfig}'\n{extra}"
    )
    return path


def environment(tmp_path: Path, path: str | None = None) -> dict[str, str]:
    """The caller's environment without its AWS, Kubernetes or git set-up."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "KUBE", "GIT_"))}
    env.update(
        HOME=str(tmp_path),
        AWS_CONFIG_FILE=os.devnull,
        AWS_SHARED_CREDENTIALS_FILE=os.devnull,
        AWS_EC2_METADATA_DISABLED="true",
    )
    if path is not None:
        env["PATH"] = path
    return env


def start(tmp_path: Path, *args: str, path: str | None = None) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "reconciler", *args],
        env=environment(tmp_path, path),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,  # its own process group, to get Ctrl-C as a terminal sends it
        preexec_fn=from_a_terminal,
    )


def finish(process: subprocess.Popen[str], timeout: float) -> tuple[int, str, str]:
    try:
        out, err = process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.communicate()
        raise AssertionError(f"still running after {timeout}s") from None
    return process.returncode, out, err


def ctrl_c(process: subprocess.Popen[str]) -> float:
    """SIGINT to the process group; returns when it was sent (time.monotonic)."""
    os.killpg(process.pid, signal.SIGINT)
    return time.monotonic()


# ------------------------------------------------------------------ a hung Kubernetes API server


@pytest.mark.parametrize("command", [("status",), ("plan", "--dry-run")])
def test_a_hung_api_server_fails_within_the_request_timeout(
    hole: BlackHole, tmp_path: Path, command: tuple[str, ...]
) -> None:
    kubeconfig = write_kubeconfig(tmp_path / "kubeconfig", hole.url)
    config = write_config(tmp_path, kubeconfig, "  requestTimeout: 1s\n")
    began = time.monotonic()
    code, _, err = finish(start(tmp_path, *command, "--config", str(config)), timeout=20)
    took = time.monotonic() - began
    assert code == 1, err
    # the message states the real bound, retries included (issue 28: "timed out after 30s" came
    # after 63 s): how many tries of how long, and the seconds they took in all
    [line] = err.splitlines()
    stated = re.fullmatch(
        rf"error: cannot reach the Kubernetes API at {re.escape(hole.url)}: timed out: no answer in "
        rf"{TIMEOUT_ATTEMPTS} tries of 1s each \(kubernetes.requestTimeout\), ([0-9]+)s in all",
        line,
    )
    assert stated is not None, line
    assert TIMEOUT_ATTEMPTS <= int(stated[1]) <= took + 1
    # one retry of a timed-out call and no more: neither urllib3 nor kube.retry multiply the timeout
    assert len(hole.connections) == TIMEOUT_ATTEMPTS
    assert took < 10  # 2 x 1 s, a 0.2 s pause and the start-up


def test_ctrl_c_ends_a_command_waiting_on_a_hung_api_server(hole: BlackHole, tmp_path: Path) -> None:
    config = write_config(tmp_path, write_kubeconfig(tmp_path / "kubeconfig", hole.url))  # 30s timeout
    began = time.monotonic()
    process = start(tmp_path, "status", "--config", str(config))
    assert hole.connected.wait(20), "status never called the API server"
    time.sleep(max(0.0, 1.0 - (time.monotonic() - began)))
    sent = ctrl_c(process)
    code, _, err = finish(process, timeout=10)
    assert code == 130 and time.monotonic() - sent < 3
    assert err.strip() == "aborted" and "Traceback" not in err


def test_ctrl_c_ends_a_command_waiting_on_a_hung_git_remote(hole: BlackHole, tmp_path: Path) -> None:
    """git runs under a watchdog timer that lives as long as git.timeout (120 s) unless cancelled:
    an interrupted command must not wait for it on the way out."""
    if shutil.which("git") is None:
        pytest.skip("needs git")
    kubeconfig = write_kubeconfig(tmp_path / "kubeconfig", hole.url)
    config = write_config(
        tmp_path, kubeconfig, f"git: {{url: '{hole.url}/capacity.git', workDir: '{tmp_path / 'work'}'}}\n"
    )
    process = start(tmp_path, "status", "--config", str(config))
    assert hole.connected.wait(20), "status never fetched"
    time.sleep(0.5)
    sent = ctrl_c(process)
    code, _, err = finish(process, timeout=10)
    assert code == 130 and time.monotonic() - sent < 3
    assert err.strip() == "aborted" and "Traceback" not in err


def test_a_caller_keeps_its_own_request_timeout(hole: BlackHole, tmp_path: Path) -> None:
    """requestTimeout is the default; a caller with a timeout of its own (a watch) keeps it."""
    kubeconfig = write_kubeconfig(tmp_path / "kubeconfig", hole.url)
    api = api_client(KubernetesConfig(kubeconfig=str(kubeconfig), request_timeout=timedelta(seconds=5)))
    began = time.monotonic()
    with pytest.raises(urllib3.exceptions.ReadTimeoutError):
        k8s.CoreV1Api(api).list_node(_request_timeout=(1, 0.5))
    assert time.monotonic() - began < 2
    assert len(hole.connections) == 1  # and urllib3 did not try again


# ------------------------------------------------------------------ an EKS kubeconfig's exec plugin


def exec_kubeconfig(tmp_path: Path, server: str) -> Path:
    path = tmp_path / "kubeconfig"
    path.write_text(
        "apiVersion: v1\nkind: Config\ncurrent-context: eks\n"
        f"clusters: [{{name: eks, cluster: {{server: '{server}'}}}}]\n"
        "contexts: [{name: eks, context: {cluster: eks, user: eks}}]\n"
        "users:\n- name: eks\n  user:\n    exec:\n"
        "      apiVersion: client.authentication.k8s.io/v1beta1\n"
        "      command: aws\n      args: [eks, get-token, --cluster-name, prod]\n"
    )
    return path


def bin_dir(tmp_path: Path, aws_script: str | None = None) -> str:
    """A PATH with git (GitPython looks for it on import) and, if given, an `aws` script."""
    directory = tmp_path / "bin"
    directory.mkdir()
    git = shutil.which("git")
    if git is not None:
        (directory / "git").symlink_to(git)
    if aws_script is not None:
        (directory / "aws").write_text(aws_script)
        (directory / "aws").chmod(0o755)
    return str(directory)


def test_a_missing_exec_plugin_is_named_with_its_fix(hole: BlackHole, tmp_path: Path) -> None:
    config = write_config(tmp_path, exec_kubeconfig(tmp_path, hole.url), "  requestTimeout: 1s\n")
    code, _, err = finish(start(tmp_path, "status", "--config", str(config), path=bin_dir(tmp_path)), 20)
    assert code == 2, err
    assert err.splitlines() == [
        f"error: kubernetes.kubeconfig: {tmp_path / 'kubeconfig'}: the exec plugin command `aws` was not "
        "found on PATH (install the AWS CLI or add it to PATH, or set kubernetes.kubeconfig to a "
        "kubeconfig that does not need it)"
    ]
    assert not hole.connections  # nothing was sent without credentials


def test_a_failing_exec_plugin_is_one_line(hole: BlackHole, tmp_path: Path) -> None:
    script = "#!/bin/sh\necho 'Unable to locate credentials.' >&2\nexit 253\n"
    config = write_config(tmp_path, exec_kubeconfig(tmp_path, hole.url), "  requestTimeout: 1s\n")
    code, _, err = finish(
        start(tmp_path, "status", "--config", str(config), path=bin_dir(tmp_path, script)), 20
    )
    assert code == 2, err
    assert err.splitlines() == [
        f"error: kubernetes.kubeconfig: {tmp_path / 'kubeconfig'}: the exec plugin gave no credentials: "
        "exec: process returned 253. Unable to locate credentials."
    ]


# ------------------------------------------------------------------ a hung AWS endpoint


def test_a_hung_aws_endpoint_fails_after_two_tries(
    hole: BlackHole, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """botocore retries a timeout like any transient failure (10 tries); ours stop after two."""
    isolate_aws_env(monkeypatch, tmp_path)
    monkeypatch.setenv("AWS_ENDPOINT_URL", hole.url)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    monkeypatch.setattr(aws_clients, "READ_TIMEOUT", 1)  # 30 s in earnest
    snapshot = tmp_path / "cluster.json"
    snapshot.write_text(json.dumps({"kind": "List", "apiVersion": "v1", "items": [k.node("node-1")]}))
    config = write_config(tmp_path, tmp_path / "unused-kubeconfig")
    began = time.monotonic()
    result = run(capsys, "status", "--config", str(config), "--snapshot", str(snapshot))
    assert result.code == 1
    assert result.err.startswith("error: AWS call failed while describing node groups: Read timeout")
    assert len(result.err.splitlines()) == 1
    assert len(hole.connections) == aws_clients.TIMEOUT_ATTEMPTS
    assert time.monotonic() - began < 10


# ------------------------------------------------------------------ demo --keep


def test_demo_keep_ends_on_the_first_ctrl_c(tmp_path: Path) -> None:
    process = start(tmp_path, "demo", "--keep", str(tmp_path / "playground"))
    assert process.stdout is not None
    for line in process.stdout:
        if line.startswith("git -C "):  # the last line before it waits
            break
    else:
        raise AssertionError(finish(process, 10)[2])
    sent = ctrl_c(process)
    code, _, err = finish(process, timeout=10)
    assert code == 130 and time.monotonic() - sent < 3
    assert err.strip() == "aborted" and "Traceback" not in err
