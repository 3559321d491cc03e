"""The real tier's cluster (tests/realcluster/): a real control plane (tests/controlplane), reset
between tests, with kubectl and the official client as the admin, and ServiceAccount identities
from the TokenRequest API.

One control plane per test process serves every real-tier test it runs (the real tier is one xdist
group, so one process, one control plane, in the whole suite); `reset` empties it between tests:
every namespace a test made is deleted (its pods forced, since no kubelet would confirm them), every
Node, and what the reconciler left in kube-system."""

from __future__ import annotations

import copy
import json
import subprocess
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kubernetes import client, config

from tests.controlplane.cluster import ControlPlane

SYSTEM_NAMESPACES = frozenset({"default", "kube-system", "kube-public", "kube-node-lease"})
OURS = ("asg-reconciler", "cluster-autoscaler")  # what tests and the stages name their objects
GRACE_SECONDS = 2  # the test workloads' terminationGracePeriodSeconds: their containers stop quickly


def as_new(obj: Mapping[str, Any], *, grace: int | None = GRACE_SECONDS) -> dict[str, Any]:
    """A tests.support.k8s_objects object as a client would create it: no status, uid, version or
    timestamps (the server sets those), and a short termination grace for pods and their templates."""
    fresh = copy.deepcopy(dict(obj))
    kind = fresh.get("kind")
    fresh.pop("status", None)
    meta = fresh.setdefault("metadata", {})
    for key in ("uid", "resourceVersion", "creationTimestamp", "generation", "deletionTimestamp", "selfLink"):
        meta.pop(key, None)
    if kind == "Deployment":
        meta.get("annotations", {}).pop("deployment.kubernetes.io/revision", None)
    spec = fresh.get("spec", {})
    pod_spec = spec.get("template", {}).get("spec") if "template" in spec else spec if kind == "Pod" else None
    if pod_spec is not None and grace is not None:
        pod_spec["terminationGracePeriodSeconds"] = grace
    return fresh


@dataclass
class RealCluster:
    plane: ControlPlane
    api: client.ApiClient

    @property
    def core(self) -> client.CoreV1Api:
        return client.CoreV1Api(self.api)

    @property
    def kubeconfig(self) -> Path:
        return self.plane.admin_kubeconfig

    def kubectl(
        self, *args: str, stdin: str | None = None, kubeconfig: Path | None = None, check: bool = True
    ) -> str:
        done = subprocess.run(
            [str(self.plane.kubectl), f"--kubeconfig={kubeconfig or self.kubeconfig}", *args],
            input=stdin,
            capture_output=True,
            text=True,
            check=False,
            timeout=120,
        )
        if check and done.returncode != 0:
            raise AssertionError(f"kubectl {' '.join(args)} failed ({done.returncode}): {done.stderr}")
        return done.stdout if check else done.stdout + done.stderr

    def apply(self, *objects: Mapping[str, Any]) -> None:
        """Create or update `objects` (server-side apply, as `kubectl apply --server-side` does);
        namespaces they name are made first, and waited for until pods may be created in them."""
        namespaces = sorted({o["metadata"]["namespace"] for o in objects if o["metadata"].get("namespace")})
        for name in namespaces:
            self.namespace(name)
        self.kubectl(
            "apply",
            "--server-side",
            "--force-conflicts",
            "-f",
            "-",
            stdin=json.dumps({"apiVersion": "v1", "kind": "List", "items": list(objects)}),
        )

    def namespace(self, name: str) -> None:
        if name in SYSTEM_NAMESPACES:
            return
        self.kubectl("create", "namespace", name, check=False)
        # pods need the namespace's `default` ServiceAccount (the ServiceAccount admission plugin)
        self.wait(lambda: self._has_default_account(name), 60, f"ServiceAccount {name}/default")

    def _has_default_account(self, namespace: str) -> bool:
        code, _ = self.plane.request("GET", f"/api/v1/namespaces/{namespace}/serviceaccounts/default")
        return code == 200

    def pods(self, namespace: str | None = None, selector: str = "") -> list[Any]:
        if namespace is None:
            return list(self.core.list_pod_for_all_namespaces(label_selector=selector).items)
        return list(self.core.list_namespaced_pod(namespace, label_selector=selector).items)

    def nodes(self) -> list[Any]:
        return list(self.core.list_node().items)

    @staticmethod
    def wait(what: Any, timeout: float, message: str) -> Any:
        deadline = time.monotonic() + timeout
        while True:
            value = what()
            if value:
                return value
            if time.monotonic() > deadline:
                raise AssertionError(f"timed out after {timeout}s waiting for {message}")
            time.sleep(0.2)

    # ------------------------------------------------------------------------------ identities
    def service_account_token(self, namespace: str, name: str, seconds: int = 3600) -> str:
        """A bound token for ServiceAccount namespace/name, from the TokenRequest API (what a pod's
        projected volume holds)."""
        request = client.AuthenticationV1TokenRequest(
            spec=client.V1TokenRequestSpec(audiences=[], expiration_seconds=seconds)
        )
        answer = self.core.create_namespaced_service_account_token(name, namespace, request)
        return str(answer.status.token)

    def kubeconfig_as(self, path: Path, namespace: str, name: str) -> Path:
        token = self.service_account_token(namespace, name)
        return self.plane.token_kubeconfig(
            path, token, user=f"system:serviceaccount:{namespace}:{name}", namespace=namespace
        )

    # ------------------------------------------------------------------------------ between tests
    def reset(self, timeout: float = 120.0) -> None:
        namespaces = [n.metadata.name for n in self.core.list_namespace().items]
        for name in namespaces:
            if name not in SYSTEM_NAMESPACES:
                self._force_delete_pods(name)
                self.core.delete_namespace(name)
        for name in SYSTEM_NAMESPACES:
            # only what tests and the stages made: the control plane's own objects here (the
            # controllers' ServiceAccounts, bootstrap Roles, extension-apiserver-authentication) stay
            self._force_delete_pods(name)
            for kind in (
                "deployments.apps",
                "replicasets.apps",
                "statefulsets.apps",
                "poddisruptionbudgets.policy",
            ):
                self.kubectl(
                    "delete", kind, "--all", "-n", name, "--wait=false", "--ignore-not-found", check=False
                )
            self.kubectl(
                "delete",
                "serviceaccounts,roles.rbac.authorization.k8s.io,rolebindings.rbac.authorization.k8s.io",
                "-n",
                name,
                "-l",
                "app.kubernetes.io/name=asg-reconciler",
                "--ignore-not-found",
                check=False,
            )
            for cm in self.core.list_namespaced_config_map(name).items:
                if cm.metadata.name.startswith(OURS):
                    self.core.delete_namespaced_config_map(cm.metadata.name, name)
            leases = client.CoordinationV1Api(self.api)
            for lease in leases.list_namespaced_lease(name).items:
                if lease.metadata.name.startswith(OURS):
                    leases.delete_namespaced_lease(lease.metadata.name, name)
        self.kubectl(
            "delete",
            "clusterrolebindings,clusterroles",
            "-l",
            "app.kubernetes.io/name=asg-reconciler",
            "--ignore-not-found",
            check=False,
        )
        for node in self.nodes():
            self.core.delete_node(node.metadata.name)
        self.wait(lambda: self._clean(), timeout, "the control plane to be empty between tests")

    def _force_delete_pods(self, namespace: str) -> None:
        for pod in self.core.list_namespaced_pod(namespace).items:
            self.core.delete_namespaced_pod(
                pod.metadata.name, namespace, body=client.V1DeleteOptions(grace_period_seconds=0)
            )

    def _clean(self) -> bool:
        namespaces = {n.metadata.name for n in self.core.list_namespace().items}
        if namespaces - SYSTEM_NAMESPACES:
            for name in namespaces - SYSTEM_NAMESPACES:
                self._force_delete_pods(name)  # a ReplicaSet may have made one as its namespace went
            return False
        return not self.core.list_pod_for_all_namespaces().items and not self.nodes()


def new_api_client(kubeconfig: Path) -> client.ApiClient:
    return config.new_client_from_config(config_file=str(kubeconfig))


def owned_by(pods: Iterable[Any], prefix: str) -> list[Any]:
    return [p for p in pods if p.metadata.name.startswith(prefix)]


def names(items: Sequence[Any]) -> list[str]:
    return sorted(i.metadata.name for i in items)
