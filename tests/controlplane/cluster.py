"""One real Kubernetes control plane: etcd, kube-apiserver, kube-controller-manager and kube-scheduler
as separate processes configured by their flags (what kubeadm, kind and envtest do), on free loopback
ports, with every file in one directory.

The API server authenticates client certificates and ServiceAccount tokens and authorizes with
Node,RBAC (its default, AlwaysAllow, would hide every missing permission). The controller manager runs
the controllers whose work the tests watch: ReplicaSets and Deployments recreate evicted pods, the
disruption controller computes PDB status (without it every eviction under a PDB gets 429), the
garbage collector and namespace controller clean up, the token controllers serve TokenRequest-backed
ServiceAccounts. No kubelet: tests/support/node_simulator.py plays the nodes."""

from __future__ import annotations

import base64
import contextlib
import ctypes
import json
import os
import signal
import socket
import ssl
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.controlplane.binaries import Binaries
from tests.controlplane.pki import ADMIN, CONTROLLER_MANAGER, SCHEDULER, Identity, Pki

CONTROLLERS = (
    "replicaset,deployment,statefulset,disruption,garbagecollector,namespace,"
    "serviceaccount,serviceaccount-token,podgc"
)
SERVICE_ACCOUNT_ISSUER = "https://kubernetes.default.svc.cluster.local"
SERVICE_CLUSTER_IP_RANGE = "10.0.0.0/24"
STATE_FILE = "control-plane.json"
# What the API server's audit log records (tests read it: which evictions got 429, whether any request
# of the asg-reconciler namespace's ServiceAccounts got 403): those two kinds of request, no bodies.
AUDIT_POLICY = """apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived]
rules:
  - level: Metadata
    resources: [{group: "", resources: ["pods/eviction"]}]
  - level: Metadata
    userGroups: ["system:serviceaccounts:asg-reconciler"]
  - level: None
"""
ORDER = ("etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _die_with_parent() -> None:
    """In the child before exec: SIGTERM when the test process that started it dies, so a killed
    pytest worker leaves no control plane behind (Linux's PR_SET_PDEATHSIG)."""
    with contextlib.suppress(OSError):
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)


def kubeconfig(
    server: str,
    ca: Path,
    *,
    user: str,
    token: str | None = None,
    cert: Path | None = None,
    key: Path | None = None,
    namespace: str = "default",
) -> dict[str, Any]:
    """A kubeconfig with everything embedded (it still works when copied elsewhere)."""

    def data(path: Path) -> str:
        return base64.b64encode(path.read_bytes()).decode()

    credentials: dict[str, str] = {}
    if token is not None:
        credentials["token"] = token
    if cert is not None and key is not None:
        credentials["client-certificate-data"] = data(cert)
        credentials["client-key-data"] = data(key)
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "test", "cluster": {"server": server, "certificate-authority-data": data(ca)}}],
        "users": [{"name": user, "user": credentials}],
        "contexts": [{"name": "test", "context": {"cluster": "test", "user": user, "namespace": namespace}}],
        "current-context": "test",
        "preferences": {},
    }


@dataclass
class ControlPlane:
    """Started by `start`, stopped by `stop`; `from_directory` finds one that `up` left running."""

    directory: Path
    binaries: Binaries
    ports: dict[str, int] = field(default_factory=dict)
    pids: dict[str, int] = field(default_factory=dict)
    started_seconds: float = 0.0
    _processes: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict, repr=False)

    @property
    def pki(self) -> Pki:
        return Pki(self.directory / "pki")

    @property
    def url(self) -> str:
        return f"https://127.0.0.1:{self.ports['kube-apiserver']}"

    @property
    def etcd_url(self) -> str:
        return f"http://127.0.0.1:{self.ports['etcd']}"

    @property
    def admin_kubeconfig(self) -> Path:
        return self.directory / "admin.kubeconfig"

    @property
    def kubectl(self) -> Path:
        return self.binaries.path("kubectl")

    def log(self, name: str) -> Path:
        return self.directory / "logs" / f"{name}.log"

    # ------------------------------------------------------------------------------ starting
    def start(self, *, timeout: float = 180.0, die_with_parent: bool = True) -> ControlPlane:
        """Every component up and answering; on any failure everything started is stopped and the
        error carries the tail of the log of the component that failed."""
        started = time.monotonic()
        self.directory.mkdir(parents=True, exist_ok=True)
        (self.directory / "logs").mkdir(exist_ok=True)
        self.pki.write()
        (self.directory / "audit-policy.yaml").write_text(AUDIT_POLICY)
        self.ports = {name: free_port() for name in (*ORDER, "etcd-peer")}
        self._write_component_kubeconfigs()
        deadline = time.monotonic() + timeout
        try:
            self._spawn("etcd", self._etcd_flags(), die_with_parent)
            self._wait("etcd", lambda: self._etcd_healthy(), deadline)
            self._spawn("kube-apiserver", self._apiserver_flags(), die_with_parent)
            self._wait("kube-apiserver", lambda: self._https_ok("kube-apiserver", "/readyz"), deadline)
            self._spawn("kube-controller-manager", self._controller_manager_flags(), die_with_parent)
            self._spawn("kube-scheduler", self._scheduler_flags(), die_with_parent)
            self._wait(
                "kube-controller-manager",
                lambda: self._https_ok("kube-controller-manager", "/healthz", verify=False),
                deadline,
            )
            self._wait(
                "kube-scheduler", lambda: self._https_ok("kube-scheduler", "/healthz", verify=False), deadline
            )
            # the serviceaccount controller is working once `default` has its ServiceAccount: pods
            # (whose admission needs one) can be created from here on
            self._wait(
                "kube-controller-manager",
                lambda: self._https_ok(
                    "kube-apiserver", "/api/v1/namespaces/default/serviceaccounts/default"
                ),
                deadline,
            )
        except BaseException:
            self.stop()
            raise
        self.started_seconds = round(time.monotonic() - started, 2)
        self.admin_kubeconfig.write_text(
            json.dumps(
                kubeconfig(
                    self.url,
                    self.pki.ca,
                    user="admin",
                    cert=self.pki.client_cert(ADMIN),
                    key=self.pki.client_key(ADMIN),
                ),
                indent=2,
            )
        )
        self._save_state()
        return self

    def _write_component_kubeconfigs(self) -> None:
        for who in (CONTROLLER_MANAGER, SCHEDULER):
            (self.directory / f"{who.file_stem}.kubeconfig").write_text(
                json.dumps(
                    kubeconfig(
                        f"https://127.0.0.1:{self.ports['kube-apiserver']}",
                        self.pki.ca,
                        user=who.user,
                        cert=self.pki.client_cert(who),
                        key=self.pki.client_key(who),
                    )
                )
            )

    def _etcd_flags(self) -> list[str]:
        client = self.etcd_url
        peer = f"http://127.0.0.1:{self.ports['etcd-peer']}"
        return [
            f"--data-dir={self.directory / 'etcd'}",
            "--name=default",
            f"--listen-client-urls={client}",
            f"--advertise-client-urls={client}",
            f"--listen-peer-urls={peer}",
            f"--initial-advertise-peer-urls={peer}",
            f"--initial-cluster=default={peer}",
            "--unsafe-no-fsync",  # a test cluster's data dies with the test
            "--log-level=warn",
        ]

    def _apiserver_flags(self) -> list[str]:
        pki = self.pki
        return [
            f"--etcd-servers={self.etcd_url}",
            "--bind-address=127.0.0.1",
            "--advertise-address=127.0.0.1",
            f"--secure-port={self.ports['kube-apiserver']}",
            f"--tls-cert-file={pki.serving_cert}",
            f"--tls-private-key-file={pki.serving_key}",
            f"--client-ca-file={pki.ca}",
            "--authorization-mode=Node,RBAC",
            f"--service-account-issuer={SERVICE_ACCOUNT_ISSUER}",
            f"--service-account-key-file={pki.service_account_public}",
            f"--service-account-signing-key-file={pki.service_account_key}",
            f"--service-cluster-ip-range={SERVICE_CLUSTER_IP_RANGE}",
            "--endpoint-reconciler-type=none",  # no kubernetes Endpoints pointing at loopback
            "--allow-privileged=true",
            f"--cert-dir={self.directory / 'apiserver-certs'}",
            "--profiling=false",
            f"--audit-policy-file={self.directory / 'audit-policy.yaml'}",
            f"--audit-log-path={self.audit_log}",
            "--audit-log-mode=blocking",
            "--v=1",
        ]

    @property
    def audit_log(self) -> Path:
        return self.directory / "logs" / "audit.log"

    def audit(self, after: int = 0) -> list[dict[str, Any]]:
        """The audit events after the first `after` (AUDIT_POLICY says which requests are recorded);
        `len(audit())` taken when a test starts is its `after`: the log is the whole session's."""
        try:
            lines = self.audit_log.read_text().splitlines()
        except OSError:
            return []
        return [json.loads(line) for line in lines[after:] if line.strip()]

    def _component_common(self, name: str, who: Identity) -> list[str]:
        kubeconfig_file = self.directory / f"{who.file_stem}.kubeconfig"
        return [
            f"--kubeconfig={kubeconfig_file}",
            f"--authentication-kubeconfig={kubeconfig_file}",
            f"--authorization-kubeconfig={kubeconfig_file}",
            "--leader-elect=false",
            "--bind-address=127.0.0.1",
            f"--secure-port={self.ports[name]}",
            f"--cert-dir={self.directory / (name + '-certs')}",
            "--profiling=false",
            "--v=1",
        ]

    def _controller_manager_flags(self) -> list[str]:
        return [
            *self._component_common("kube-controller-manager", CONTROLLER_MANAGER),
            f"--controllers={CONTROLLERS}",
            f"--service-account-private-key-file={self.pki.service_account_key}",
            f"--root-ca-file={self.pki.ca}",
            # each controller as its own ServiceAccount, bound by the bootstrap RBAC (as kubeadm runs
            # it): the controller manager's own user may not, for one, create ReplicaSets
            "--use-service-account-credentials=true",
        ]

    def _scheduler_flags(self) -> list[str]:
        return self._component_common("kube-scheduler", SCHEDULER)

    def _spawn(self, name: str, flags: Sequence[str], die_with_parent: bool) -> None:
        with open(self.log(name), "ab") as log:
            process = subprocess.Popen(
                [str(self.binaries.path(name)), *flags],
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                cwd=self.directory,
                start_new_session=True,  # Ctrl-C in the test's terminal does not reach it first
                preexec_fn=_die_with_parent if die_with_parent else None,
            )
        self._processes[name] = process
        self.pids[name] = process.pid

    def _wait(self, name: str, ready: Callable[[], bool], deadline: float) -> None:
        while True:
            process = self._processes.get(name)
            if process is not None and process.poll() is not None:
                raise RuntimeError(f"{name} exited with {process.returncode}:\n{self.tail(name)}")
            if ready():
                return
            if time.monotonic() > deadline:
                raise TimeoutError(f"{name} not ready in time:\n{self.tail(name)}")
            time.sleep(0.1)

    def tail(self, name: str, lines: int = 40) -> str:
        try:
            return "\n".join(self.log(name).read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no log)"

    def _etcd_healthy(self) -> bool:
        try:
            with urllib.request.urlopen(f"{self.etcd_url}/health", timeout=2) as reply:
                return bool(json.loads(reply.read()).get("health") == "true")
        except (OSError, ValueError):
            return False

    def ssl_context(self, *, verify: bool = True) -> ssl.SSLContext:
        if not verify:
            return ssl._create_unverified_context()  # a component's self-signed healthz
        context = ssl.create_default_context(cafile=str(self.pki.ca))
        context.load_cert_chain(str(self.pki.client_cert(ADMIN)), str(self.pki.client_key(ADMIN)))
        return context

    def _https_ok(self, name: str, path: str, *, verify: bool = True) -> bool:
        try:
            with urllib.request.urlopen(
                f"https://127.0.0.1:{self.ports[name]}{path}",
                timeout=5,
                context=self.ssl_context(verify=verify),
            ) as reply:
                return bool(reply.status == 200)
        except (OSError, ValueError):
            return False

    # ------------------------------------------------------------------------------ using it
    def request(self, method: str, path: str, body: Mapping[str, Any] | None = None) -> tuple[int, Any]:
        """One call as the admin: (status, decoded JSON body or None)."""
        data = json.dumps(body).encode() if body is not None else None
        request = urllib.request.Request(
            f"{self.url}{path}", data=data, method=method, headers={"Content-Type": "application/json"}
        )
        try:
            with urllib.request.urlopen(request, timeout=30, context=self.ssl_context()) as reply:
                raw = reply.read()
                return reply.status, json.loads(raw) if raw else None
        except urllib.error.HTTPError as error:
            raw = error.read()
            try:
                return error.code, json.loads(raw)
            except ValueError:
                return error.code, raw.decode(errors="replace")

    def etcd(self, path: str, body: Mapping[str, Any]) -> dict[str, Any]:
        """etcd's JSON gateway (POST /v3/...)."""
        request = urllib.request.Request(
            f"{self.etcd_url}{path}",
            data=json.dumps(body).encode(),
            method="POST",
            headers={"Content-Type": "application/json"},
        )
        with urllib.request.urlopen(request, timeout=30) as reply:
            return json.loads(reply.read())  # type: ignore[no-any-return]

    def compact(self) -> int:
        """Compact etcd at its current revision, as the API server does every 5 minutes: every
        continue token and watch older than now is gone (410). The revision compacted."""
        key = base64.b64encode(b"/registry/").decode()
        revision = int(self.etcd("/v3/kv/range", {"key": key, "limit": 1})["header"]["revision"])
        self.etcd("/v3/kv/compaction", {"revision": revision, "physical": True})
        return revision

    def token_kubeconfig(self, path: Path, token: str, *, user: str, namespace: str = "default") -> Path:
        path.write_text(
            json.dumps(kubeconfig(self.url, self.pki.ca, user=user, token=token, namespace=namespace))
        )
        return path

    def restart_apiserver(self, timeout: float = 120.0) -> None:
        """Kill kube-apiserver (as a crash or an OOM kill would) and start it again on the same port:
        its watch cache starts over at etcd's current revision, so a client resuming a watch from an
        older one gets 410 Gone."""
        process = self._processes["kube-apiserver"]
        process.kill()
        process.wait(timeout=30)
        deadline = time.monotonic() + timeout
        while True:  # the port is free again once the old process's listener is gone
            try:
                self._spawn("kube-apiserver", self._apiserver_flags(), True)
                self._wait("kube-apiserver", lambda: self._https_ok("kube-apiserver", "/readyz"), deadline)
                return
            except RuntimeError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.5)

    # ------------------------------------------------------------------------------ stopping
    def _save_state(self) -> None:
        (self.directory / STATE_FILE).write_text(
            json.dumps(
                {
                    "version": self.binaries.version,
                    "binaries": str(self.binaries.directory),
                    "ports": self.ports,
                    "pids": self.pids,
                    "url": self.url,
                    "startedSeconds": self.started_seconds,
                },
                indent=2,
            )
        )

    @classmethod
    def from_directory(cls, directory: Path) -> ControlPlane:
        state = json.loads((directory / STATE_FILE).read_text())
        plane = cls(directory, Binaries(Path(state["binaries"]), state["version"]))
        plane.ports = {k: int(v) for k, v in state["ports"].items()}
        plane.pids = {k: int(v) for k, v in state["pids"].items()}
        return plane

    def stop(self, timeout: float = 15.0) -> None:
        """SIGTERM in reverse order of start, SIGKILL for any still running after `timeout`."""
        for name in reversed(ORDER):
            pid = self.pids.get(name)
            if pid is None:
                continue
            process = self._processes.get(name)
            if process is not None:
                if process.poll() is None:
                    process.terminate()
                try:
                    process.wait(timeout=timeout)
                except subprocess.TimeoutExpired:
                    process.kill()
                    process.wait(timeout=timeout)
            else:
                _stop_pid(pid, self.binaries.path(name), timeout)
        self.pids.clear()
        self._processes.clear()
        state = self.directory / STATE_FILE
        if state.exists():
            state.unlink()


def _stop_pid(pid: int, program: Path, timeout: float) -> None:
    """Stop a process `up` started, by its id, only while that id is still our program."""
    try:
        if Path(f"/proc/{pid}/exe").resolve() != program.resolve():
            return
        os.kill(pid, signal.SIGTERM)
    except (OSError, ProcessLookupError):
        return
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not Path(f"/proc/{pid}").exists():
            return
        time.sleep(0.1)
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGKILL)
