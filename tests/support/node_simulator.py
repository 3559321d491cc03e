"""The kubelets of a real-control-plane test: for every InService instance moto holds in an Auto Scaling
group, a Ready Node as the EKS bootstrap would register it; pods the real scheduler binds there run;
pods being deleted go once their grace period is over; the Node goes when its instance does.

Nodes are registered the way a self-managed EKS node group's kubelet does it: name = the instance's
private DNS name, providerID `aws:///<zone>/<instance-id>`, the well-known labels, plus the labels and
taints the group's cluster-autoscaler node-template tags say its kubelets are started with
(`--node-labels`, `--register-with-taints` in the user data). Capacity and allocatable come from
DescribeInstanceTypes by the EKS AMI's formula (VPC CNI max pods, kube-reserved, 100Mi eviction),
written here independently of reconciler/aws/allocatable.py so the planner's arithmetic is checked,
not copied. The VM's own memory overhead is the one measured on a real t3.small
(/work/shared/fixtures/eks-t3small: 1959264Ki of 2048Mi).

Everything it does goes through the API server as the admin; it polls (every `interval`), which is
enough for a few dozen nodes and keeps it simple to stop."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import urllib3
from kubernetes import client
from kubernetes.client.exceptions import ApiException

SIMULATED = "asg-reconciler.test/simulated-node"
NOT_READY = "node.kubernetes.io/not-ready"
TEMPLATE_LABEL = "k8s.io/cluster-autoscaler/node-template/label/"
TEMPLATE_TAINT = "k8s.io/cluster-autoscaler/node-template/taint/"
VM_MEMORY_SHARE = 1959264 / (2048 * 1024)  # a real t3.small's capacity over its instance memory
EPHEMERAL_CAPACITY_KI = 20 * 1024 * 1024 - 1024  # a 20 GiB root volume, as the EKS AMI's


@dataclass(frozen=True)
class Shape:
    """What the kubelet reports for one instance type."""

    capacity: dict[str, str]
    allocatable: dict[str, str]


def eks_shape(vcpus: int, memory_mib: int, enis: int, ips_per_eni: int) -> Shape:
    max_pods = enis * (ips_per_eni - 1) + 2
    cores = [60.0, 10.0, 5.0, 5.0] + [2.5] * max(vcpus - 4, 0)
    reserved_cpu_m = int(sum(cores[:vcpus]))
    capacity_ki = int(memory_mib * 1024 * VM_MEMORY_SHARE)
    reserved_ki = (255 + 11 * max_pods) * 1024 + 100 * 1024
    return Shape(
        capacity={
            "cpu": str(vcpus),
            "memory": f"{capacity_ki}Ki",
            "pods": str(max_pods),
            "ephemeral-storage": f"{EPHEMERAL_CAPACITY_KI}Ki",
        },
        allocatable={
            "cpu": f"{vcpus * 1000 - reserved_cpu_m}m",
            "memory": f"{capacity_ki - reserved_ki}Ki",
            "pods": str(max_pods),
            "ephemeral-storage": f"{EPHEMERAL_CAPACITY_KI * 9 // 10}Ki",
        },
    )


@dataclass(frozen=True)
class Instance:
    instance_id: str
    zone: str
    instance_type: str
    group: str
    node_name: str


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass
class NodeSimulator:
    """`start()` runs `step()` on a thread every `interval` seconds until `stop()`."""

    api: client.ApiClient
    autoscaling: Any
    ec2: Any
    region: str = "us-east-1"
    interval: float = 0.25
    errors: list[str] = field(default_factory=list)
    unreachable: int = 0
    observers: list[Callable[[list[dict[str, Any]]], None]] = field(default_factory=list)
    _shapes: dict[str, Shape] = field(default_factory=dict)
    _names: dict[str, str] = field(default_factory=dict)
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None
    _ip: int = 0

    @property
    def core(self) -> client.CoreV1Api:
        return client.CoreV1Api(self.api)

    def start(self) -> NodeSimulator:
        self._stop.clear()
        self._thread = threading.Thread(target=self._loop, name="node-simulator", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=30)
            self._thread = None

    def _loop(self) -> None:
        while not self._stop.is_set():
            try:
                self.step()
            except urllib3.exceptions.HTTPError:
                self.unreachable += 1  # the API server restarting: a kubelet tries again
            except Exception as exc:  # a kubelet keeps going; the test sees `errors`
                self.errors.append(f"{type(exc).__name__}: {exc}")
            self._stop.wait(self.interval)

    # ------------------------------------------------------------------------------ one pass
    def step(self) -> None:
        instances = self._instances()
        nodes = {n.metadata.name: n for n in self.core.list_node(label_selector=SIMULATED).items}
        wanted = {i.node_name: i for i in instances}
        for name, instance in wanted.items():
            if name not in nodes:
                self._register(instance)
            elif any(t.key == NOT_READY for t in nodes[name].spec.taints or []):
                self._untaint_not_ready(name)
        for name in nodes.keys() - wanted.keys():
            self._delete_node(name)
        self._run_pods(set(wanted))

    def _instances(self) -> list[Instance]:
        found: list[Instance] = []
        pages = self.autoscaling.get_paginator("describe_auto_scaling_groups").paginate()
        for page in pages:
            for group in page["AutoScalingGroups"]:
                for instance in group.get("Instances", []):
                    if instance["LifecycleState"] != "InService":
                        continue
                    found.append(
                        Instance(
                            instance["InstanceId"],
                            instance["AvailabilityZone"],
                            instance.get("InstanceType") or self._instance_type(instance["InstanceId"]),
                            group["AutoScalingGroupName"],
                            self._node_name(instance["InstanceId"]),
                        )
                    )
        return found

    def _instance_type(self, instance_id: str) -> str:
        described = self.ec2.describe_instances(InstanceIds=[instance_id])
        return str(described["Reservations"][0]["Instances"][0]["InstanceType"])

    def _node_name(self, instance_id: str) -> str:
        if instance_id not in self._names:
            described = self.ec2.describe_instances(InstanceIds=[instance_id])
            dns = described["Reservations"][0]["Instances"][0].get("PrivateDnsName") or instance_id
            self._names[instance_id] = dns
        return self._names[instance_id]

    def shape(self, instance_type: str) -> Shape:
        if instance_type not in self._shapes:
            info = self.ec2.describe_instance_types(InstanceTypes=[instance_type])["InstanceTypes"][0]
            self._shapes[instance_type] = eks_shape(
                int(info["VCpuInfo"]["DefaultVCpus"]),
                int(info["MemoryInfo"]["SizeInMiB"]),
                int(info["NetworkInfo"]["MaximumNetworkInterfaces"]),
                int(info["NetworkInfo"]["Ipv4AddressesPerInterface"]),
            )
        return self._shapes[instance_type]

    def _group_tags(self, group: str) -> dict[str, str]:
        described = self.autoscaling.describe_auto_scaling_groups(AutoScalingGroupNames=[group])
        return {t["Key"]: t["Value"] for t in described["AutoScalingGroups"][0].get("Tags", [])}

    def _register(self, instance: Instance) -> None:
        tags = self._group_tags(instance.group)
        labels = {
            "kubernetes.io/arch": "amd64",
            "kubernetes.io/os": "linux",
            "kubernetes.io/hostname": instance.node_name,
            "node.kubernetes.io/instance-type": instance.instance_type,
            "topology.kubernetes.io/region": self.region,
            "topology.kubernetes.io/zone": instance.zone,
            SIMULATED: "true",
        }
        labels.update(
            {k.removeprefix(TEMPLATE_LABEL): v for k, v in tags.items() if k.startswith(TEMPLATE_LABEL)}
        )
        taints = []
        for key, value in tags.items():
            if key.startswith(TEMPLATE_TAINT):
                taint_value, _, effect = value.rpartition(":")
                taint: dict[str, str] = {"key": key.removeprefix(TEMPLATE_TAINT), "effect": effect}
                if taint_value:
                    taint["value"] = taint_value
                taints.append(taint)
        shape = self.shape(instance.instance_type)
        now = _now()
        body = {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {"name": instance.node_name, "labels": labels},
            "spec": {"providerID": f"aws:///{instance.zone}/{instance.instance_id}", "taints": taints},
            "status": {
                "capacity": shape.capacity,
                "allocatable": shape.allocatable,
                "conditions": [
                    {
                        "type": "Ready",
                        "status": "True",
                        "reason": "KubeletReady",
                        "message": "kubelet is posting ready status (simulated)",
                        "lastHeartbeatTime": now,
                        "lastTransitionTime": now,
                    }
                ],
                "addresses": [
                    {"type": "InternalDNS", "address": instance.node_name},
                    {"type": "Hostname", "address": instance.node_name},
                ],
                "nodeInfo": {
                    "architecture": "amd64",
                    "operatingSystem": "linux",
                    "kubeletVersion": "v1.34.4",
                    "kubeProxyVersion": "",
                    "containerRuntimeVersion": "containerd://1.7.0",
                    "kernelVersion": "6.1.0",
                    "osImage": "Amazon Linux 2023 (simulated)",
                    "machineID": instance.instance_id,
                    "systemUUID": instance.instance_id,
                    "bootID": instance.instance_id,
                },
            },
        }
        try:
            self.core.create_node(body)
        except ApiException as exc:
            if exc.status != 409:
                raise
        self._untaint_not_ready(instance.node_name)

    def _untaint_not_ready(self, name: str) -> None:
        """The API server's TaintNodesByCondition admission registers every Node with the
        `node.kubernetes.io/not-ready:NoSchedule` taint; the node lifecycle controller takes it off
        once the kubelet reports Ready. That controller is not run (it would want heartbeats), so the
        simulator does its part."""
        node = self.core.read_node(name)
        taints = node.spec.taints or []
        kept = [t for t in taints if t.key != NOT_READY]
        if len(kept) == len(taints):
            return
        patch = [
            {"op": "test", "path": "/metadata/resourceVersion", "value": node.metadata.resource_version},
            {
                "op": "replace",
                "path": "/spec/taints",
                "value": [self.api.sanitize_for_serialization(t) for t in kept],
            },
        ]
        try:
            self.core.patch_node(name, patch)
        except ApiException as exc:
            if exc.status not in (404, 409, 422):
                raise

    def _delete_node(self, name: str) -> None:
        try:
            self.core.delete_node(name)
        except ApiException as exc:
            if exc.status != 404:
                raise

    def _run_pods(self, node_names: set[str]) -> None:
        pods = self.core.list_pod_for_all_namespaces(field_selector="spec.nodeName!=").items
        for observer in self.observers:
            observer(pods)
        now = datetime.now(UTC)
        for pod in pods:
            if pod.spec.node_name not in node_names:
                continue
            meta = pod.metadata
            if meta.deletion_timestamp is not None:
                if meta.deletion_timestamp <= now:  # the grace period is over: the kubelet removes it
                    self._remove(pod)
                continue
            if pod.status.phase == "Pending":
                self._set_running(pod)

    def _remove(self, pod: Any) -> None:
        try:
            self.core.delete_namespaced_pod(
                pod.metadata.name,
                pod.metadata.namespace,
                body=client.V1DeleteOptions(
                    grace_period_seconds=0, preconditions=client.V1Preconditions(uid=pod.metadata.uid)
                ),
            )
        except ApiException as exc:
            if exc.status not in (404, 409):
                raise

    def _set_running(self, pod: Any) -> None:
        self._ip += 1
        now = _now()
        ready = [
            {"type": kind, "status": "True", "lastTransitionTime": now}
            for kind in (
                "PodReadyToStartContainers",
                "Initialized",
                "Ready",
                "ContainersReady",
                "PodScheduled",
            )
        ]
        statuses = [
            {
                "name": c.name,
                "image": c.image,
                "imageID": "",
                "containerID": f"containerd://{pod.metadata.uid[:8]}{i}",
                "ready": True,
                "started": True,
                "restartCount": 0,
                "state": {"running": {"startedAt": now}},
            }
            for i, c in enumerate(pod.spec.containers)
        ]
        body = {
            "status": {
                "phase": "Running",
                "conditions": ready,
                "containerStatuses": statuses,
                "podIP": f"10.1.{self._ip // 250}.{self._ip % 250 + 1}",
                "hostIP": "10.0.0.10",
                "startTime": now,
            }
        }
        try:
            self.core.patch_namespaced_pod_status(pod.metadata.name, pod.metadata.namespace, body)
        except ApiException as exc:
            if exc.status not in (404, 409, 422):
                raise
            if exc.status == 422:
                self.errors.append(f"pod status refused for {pod.metadata.name}: {exc.body}")

    # ------------------------------------------------------------------------------ waiting
    def wait(self, what: Callable[[], Any], timeout: float, message: str) -> Any:
        """`what()` once truthy; else an AssertionError naming `message` and any simulator errors."""
        deadline = time.monotonic() + timeout
        while True:
            value = what()
            if value:
                return value
            if time.monotonic() > deadline:
                raise AssertionError(
                    f"timed out after {timeout}s waiting for {message}; simulator: {self.errors}"
                )
            time.sleep(0.2)
