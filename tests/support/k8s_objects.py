"""Factories for Kubernetes objects as the API server prints them (JSON dicts).

Each factory returns a complete object: `kind`, `apiVersion`, `metadata` with uid and
creationTimestamp, and every field the official `kubernetes` client requires when it deserialises a
reply (its pydantic models reject e.g. a container status without `imageID`). Keyword arguments cover
what tests vary; anything else can be edited on the returned dict. Defaults are deterministic (uids
derive from kind/namespace/name, times from `DEFAULT_TIME`) so snapshots and golden files are stable.

`realistic_pod()` builds a ~4 KB pod shaped like a real Deployment pod (managedFields, env, probes,
container statuses) for the listing benchmark; `write_jsonl()` writes objects for
`python -m reconciler.demo.kube_api --objects FILE`.
"""

from __future__ import annotations

import copy
import functools
import hashlib
import uuid
from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import orjson

Obj = dict[str, Any]
Requests = Mapping[str, str] | Sequence[Mapping[str, str]] | None
Time = datetime | str | None

DEFAULT_TIME = "2026-01-01T00:00:00Z"
"""Creation and transition time used when a test gives none: fixed so outputs are reproducible."""

DEFAULT_IMAGE = "registry.example.com/app:1.0.0"

# m5.large as an EKS node reports it (VPC CNI max pods 29).
DEFAULT_NODE_CAPACITY: Mapping[str, str] = {
    "cpu": "2",
    "ephemeral-storage": "83873772Ki",
    "hugepages-1Gi": "0",
    "hugepages-2Mi": "0",
    "memory": "7910544Ki",
    "pods": "29",
}
DEFAULT_NODE_ALLOCATABLE: Mapping[str, str] = {
    "cpu": "1930m",
    "ephemeral-storage": "76224326324",
    "hugepages-1Gi": "0",
    "hugepages-2Mi": "0",
    "memory": "7220368Ki",
    "pods": "29",
}


# What admission adds to every pod that does not set them (DefaultTolerationSeconds).
DEFAULT_TOLERATIONS: tuple[Mapping[str, Any], ...] = (
    {
        "key": "node.kubernetes.io/not-ready",
        "operator": "Exists",
        "effect": "NoExecute",
        "tolerationSeconds": 300,
    },
    {
        "key": "node.kubernetes.io/unreachable",
        "operator": "Exists",
        "effect": "NoExecute",
        "tolerationSeconds": 300,
    },
)


def ts(value: Time, default: str = DEFAULT_TIME) -> str:
    """Format a time the way the API does (`2026-01-01T00:00:00Z`); strings pass through."""
    if value is None:
        return default
    if isinstance(value, str):
        return value
    if value.tzinfo is None:
        value = value.replace(tzinfo=UTC)
    return value.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def micro_ts(value: Time, default: str = "2026-01-01T00:00:00.000000Z") -> str:
    """MicroTime (Lease acquire/renew times) as the API prints it."""
    if value is None:
        return default
    if isinstance(value, str):
        return value
    if value.tzinfo is None:
        value = value.replace(tzinfo=UTC)
    return value.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def make_uid(kind: str, namespace: str, name: str) -> str:
    """A stable uid per object identity, so repeated test runs print the same objects."""
    return str(uuid.uuid5(uuid.NAMESPACE_URL, f"k8s://{kind}/{namespace}/{name}"))


def instance_id_for(name: str) -> str:
    """A stable, valid-looking EC2 instance id derived from a node name."""
    return "i-" + hashlib.sha1(name.encode()).hexdigest()[:17]


def _meta(
    kind: str,
    name: str,
    namespace: str | None,
    labels: Mapping[str, str] | None,
    annotations: Mapping[str, str] | None,
    creation_timestamp: Time,
    uid: str | None = None,
) -> Obj:
    meta: Obj = {"name": name}
    if namespace is not None:
        meta["namespace"] = namespace
    meta["uid"] = uid or make_uid(kind, namespace or "", name)
    meta["creationTimestamp"] = ts(creation_timestamp)
    if labels:
        meta["labels"] = dict(labels)
    if annotations:
        meta["annotations"] = dict(annotations)
    return meta


def owner_reference(kind: str, name: str, namespace: str = "", *, controller: bool = True) -> Obj:
    """An ownerReference as controllers write it (apiVersion from the owner's kind)."""
    api_version = {
        "ReplicaSet": "apps/v1",
        "DaemonSet": "apps/v1",
        "StatefulSet": "apps/v1",
        "Deployment": "apps/v1",
        "Job": "batch/v1",
        "CronJob": "batch/v1",
    }.get(kind, "v1")
    return {
        "apiVersion": api_version,
        "kind": kind,
        "name": name,
        "uid": make_uid(kind, namespace, name),
        "controller": controller,
        "blockOwnerDeletion": True,
    }


def label_selector(match_labels: Mapping[str, str] | None = None, expressions: Sequence[Obj] = ()) -> Obj:
    sel: Obj = {}
    if match_labels:
        sel["matchLabels"] = dict(match_labels)
    if expressions:
        sel["matchExpressions"] = [dict(e) for e in expressions]
    return sel


def typed_list(
    kind: str, items: Iterable[Obj], *, api_version: str = "v1", resource_version: str = "1"
) -> Obj:
    """A typed list (`PodList`...) as `kubectl get -o json` of one kind prints it."""
    return {
        "apiVersion": api_version,
        "kind": f"{kind}List",
        "metadata": {"resourceVersion": resource_version},
        "items": list(items),
    }


# --------------------------------------------------------------------------------------------- pods


def _as_list(requests: Requests) -> list[Mapping[str, str]]:
    if requests is None:
        return []
    if isinstance(requests, Mapping):
        return [requests]
    return list(requests)


def container(
    name: str,
    *,
    requests: Mapping[str, str] | None = None,
    limits: Mapping[str, str] | None = None,
    image: str = DEFAULT_IMAGE,
    host_ports: Sequence[int | Mapping[str, Any]] = (),
) -> Obj:
    """One container; host ports given as ints become TCP `hostPort` = `containerPort`."""
    resources: Obj = {}
    if limits:
        resources["limits"] = dict(limits)
    if requests:
        resources["requests"] = dict(requests)
    c: Obj = {"name": name, "image": image}
    if host_ports:
        ports = []
        for p in host_ports:
            if isinstance(p, int):
                ports.append({"containerPort": p, "hostPort": p, "protocol": "TCP"})
            else:
                ports.append(dict(p))
        c["ports"] = ports
    c["resources"] = resources
    c["terminationMessagePath"] = "/dev/termination-log"
    c["terminationMessagePolicy"] = "File"
    c["imagePullPolicy"] = "IfNotPresent"
    return c


def empty_dir_volume(name: str, *, medium: str = "") -> Obj:
    return {"name": name, "emptyDir": {"medium": medium} if medium else {}}


def host_path_volume(name: str, path: str = "/var/lib/data", *, type_: str = "") -> Obj:
    return {"name": name, "hostPath": {"path": path, "type": type_}}


def pvc_volume(name: str, claim: str) -> Obj:
    return {"name": name, "persistentVolumeClaim": {"claimName": claim}}


def configmap_volume(name: str, configmap: str) -> Obj:
    return {"name": name, "configMap": {"name": configmap, "defaultMode": 420}}


def _qos(containers: Sequence[Obj]) -> str:
    any_set = False
    guaranteed = True
    for c in containers:
        res = c.get("resources") or {}
        req, lim = res.get("requests") or {}, res.get("limits") or {}
        if req or lim:
            any_set = True
        if not lim or any(lim.get(k) != v for k, v in req.items()) or not {"cpu", "memory"} <= lim.keys():
            guaranteed = False
    if not any_set:
        return "BestEffort"
    return "Guaranteed" if guaranteed else "Burstable"


def pod(
    name: str = "pod-0",
    namespace: str = "default",
    *,
    labels: Mapping[str, str] | None = None,
    annotations: Mapping[str, str] | None = None,
    requests: Requests = None,
    limits: Requests = None,
    init_requests: Requests = None,
    containers: Sequence[Obj] | None = None,
    init_containers: Sequence[Obj] | None = None,
    node_name: str = "",
    phase: str | None = None,
    scheduled: str | None = None,
    scheduled_reason: str | None = None,
    scheduled_since: Time = None,
    owner_kind: str | None = None,
    owner_name: str | None = None,
    priority: int | None = None,
    priority_class_name: str | None = None,
    node_selector: Mapping[str, str] | None = None,
    affinity: Obj | None = None,
    tolerations: Sequence[Obj] | None = None,
    topology_spread: Sequence[Obj] | None = None,
    host_ports: Sequence[int | Mapping[str, Any]] = (),
    volumes: Sequence[Obj] | None = None,
    creation_timestamp: Time = None,
    deletion_timestamp: Time = None,
    uid: str | None = None,
    restart_policy: str = "Always",
    host_network: bool = False,
    nominated_node_name: str | None = None,
    pod_requests: Mapping[str, str] | None = None,
) -> Obj:
    """A pod. `requests` is one container's requests or a list (one dict per container);
    `pod_requests` are pod-level requests (`spec.resources.requests`, PodLevelResources).

    Defaults follow the scheduler: with `node_name` the pod is Running and PodScheduled=True; without
    it the pod is Pending and PodScheduled=False/Unschedulable (what scale-up looks for). `host_ports`
    go on the first container. `owner_kind`/`owner_name` set a controller ownerReference;
    `nominated_node_name` is status.nominatedNodeName (the scheduler's pick while it preempts there).
    """
    if containers is None:
        reqs, lims = _as_list(requests), _as_list(limits)
        count = max(len(reqs), len(lims), 1)
        containers = [
            container(
                "app" if i == 0 else f"app-{i}",
                requests=reqs[i] if i < len(reqs) else None,
                limits=lims[i] if i < len(lims) else None,
                host_ports=host_ports if i == 0 else (),
            )
            for i in range(count)
        ]
    if init_containers is None:
        init_containers = [container(f"init-{i}", requests=r) for i, r in enumerate(_as_list(init_requests))]
    if phase is None:
        phase = "Running" if node_name else "Pending"
    if scheduled is None:
        scheduled = "True" if node_name else "False"
    if scheduled_reason is None and scheduled == "False":
        scheduled_reason = "Unschedulable"

    meta = _meta("Pod", name, namespace, labels, annotations, creation_timestamp, uid)
    if owner_kind:
        meta["ownerReferences"] = [owner_reference(owner_kind, owner_name or f"{name}-owner", namespace)]
    if deletion_timestamp is not None:
        meta["deletionTimestamp"] = ts(deletion_timestamp)
        meta["deletionGracePeriodSeconds"] = 30

    spec: Obj = {}
    if volumes:
        spec["volumes"] = [dict(v) for v in volumes]
    if init_containers:
        spec["initContainers"] = [dict(c) for c in init_containers]
    spec["containers"] = [dict(c) for c in containers]
    if pod_requests:
        spec["resources"] = {"requests": dict(pod_requests)}
    spec["restartPolicy"] = restart_policy
    spec["terminationGracePeriodSeconds"] = 30
    spec["dnsPolicy"] = "ClusterFirst"
    if node_selector:
        spec["nodeSelector"] = dict(node_selector)
    spec["serviceAccountName"] = "default"
    spec["serviceAccount"] = "default"
    if node_name:
        spec["nodeName"] = node_name
    if host_network:
        spec["hostNetwork"] = True
    spec["securityContext"] = {}
    if affinity:
        spec["affinity"] = affinity
    spec["schedulerName"] = "default-scheduler"
    spec["tolerations"] = (
        [dict(t) for t in tolerations] if tolerations is not None else [dict(t) for t in DEFAULT_TOLERATIONS]
    )
    if priority_class_name:
        spec["priorityClassName"] = priority_class_name
    spec["priority"] = priority if priority is not None else 0
    spec["enableServiceLinks"] = True
    spec["preemptionPolicy"] = "PreemptLowerPriority"
    if topology_spread:
        spec["topologySpreadConstraints"] = [dict(t) for t in topology_spread]

    sched_cond: Obj = {
        "type": "PodScheduled",
        "status": scheduled,
        "lastProbeTime": None,
        "lastTransitionTime": ts(scheduled_since, ts(creation_timestamp)),
    }
    if scheduled_reason:
        sched_cond["reason"] = scheduled_reason
        if scheduled_reason == "Unschedulable":
            sched_cond["message"] = "0/3 nodes are available: 3 Insufficient cpu."
    status: Obj = {"phase": phase}
    if nominated_node_name:
        status["nominatedNodeName"] = nominated_node_name
    started = ts(creation_timestamp)
    if node_name and phase in ("Running", "Succeeded", "Failed"):
        ready = "True" if phase == "Running" else "False"
        status["conditions"] = [
            {"type": "Initialized", "status": "True", "lastProbeTime": None, "lastTransitionTime": started},
            {"type": "Ready", "status": ready, "lastProbeTime": None, "lastTransitionTime": started},
            {
                "type": "ContainersReady",
                "status": ready,
                "lastProbeTime": None,
                "lastTransitionTime": started,
            },
            sched_cond,
        ]
        ip = _pod_ip(namespace, name)
        status["hostIP"] = "10.0.0.1"
        status["podIP"] = ip
        status["podIPs"] = [{"ip": ip}]
        status["startTime"] = started
        status["containerStatuses"] = [
            _container_status(c, phase, started, namespace, name) for c in spec["containers"]
        ]
    else:
        status["conditions"] = [sched_cond]
    status["qosClass"] = _qos(spec["containers"])
    return {"kind": "Pod", "apiVersion": "v1", "metadata": meta, "spec": spec, "status": status}


def _pod_ip(namespace: str, name: str) -> str:
    h = hashlib.sha1(f"{namespace}/{name}".encode()).digest()
    return f"10.{h[0] % 64}.{h[1]}.{h[2] % 254 + 1}"


def _container_status(c: Obj, phase: str, started: str, namespace: str, pod_name: str) -> Obj:
    image = c.get("image", DEFAULT_IMAGE)
    digest = hashlib.sha256(image.encode()).hexdigest()
    if phase == "Running":
        state: Obj = {"running": {"startedAt": started}}
    else:
        code = 0 if phase == "Succeeded" else 1
        reason = "Completed" if code == 0 else "Error"
        state = {
            "terminated": {"exitCode": code, "reason": reason, "startedAt": started, "finishedAt": started}
        }
    cid = hashlib.sha256(f"{namespace}/{pod_name}/{c['name']}".encode()).hexdigest()
    return {
        "name": c["name"],
        "state": state,
        "lastState": {},
        "ready": phase == "Running",
        "restartCount": 0,
        "image": image,
        "imageID": f"{image.split(':')[0]}@sha256:{digest}",
        "containerID": f"containerd://{cid}",
        "started": phase == "Running",
    }


def realistic_pod(
    name: str,
    namespace: str = "default",
    *,
    node_name: str = "",
    app: str = "web",
    requests: Mapping[str, str] | None = None,
    labels: Mapping[str, str] | None = None,
    phase: str | None = None,
    owner_name: str | None = None,
    creation_timestamp: Time = None,
) -> Obj:
    """A Deployment pod as a real cluster prints it (~4 KB of JSON), for the listing benchmark.

    Carries what real pods carry and readers must skip cheaply: managedFields, env vars, probes, a
    projected service-account volume, container statuses. Pods of one (app, namespace, owner,
    requests) share a cached template, so building 150,000 of them takes seconds; each call returns
    its own copy.
    """
    if phase is None:
        phase = "Running" if node_name else "Pending"
    key = (
        app,
        namespace,
        owner_name or f"{app}-7d9f8c6b5d",
        tuple(sorted((requests if requests is not None else {"cpu": "250m", "memory": "512Mi"}).items())),
        tuple(sorted((labels or {}).items())),
        ts(creation_timestamp),
        phase,
        bool(node_name),
    )
    obj: Obj = orjson.loads(_realistic_template(*key))
    meta = obj["metadata"]
    meta["name"] = name
    meta["uid"] = make_uid("Pod", namespace, name)
    if node_name:
        obj["spec"]["nodeName"] = node_name
        ip = _pod_ip(namespace, name)
        status = obj["status"]
        status["podIP"] = ip
        status["podIPs"] = [{"ip": ip}]
        cid = hashlib.sha256(f"{namespace}/{name}/{app}".encode()).hexdigest()
        status["containerStatuses"][0]["containerID"] = f"containerd://{cid}"
    return obj


@functools.lru_cache(maxsize=4096)
def _realistic_template(
    app: str,
    namespace: str,
    rs: str,
    request_items: tuple[tuple[str, str], ...],
    label_items: tuple[tuple[str, str], ...],
    created: str,
    phase: str,
    scheduled: bool,
) -> bytes:
    requests = dict(request_items)
    template_hash = rs.rsplit("-", 1)[-1]
    pod_labels = {
        "app": app,
        "app.kubernetes.io/name": app,
        "pod-template-hash": template_hash,
        "team": "payments",
    }
    pod_labels.update(label_items)
    image = f"123456789012.dkr.ecr.us-east-1.amazonaws.com/{app}:1.42.0"
    env = [{"name": f"APP_SETTING_{i}", "value": f"value-{i}"} for i in range(4)]
    env += [
        {"name": "POD_NAME", "valueFrom": {"fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.name"}}},
        {"name": "DB_PASSWORD", "valueFrom": {"secretKeyRef": {"name": f"{app}-db", "key": "password"}}},
    ]
    probe = {"periodSeconds": 10, "timeoutSeconds": 1, "successThreshold": 1, "failureThreshold": 3}
    mounts = [
        {"name": "config", "readOnly": True, "mountPath": "/etc/app"},
        {
            "name": "kube-api-access",
            "readOnly": True,
            "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount",
        },
    ]
    main = {
        "name": app,
        "image": image,
        "ports": [{"name": "http", "containerPort": 8080, "protocol": "TCP"}],
        "env": env,
        "resources": {"limits": {"memory": requests.get("memory", "512Mi")}, "requests": requests},
        "volumeMounts": mounts,
        "livenessProbe": {"httpGet": {"path": "/healthz", "port": 8080, "scheme": "HTTP"}, **probe},
        "readinessProbe": {"httpGet": {"path": "/ready", "port": 8080, "scheme": "HTTP"}, **probe},
        "terminationMessagePath": "/dev/termination-log",
        "terminationMessagePolicy": "File",
        "imagePullPolicy": "IfNotPresent",
        "securityContext": {"runAsNonRoot": True, "readOnlyRootFilesystem": True},
    }
    managed = [
        {
            "manager": "kube-controller-manager",
            "operation": "Update",
            "apiVersion": "v1",
            "time": created,
            "fieldsType": "FieldsV1",
            "fieldsV1": {
                "f:metadata": {
                    "f:generateName": {},
                    "f:labels": {".": {}, **{f"f:{k}": {} for k in pod_labels}},
                    "f:ownerReferences": {
                        ".": {},
                        f'k:{{"uid":"{make_uid("ReplicaSet", namespace, rs)}"}}': {},
                    },
                },
                "f:spec": {"f:containers": {f'k:{{"name":"{app}"}}': {".": {}, "f:env": {}, "f:image": {}}}},
            },
        },
        {
            "manager": "kubelet",
            "operation": "Update",
            "apiVersion": "v1",
            "time": created,
            "fieldsType": "FieldsV1",
            "fieldsV1": {
                "f:status": {"f:conditions": {}, "f:containerStatuses": {}, "f:phase": {}, "f:podIP": {}}
            },
            "subresource": "status",
        },
    ]
    meta: Obj = {
        "name": "",
        "generateName": f"{rs}-",
        "namespace": namespace,
        "uid": "",
        "creationTimestamp": created,
        "labels": pod_labels,
        "annotations": {"kubectl.kubernetes.io/restartedAt": created, "prometheus.io/scrape": "true"},
        "ownerReferences": [owner_reference("ReplicaSet", rs, namespace)],
        "managedFields": managed,
    }
    spec: Obj = {
        "volumes": [
            configmap_volume("config", f"{app}-config"),
            {
                "name": "kube-api-access",
                "projected": {
                    "sources": [
                        {"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}},
                        {
                            "configMap": {
                                "name": "kube-root-ca.crt",
                                "items": [{"key": "ca.crt", "path": "ca.crt"}],
                            }
                        },
                    ],
                    "defaultMode": 420,
                },
            },
        ],
        "containers": [main],
        "restartPolicy": "Always",
        "terminationGracePeriodSeconds": 30,
        "dnsPolicy": "ClusterFirst",
        "serviceAccountName": app,
        "securityContext": {"fsGroup": 2000},
        "schedulerName": "default-scheduler",
        "tolerations": [dict(t) for t in DEFAULT_TOLERATIONS],
        "priority": 0,
        "enableServiceLinks": True,
        "preemptionPolicy": "PreemptLowerPriority",
    }
    if scheduled:
        conds = [
            {"type": t, "status": "True", "lastProbeTime": None, "lastTransitionTime": created}
            for t in ("Initialized", "Ready", "ContainersReady", "PodScheduled")
        ]
        status: Obj = {
            "phase": phase,
            "conditions": conds,
            "hostIP": "10.0.1.10",
            "podIP": "",
            "podIPs": [],
            "startTime": created,
            "containerStatuses": [_container_status(main, phase, created, namespace, "")],
            "qosClass": "Burstable",
        }
        if phase == "Running":  # a 1.33+ kubelet reports what it allocated and actuated (in-place resize)
            status["containerStatuses"][0]["allocatedResources"] = dict(requests)
            status["containerStatuses"][0]["resources"] = copy.deepcopy(main["resources"])
    else:
        status = {
            "phase": phase,
            "conditions": [
                {
                    "type": "PodScheduled",
                    "status": "False",
                    "lastProbeTime": None,
                    "lastTransitionTime": created,
                    "reason": "Unschedulable",
                    "message": "0/5000 nodes are available: 5000 Insufficient cpu.",
                }
            ],
            "qosClass": "Burstable",
        }
    return orjson.dumps({"kind": "Pod", "apiVersion": "v1", "metadata": meta, "spec": spec, "status": status})


# -------------------------------------------------------------------------------------------- nodes


def _taint(t: Mapping[str, Any] | str) -> Obj:
    """`{"key":..,"effect":..}` or `key=value:Effect` / `key:Effect`."""
    if not isinstance(t, str):
        return dict(t)
    body, _, effect = t.rpartition(":")
    key, _, value = body.partition("=")
    out: Obj = {"key": key}
    if value:
        out["value"] = value
    out["effect"] = effect
    return out


def node(
    name: str = "node-0",
    *,
    labels: Mapping[str, str] | None = None,
    annotations: Mapping[str, str] | None = None,
    instance_type: str = "m5.large",
    zone: str = "us-east-1a",
    instance_id: str | None = None,
    provider_id: str | None = None,
    allocatable: Mapping[str, str] | None = None,
    capacity: Mapping[str, str] | None = None,
    taints: Sequence[Mapping[str, Any] | str] | None = None,
    unschedulable: bool = False,
    ready: bool | str = True,
    ready_since: Time = None,
    creation_timestamp: Time = None,
    node_group: str | None = None,
    standard_labels: bool = True,
) -> Obj:
    """A node as EKS prints it. `labels` add to (and override) the standard ones unless
    `standard_labels=False`; `provider_id=""` omits spec.providerID; `ready` may be "Unknown";
    taints accept `key=value:Effect` strings. `capacity` defaults to `allocatable` when only that is
    given, else to an m5.large's."""
    iid = instance_id or instance_id_for(name)
    all_labels: dict[str, str] = {}
    if standard_labels:
        region = zone[:-1] if zone and zone[-1].isalpha() else zone
        all_labels = {
            "beta.kubernetes.io/arch": "amd64",
            "beta.kubernetes.io/instance-type": instance_type,
            "beta.kubernetes.io/os": "linux",
            "failure-domain.beta.kubernetes.io/region": region,
            "failure-domain.beta.kubernetes.io/zone": zone,
            "kubernetes.io/arch": "amd64",
            "kubernetes.io/hostname": name,
            "kubernetes.io/os": "linux",
            "node.kubernetes.io/instance-type": instance_type,
            "topology.kubernetes.io/region": region,
            "topology.kubernetes.io/zone": zone,
        }
        if node_group:
            all_labels["eks.amazonaws.com/nodegroup"] = node_group
    if labels:
        all_labels.update(labels)
    node_annotations = {
        "node.alpha.kubernetes.io/ttl": "0",
        "volumes.kubernetes.io/controller-managed-attach-detach": "true",
    }
    if annotations:
        node_annotations.update(annotations)
    meta = _meta("Node", name, None, all_labels, node_annotations, creation_timestamp)
    spec: Obj = {}
    pid = provider_id if provider_id is not None else f"aws:///{zone}/{iid}"
    if pid:
        spec["providerID"] = pid
    if unschedulable:
        spec["unschedulable"] = True
    if taints:
        spec["taints"] = [_taint(t) for t in taints]
    if allocatable is None:
        alloc = dict(DEFAULT_NODE_ALLOCATABLE)
        cap = dict(capacity) if capacity is not None else dict(DEFAULT_NODE_CAPACITY)
    else:
        alloc = dict(allocatable)
        cap = dict(capacity) if capacity is not None else dict(allocatable)
    ready_status = ready if isinstance(ready, str) else ("True" if ready else "False")
    since = ts(ready_since, ts(creation_timestamp))
    created = ts(creation_timestamp)
    heartbeat = since if since > created else created

    def cond(type_: str, reason: str, message: str) -> Obj:
        return {
            "type": type_,
            "status": "False",
            "lastHeartbeatTime": heartbeat,
            "lastTransitionTime": created,
            "reason": reason,
            "message": message,
        }

    ready_cond = {
        "type": "Ready",
        "status": ready_status,
        "lastHeartbeatTime": heartbeat,
        "lastTransitionTime": since,
        "reason": {"True": "KubeletReady", "False": "KubeletNotReady"}.get(ready_status, "NodeStatusUnknown"),
        "message": {"True": "kubelet is posting ready status", "False": "container runtime is down"}.get(
            ready_status, "Kubelet stopped posting node status."
        ),
    }
    ip = "10.0." + ".".join(str(b) for b in hashlib.sha1(name.encode()).digest()[:2])
    status: Obj = {
        "capacity": cap,
        "allocatable": alloc,
        "conditions": [
            cond("MemoryPressure", "KubeletHasSufficientMemory", "kubelet has sufficient memory available"),
            cond("DiskPressure", "KubeletHasNoDiskPressure", "kubelet has no disk pressure"),
            cond("PIDPressure", "KubeletHasSufficientPID", "kubelet has sufficient PID available"),
            ready_cond,
        ],
        "addresses": [
            {"type": "InternalIP", "address": ip},
            {"type": "InternalDNS", "address": name},
            {"type": "Hostname", "address": name},
        ],
        "daemonEndpoints": {"kubeletEndpoint": {"Port": 10250}},
        "nodeInfo": {
            "machineID": hashlib.md5(name.encode()).hexdigest(),
            "systemUUID": make_uid("system", "", name),
            "bootID": make_uid("boot", "", name),
            "kernelVersion": "6.1.158-180.294.amzn2023.x86_64",
            "osImage": "Amazon Linux 2023.9.20251208",
            "containerRuntimeVersion": "containerd://2.1.5",
            "kubeletVersion": "v1.31.13-eks-ecaa3a6",
            "kubeProxyVersion": "v1.31.13-eks-ecaa3a6",
            "operatingSystem": "linux",
            "architecture": "amd64",
        },
    }
    return {"kind": "Node", "apiVersion": "v1", "metadata": meta, "spec": spec, "status": status}


# ----------------------------------------------------------------------------- policy, workloads


def pdb(
    name: str = "pdb",
    namespace: str = "default",
    *,
    match_labels: Mapping[str, str] | None = None,
    selector: Obj | None = None,
    min_available: int | str | None = None,
    max_unavailable: int | str | None = None,
    disruptions_allowed: int = 1,
    current_healthy: int | None = None,
    desired_healthy: int | None = None,
    expected_pods: int | None = None,
    labels: Mapping[str, str] | None = None,
    creation_timestamp: Time = None,
) -> Obj:
    """A policy/v1 PodDisruptionBudget. `selector` (a full LabelSelector, `{}` matches every pod in
    the namespace) wins over `match_labels`; with neither the selector is `app: <name>`. When no
    budget is given, `minAvailable: 1`."""
    if selector is None:
        selector = label_selector(match_labels if match_labels is not None else {"app": name})
    spec: Obj = {}
    if min_available is None and max_unavailable is None:
        min_available = 1
    if min_available is not None:
        spec["minAvailable"] = min_available
    if max_unavailable is not None:
        spec["maxUnavailable"] = max_unavailable
    spec["selector"] = selector
    desired = (
        desired_healthy
        if desired_healthy is not None
        else (min_available if isinstance(min_available, int) else 1)
    )
    current = current_healthy if current_healthy is not None else desired + disruptions_allowed
    meta = _meta("PodDisruptionBudget", name, namespace, labels, None, creation_timestamp)
    meta["generation"] = 1
    return {
        "kind": "PodDisruptionBudget",
        "apiVersion": "policy/v1",
        "metadata": meta,
        "spec": spec,
        "status": {
            "observedGeneration": 1,
            "disruptionsAllowed": disruptions_allowed,
            "currentHealthy": current,
            "desiredHealthy": desired,
            "expectedPods": expected_pods if expected_pods is not None else current,
            "conditions": [
                {
                    "type": "DisruptionAllowed",
                    "status": "True" if disruptions_allowed > 0 else "False",
                    "observedGeneration": 1,
                    "lastTransitionTime": ts(creation_timestamp),
                    "reason": "SufficientPods" if disruptions_allowed > 0 else "InsufficientPods",
                    "message": "",
                }
            ],
        },
    }


def _pod_template(
    labels: Mapping[str, str],
    requests: Requests,
    node_selector: Mapping[str, str] | None,
    tolerations: Sequence[Obj] | None,
    affinity: Obj | None,
    priority_class_name: str | None,
    host_ports: Sequence[int | Mapping[str, Any]] = (),
    pod_requests: Mapping[str, str] | None = None,
) -> Obj:
    reqs = _as_list(requests) or [{}]
    spec: Obj = {
        "containers": [
            container(
                "app" if i == 0 else f"app-{i}", requests=r or None, host_ports=host_ports if i == 0 else ()
            )
            for i, r in enumerate(reqs)
        ],
        "restartPolicy": "Always",
        "terminationGracePeriodSeconds": 30,
        "dnsPolicy": "ClusterFirst",
        "securityContext": {},
        "schedulerName": "default-scheduler",
    }
    if pod_requests:
        spec["resources"] = {"requests": dict(pod_requests)}
    if node_selector:
        spec["nodeSelector"] = dict(node_selector)
    if tolerations:
        spec["tolerations"] = [dict(t) for t in tolerations]
    if affinity:
        spec["affinity"] = affinity
    if priority_class_name:
        spec["priorityClassName"] = priority_class_name
    return {"metadata": {"labels": dict(labels)}, "spec": spec}


def daemonset(
    name: str = "ds",
    namespace: str = "kube-system",
    *,
    labels: Mapping[str, str] | None = None,
    requests: Requests = None,
    node_selector: Mapping[str, str] | None = None,
    tolerations: Sequence[Obj] | None = None,
    affinity: Obj | None = None,
    priority_class_name: str | None = None,
    host_ports: Sequence[int | Mapping[str, Any]] = (),
    desired: int = 0,
    creation_timestamp: Time = None,
    pod_requests: Mapping[str, str] | None = None,
) -> Obj:
    """An apps/v1 DaemonSet; its pod template carries `requests` (and pod-level `pod_requests`) and
    the scheduling fields."""
    sel = {"app": name}
    meta = _meta(
        "DaemonSet",
        name,
        namespace,
        labels or sel,
        {"deprecated.daemonset.template.generation": "1"},
        creation_timestamp,
    )
    meta["generation"] = 1
    return {
        "kind": "DaemonSet",
        "apiVersion": "apps/v1",
        "metadata": meta,
        "spec": {
            "selector": {"matchLabels": sel},
            "template": _pod_template(
                sel,
                requests,
                node_selector,
                tolerations,
                affinity,
                priority_class_name,
                host_ports,
                pod_requests,
            ),
            "updateStrategy": {
                "type": "RollingUpdate",
                "rollingUpdate": {"maxUnavailable": 1, "maxSurge": 0},
            },
            "revisionHistoryLimit": 10,
        },
        "status": {
            "currentNumberScheduled": desired,
            "numberMisscheduled": 0,
            "desiredNumberScheduled": desired,
            "numberReady": desired,
            "observedGeneration": 1,
            "updatedNumberScheduled": desired,
            "numberAvailable": desired,
        },
    }


def replicaset(
    name: str = "rs",
    namespace: str = "default",
    *,
    replicas: int = 1,
    labels: Mapping[str, str] | None = None,
    requests: Requests = None,
    owner_kind: str | None = "Deployment",
    owner_name: str | None = None,
    creation_timestamp: Time = None,
) -> Obj:
    """An apps/v1 ReplicaSet, owned by a Deployment named after it unless told otherwise."""
    sel = dict(labels or {"app": name})
    meta = _meta("ReplicaSet", name, namespace, sel, None, creation_timestamp)
    meta["generation"] = 1
    if owner_kind:
        meta["ownerReferences"] = [
            owner_reference(owner_kind, owner_name or name.rsplit("-", 1)[0], namespace)
        ]
    return {
        "kind": "ReplicaSet",
        "apiVersion": "apps/v1",
        "metadata": meta,
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": sel},
            "template": _pod_template(sel, requests, None, None, None, None),
        },
        "status": {
            "replicas": replicas,
            "fullyLabeledReplicas": replicas,
            "readyReplicas": replicas,
            "availableReplicas": replicas,
            "observedGeneration": 1,
        },
    }


def deployment(
    name: str = "deploy",
    namespace: str = "default",
    *,
    replicas: int = 1,
    labels: Mapping[str, str] | None = None,
    requests: Requests = None,
    creation_timestamp: Time = None,
) -> Obj:
    sel = dict(labels or {"app": name})
    meta = _meta(
        "Deployment", name, namespace, sel, {"deployment.kubernetes.io/revision": "1"}, creation_timestamp
    )
    meta["generation"] = 1
    return {
        "kind": "Deployment",
        "apiVersion": "apps/v1",
        "metadata": meta,
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": sel},
            "template": _pod_template(sel, requests, None, None, None, None),
            "strategy": {
                "type": "RollingUpdate",
                "rollingUpdate": {"maxUnavailable": "25%", "maxSurge": "25%"},
            },
            "revisionHistoryLimit": 10,
            "progressDeadlineSeconds": 600,
        },
        "status": {
            "observedGeneration": 1,
            "replicas": replicas,
            "updatedReplicas": replicas,
            "readyReplicas": replicas,
            "availableReplicas": replicas,
        },
    }


# ---------------------------------------------------------------------------- config and others


def configmap(
    name: str = "cm",
    namespace: str = "default",
    *,
    data: Mapping[str, str] | None = None,
    labels: Mapping[str, str] | None = None,
    annotations: Mapping[str, str] | None = None,
    creation_timestamp: Time = None,
) -> Obj:
    meta = _meta("ConfigMap", name, namespace, labels, annotations, creation_timestamp)
    return {"kind": "ConfigMap", "apiVersion": "v1", "metadata": meta, "data": dict(data or {})}


def lease(
    name: str = "lease",
    namespace: str = "kube-system",
    *,
    holder: str | None = None,
    duration_seconds: int = 15,
    acquire_time: Time = None,
    renew_time: Time = None,
    transitions: int = 0,
    labels: Mapping[str, str] | None = None,
    creation_timestamp: Time = None,
) -> Obj:
    """A coordination.k8s.io/v1 Lease; no holder means a released lease (times omitted)."""
    spec: Obj = {"leaseDurationSeconds": duration_seconds, "leaseTransitions": transitions}
    if holder is not None:
        spec["holderIdentity"] = holder
        spec["acquireTime"] = micro_ts(acquire_time)
        spec["renewTime"] = micro_ts(renew_time if renew_time is not None else acquire_time)
    meta = _meta("Lease", name, namespace, labels, None, creation_timestamp)
    return {"kind": "Lease", "apiVersion": "coordination.k8s.io/v1", "metadata": meta, "spec": spec}


def event(
    name: str = "event",
    namespace: str = "default",
    *,
    involved_kind: str = "Pod",
    involved_name: str = "pod-0",
    involved_namespace: str | None = None,
    reason: str = "Scheduled",
    message: str = "",
    type_: str = "Normal",
    count: int = 1,
    component: str = "asg-reconciler",
    first_timestamp: Time = None,
    last_timestamp: Time = None,
) -> Obj:
    """A core/v1 Event about `involved_kind/involved_name`."""
    involved_ns = (
        involved_namespace
        if involved_namespace is not None
        else ("" if involved_kind in ("Node", "Namespace", "PersistentVolume") else namespace)
    )
    involved: Obj = {"kind": involved_kind, "name": involved_name, "apiVersion": "v1"}
    if involved_ns:
        involved["namespace"] = involved_ns
    involved["uid"] = make_uid(involved_kind, involved_ns, involved_name)
    meta = _meta("Event", name, namespace, None, None, first_timestamp)
    return {
        "kind": "Event",
        "apiVersion": "v1",
        "metadata": meta,
        "involvedObject": involved,
        "reason": reason,
        "message": message,
        "source": {"component": component},
        "firstTimestamp": ts(first_timestamp),
        "lastTimestamp": ts(last_timestamp if last_timestamp is not None else first_timestamp),
        "count": count,
        "type": type_,
        "eventTime": None,
        "reportingComponent": component,
        "reportingInstance": "",
    }


def namespace(
    name: str = "default",
    *,
    labels: Mapping[str, str] | None = None,
    annotations: Mapping[str, str] | None = None,
    creation_timestamp: Time = None,
) -> Obj:
    all_labels = {"kubernetes.io/metadata.name": name, **(labels or {})}
    meta = _meta("Namespace", name, None, all_labels, annotations, creation_timestamp)
    return {
        "kind": "Namespace",
        "apiVersion": "v1",
        "metadata": meta,
        "spec": {"finalizers": ["kubernetes"]},
        "status": {"phase": "Active"},
    }


def pv(
    name: str = "pv-0",
    *,
    zones: Sequence[str] | None = ("us-east-1a",),
    claim: str | None = None,
    capacity: str = "10Gi",
    storage_class: str = "gp3",
    phase: str | None = None,
    labels: Mapping[str, str] | None = None,
    creation_timestamp: Time = None,
) -> Obj:
    """A CSI (EBS) PersistentVolume pinned to `zones` by node affinity; `claim` is `namespace/name`."""
    spec: Obj = {
        "capacity": {"storage": capacity},
        "csi": {
            "driver": "ebs.csi.aws.com",
            "volumeHandle": "vol-" + hashlib.sha1(name.encode()).hexdigest()[:17],
            "fsType": "ext4",
        },
        "accessModes": ["ReadWriteOnce"],
        "persistentVolumeReclaimPolicy": "Delete",
        "storageClassName": storage_class,
        "volumeMode": "Filesystem",
    }
    if claim:
        ns, _, claim_name = claim.rpartition("/")
        spec["claimRef"] = {
            "kind": "PersistentVolumeClaim",
            "namespace": ns or "default",
            "name": claim_name,
            "apiVersion": "v1",
            "uid": make_uid("PersistentVolumeClaim", ns or "default", claim_name),
        }
    if zones:
        spec["nodeAffinity"] = {
            "required": {
                "nodeSelectorTerms": [
                    {
                        "matchExpressions": [
                            {"key": "topology.kubernetes.io/zone", "operator": "In", "values": list(zones)}
                        ]
                    }
                ]
            }
        }
    meta = _meta(
        "PersistentVolume",
        name,
        None,
        labels,
        {"pv.kubernetes.io/provisioned-by": "ebs.csi.aws.com"},
        creation_timestamp,
    )
    meta["finalizers"] = ["kubernetes.io/pv-protection"]
    return {
        "kind": "PersistentVolume",
        "apiVersion": "v1",
        "metadata": meta,
        "spec": spec,
        "status": {"phase": phase or ("Bound" if claim else "Available")},
    }


def pvc(
    name: str = "data",
    namespace: str = "default",
    *,
    volume_name: str = "",
    storage: str = "10Gi",
    storage_class: str = "gp3",
    phase: str | None = None,
    labels: Mapping[str, str] | None = None,
    creation_timestamp: Time = None,
) -> Obj:
    spec: Obj = {
        "accessModes": ["ReadWriteOnce"],
        "resources": {"requests": {"storage": storage}},
        "storageClassName": storage_class,
        "volumeMode": "Filesystem",
    }
    if volume_name:
        spec["volumeName"] = volume_name
    status: Obj = {"phase": phase or ("Bound" if volume_name else "Pending")}
    if volume_name:
        status["accessModes"] = ["ReadWriteOnce"]
        status["capacity"] = {"storage": storage}
    meta = _meta("PersistentVolumeClaim", name, namespace, labels, None, creation_timestamp)
    meta["finalizers"] = ["kubernetes.io/pvc-protection"]
    return {
        "kind": "PersistentVolumeClaim",
        "apiVersion": "v1",
        "metadata": meta,
        "spec": spec,
        "status": status,
    }


def write_jsonl(path: str | Path, objects: Iterable[Obj]) -> int:
    """Write one object per line (each carrying kind/apiVersion) for the server's `--objects`."""
    n = 0
    with open(path, "wb") as f:
        for obj in objects:
            f.write(orjson.dumps(obj))
            f.write(b"\n")
            n += 1
    return n
