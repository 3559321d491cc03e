"""Workload manifests (what an application's pull request changes) as the pods they would run.

`what-if` reads Kubernetes YAML or JSON: Deployment, StatefulSet, ReplicaSet, ReplicationController,
Job, CronJob (one run of its job template), Pod and DaemonSet; multi-document files, `kind: List`
and typed lists (`DeploymentList`). Every document goes through `reconciler.config.documents.parse_yaml`, the
one YAML entry point for user files (its limits apply here too), and every pod a workload would run
is built as a pod object and read by the project's own pod parser (`kube.parse`), so requests (init
containers, sidecars, overhead, pod-level resources), scheduling and volumes are read exactly as for
the pods of a live cluster.

A workload that already runs counts only its difference: its pods in the cluster are found through
their controller (a Deployment's pods are owned by its ReplicaSet `<name>-<pod-template-hash>`), and
only the pods beyond them are added. An object that runs no pods (Service, ConfigMap, ...) is
skipped and listed; any other kind is refused, never ignored: an unknown kind may run pods, and
leaving them out would answer "no capacity needed" for a change that needs some.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from reconciler.config.documents import plain
from reconciler.domain.errors import UserError
from reconciler.domain.model import ClusterState, LabelSelector, OwnerRef, Pod, Resources
from reconciler.domain.quantity import format_bytes, format_cpu
from reconciler.kube.manifest_files import InputBudget, Source, documents, line_of, manifest_files
from reconciler.kube.names import names_problem, object_name_problem
from reconciler.kube.parse import UNREADABLE, ObjectReader, label_selector
from reconciler.kube.workload_schema import dotted, schema_problem, schema_version
from reconciler.kube.workload_shape import shape_problem

DEPLOYMENT = "Deployment"
STATEFUL_SET = "StatefulSet"
REPLICA_SET = "ReplicaSet"
REPLICATION_CONTROLLER = "ReplicationController"
JOB = "Job"
CRON_JOB = "CronJob"
POD = "Pod"
DAEMON_SET = "DaemonSet"

# kind -> the API groups it is served from (apps/v1 and the legacy extensions/v1beta1 ones)
WORKLOAD_KINDS: Mapping[str, tuple[str, ...]] = {
    DEPLOYMENT: ("apps", "extensions"),
    STATEFUL_SET: ("apps",),
    REPLICA_SET: ("apps", "extensions"),
    DAEMON_SET: ("apps", "extensions"),
    REPLICATION_CONTROLLER: ("",),
    POD: ("",),
    JOB: ("batch",),
    CRON_JOB: ("batch",),
}
# Built-in kinds that never run a pod themselves: skipped (and listed), so an application's whole
# manifest can be passed as it is.
POD_LESS_KINDS = frozenset(
    {
        "APIService",
        "ClusterRole",
        "ClusterRoleBinding",
        "ConfigMap",
        "CustomResourceDefinition",
        "Endpoints",
        "EndpointSlice",
        "HorizontalPodAutoscaler",
        "Ingress",
        "IngressClass",
        "Lease",
        "LimitRange",
        "MutatingWebhookConfiguration",
        "Namespace",
        "NetworkPolicy",
        "PersistentVolume",
        "PersistentVolumeClaim",
        "PodDisruptionBudget",
        "PodTemplate",
        "PriorityClass",
        "ResourceQuota",
        "Role",
        "RoleBinding",
        "Secret",
        "Service",
        "ServiceAccount",
        "StorageClass",
        "ValidatingWebhookConfiguration",
    }
)
# The two PriorityClasses every cluster has (scheduling/v1, built in); other classes' values are not
# in a manifest or a dump, so a pod naming one takes the priority its workload's running pods have.
BUILTIN_PRIORITIES: Mapping[str, int] = {
    "system-node-critical": 2000001000,
    "system-cluster-critical": 2000000000,
}
MAX_ADDED_PODS = 100_000  # what one what-if simulates at most: a typo of replicas is not a plan
# ... and the pod objects it builds, counted in the values of their templates that the pod parser
# reads (`template_size`): pods x (containers + volumes + claim templates + ...). A 10 KB StatefulSet
# of 100,000 replicas and 500 volumeClaimTemplates is 50 million volumes: a MemoryError, not a plan.
MAX_WORK = 4_000_000
# container fields the pod parser never reads (commands, environment, probes) cost nothing per pod
_READ_CONTAINER_KEYS = frozenset({"name", "resources", "ports", "restartPolicy"})
DEFAULT_NAMESPACE = "default"

_RUN_SUFFIX = re.compile(r"^(?P<cronjob>.+)-\d+$")  # the CronJob controller names a run <name>-<minutes>
_TERMINAL = frozenset({"Succeeded", "Failed"})


@dataclass(frozen=True)
class Workload:
    """One object that runs pods, as the file says it."""

    source: Source
    kind: str
    namespace: str
    name: str
    pods: int | None  # pods running at once; None for a DaemonSet (one on every node it selects)
    template: Mapping[str, Any]  # the pod template: {"metadata": {...}, "spec": {...}}
    selector: LabelSelector | None = None
    claim_templates: tuple[str, ...] = ()  # a StatefulSet's volumeClaimTemplates
    first_ordinal: int = 0  # a StatefulSet's spec.ordinals.start
    concurrency: str = "Allow"  # a CronJob's concurrencyPolicy
    rolls_out: bool = (
        False  # a changed pod template replaces the running pods (not OnDelete, not a ReplicaSet)
    )
    note: str = ""  # why it runs fewer pods than it seems to (suspended, ...)

    @property
    def key(self) -> str:
        return f"{self.kind} {self.namespace}/{self.name}"


@dataclass(frozen=True)
class Skipped:
    """An object that runs no pods itself (a Service, a ConfigMap...)."""

    source: Source
    kind: str
    name: str


@dataclass(frozen=True)
class Manifests:
    workloads: tuple[Workload, ...]
    skipped: tuple[Skipped, ...] = ()


def read_workloads(paths: Sequence[Path], default_namespace: str = DEFAULT_NAMESPACE) -> Manifests:
    """Every workload in `paths` (a directory: every .yaml, .yml and .json file under it); any
    problem is one UserError naming the file, document and line."""
    workloads: list[Workload] = []
    skipped: list[Skipped] = []
    budget = InputBudget()
    for path, target in manifest_files(paths):
        found = 0
        for source, document in documents(path, target, budget):
            for item_source, item in _objects(document, source):
                found += 1
                budget.count_object(item_source)
                one = _workload(item, item_source, default_namespace)
                if isinstance(one, Skipped):
                    skipped.append(one)
                else:
                    workloads.append(one)
        if not found:
            raise UserError(f"{path}: no Kubernetes objects in it (expected YAML or JSON manifests)")
    seen: dict[str, Source] = {}
    for w in workloads:
        if w.key in seen:
            raise UserError(f"{w.source}: {w.key} is also in {seen[w.key]} (pass each workload once)")
        seen[w.key] = w.source
    work = WorkBudget()
    for w in workloads:  # the most each may add (all its pods), before the cluster is asked anything
        work.spend(w, w.pods or 0)
    return Manifests(tuple(workloads), tuple(skipped))


def template_size(workload: Workload) -> int:
    """What one of the workload's pods costs to build and plan: the values of its pod template the
    pod parser reads, each claim template counted as the volume it adds (counted iteratively:
    width is not bounded, only depth)."""
    size = 1 + 3 * len(workload.claim_templates)
    spec = dict(workload.template.get("spec") or {})
    for key in ("containers", "initContainers"):  # of a container, only what the parser reads
        if isinstance(spec.get(key), list):
            spec[key] = [
                {k: v for k, v in c.items() if k in _READ_CONTAINER_KEYS} if isinstance(c, dict) else c
                for c in spec[key]
            ]
    spec.pop("ephemeralContainers", None)
    pending: list[Any] = [workload.template.get("metadata"), spec]
    while pending:
        node = pending.pop()
        size += 1
        if isinstance(node, dict):
            pending.extend(node.values())
        elif isinstance(node, list):
            pending.extend(node)
    return size


@dataclass
class WorkBudget:
    """What is left of MAX_ADDED_PODS and MAX_WORK for one what-if: spent before any pod is built."""

    pods: int = field(default_factory=lambda: MAX_ADDED_PODS)
    work: int = field(default_factory=lambda: MAX_WORK)

    def spend(self, workload: Workload, count: int, what: str = "") -> None:
        """Take `count` pods of `workload`, or a UserError naming its file, object and the field
        that asks for them, before anything is allocated."""
        if not count:
            return
        size = template_size(workload)
        field_name = what or _COUNT_FIELDS.get(workload.kind, "spec.replicas")
        where = f"{workload.source}: {workload.key}: {field_name}"
        if count > self.pods:
            raise UserError(
                f"{where}: adds {count} pod(s), more than what-if simulates ({MAX_ADDED_PODS} in all); "
                "lower it"
            )
        if count * size > self.work:
            raise UserError(
                f"{where}: {count} pod(s) of {size} values each (containers, volumes, claim templates, "
                f"...) is more than what-if builds ({MAX_WORK:,} values in all); lower it or split "
                "the change"
            )
        self.pods -= count
        self.work -= count * size


_COUNT_FIELDS = {
    JOB: "spec.parallelism",
    CRON_JOB: "spec.jobTemplate.spec.parallelism",
    POD: "spec",
    DAEMON_SET: "one pod per node it selects",
}


def _objects(document: Any, source: Source) -> Iterator[tuple[Source, Any]]:
    """The object, or each item of a `List` / typed list (`DeploymentList`: items carry no kind)."""
    if not isinstance(document, dict):
        raise UserError(
            f"{source}: expected a Kubernetes object (a mapping with apiVersion and kind), "
            f"got {_type_name(document)}"
        )
    kind = document.get("kind")
    if isinstance(kind, str) and kind.endswith("List") and "items" in document:
        items = document.get("items")
        if not isinstance(items, list):
            raise UserError(f"{source}: items: must be a list of objects (got {_type_name(items)})")
        item_kind = kind[: -len("List")]
        for index, item in enumerate(items):
            where = Source(source.file, source.document, line_of(items, index) or source.line, index)
            if isinstance(item, dict) and item_kind and "kind" not in item:
                item = {**item, "kind": item_kind}
            if isinstance(item, dict) and isinstance(item.get("kind"), str) and item["kind"].endswith("List"):
                raise UserError(f"{where}: a list inside a list (flatten it: one object per item)")
            yield from _objects(item, where)
        return
    yield source, document


def _type_name(value: Any) -> str:
    if value is None:
        return "nothing"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, dict):
        return "a mapping"
    # the type only, never the value: a file's content is not quoted back (it may not be a manifest)
    if isinstance(value, str):
        return "a string"
    if isinstance(value, bool):
        return "true or false"
    return "a number" if isinstance(value, int | float) else type(value).__name__


def _group(api_version: Any) -> str | None:
    if not isinstance(api_version, str) or not api_version:
        return None
    return api_version.split("/", 1)[0] if "/" in api_version else ""


def _workload(raw: Any, source: Source, default_namespace: str) -> Workload | Skipped:
    kind = raw.get("kind")
    if not isinstance(kind, str) or not kind:
        raise UserError(f"{source}: kind: missing (every object names its kind, e.g. kind: Deployment)")
    metadata = raw.get("metadata")
    if not isinstance(metadata, dict):
        raise UserError(f"{source}: {kind}: metadata: missing (it must hold at least name)")
    name = metadata.get("name") or metadata.get("generateName")
    if not isinstance(name, str) or not name:
        raise UserError(f"{source}: {kind}: metadata.name: missing (name the object)")
    label = Source(source.file, source.document, line_of(raw, "kind") or source.line, source.item)
    group = _group(raw.get("apiVersion"))
    if kind in POD_LESS_KINDS and group is not None:
        _check_schema(raw, source, f"{kind} {name}")
        return Skipped(label, kind, name)
    named = object_name_problem(metadata, default_namespace)
    if named is not None:
        raise UserError(f"{label}: {kind}: {named}")
    if kind not in WORKLOAD_KINDS or group not in WORKLOAD_KINDS[kind]:
        shown = f"{raw.get('apiVersion')} {kind}" if raw.get("apiVersion") else kind
        if group is None:
            reason = "apiVersion: missing (e.g. apps/v1 for a Deployment)"
        else:
            known = ", ".join(sorted(WORKLOAD_KINDS))
            reason = (
                f"unsupported kind {shown} (what-if reads {known}; an object of another kind may run pods "
                "it cannot see, so it is refused, not ignored: leave this file out, or render the object's "
                "pods as one of those kinds)"
            )
        raise UserError(f"{label}: {kind} {name}: {reason}")
    namespace = metadata.get("namespace") or default_namespace
    if not isinstance(namespace, str):
        raise UserError(f"{label}: {kind} {name}: metadata.namespace: must be a string")
    spec = raw.get("spec")
    if not isinstance(spec, dict):
        raise UserError(f"{label}: {kind} {name}: spec: missing")
    where = f"{label}: {kind} {name}"
    whole = plain(raw)
    problem = shape_problem(kind, whole) or names_problem(kind, whole)
    if problem is not None:
        raise UserError(f"{where}: {problem}")
    builder = _KINDS[kind]
    workload = builder(whole, whole["spec"], where, label, namespace, name)
    _check_schema(raw, source, f"{kind} {name}")
    _probe(workload, where)
    return workload


def _check_schema(raw: Any, source: Source, what: str) -> None:
    """The official schema of the object's kind (`workload_schema`): the first problem as one line
    naming the file, the field's own line, the object and the field's path."""
    found = schema_problem(plain(raw))
    if found is None:
        return
    path, message = found
    line, node = source.line, raw
    for key in path:
        line = line_of(node, key) or line
        try:
            node = node[key]
        except (KeyError, IndexError, TypeError):
            break
    where = Source(source.file, source.document, line, source.item)
    raise UserError(
        f"{where}: {what}: {dotted(path)}: {message} (checked against the Kubernetes "
        f"{schema_version()} schema)"
    )


def _probe(workload: Workload, where: str) -> None:
    """Read one pod of the template now, so a bad quantity is a mistake in this file, found before
    the cluster is asked anything, not a failure halfway through the plan."""
    reader = ObjectReader()
    try:  # the pod first: its errors name the field from the pod's spec down
        reader.pod(pod_object(workload, workload.name, priority=0))
        if workload.kind == DAEMON_SET:
            reader.daemonset(daemonset_object(workload))
    except UNREADABLE as exc:
        message = str(exc) if isinstance(exc, UserError) else f"{type(exc).__name__}: {exc}"
        path = "" if workload.kind == POD or not message.startswith("spec.") else "spec.template."
        raise UserError(f"{where}: {path}{message}") from None


def _count(spec: Mapping[str, Any], key: str, where: str, default: int | None) -> int | None:
    value = spec.get(key, default)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise UserError(f"{where}: spec.{key}: {value!r} is not a count (a whole number, 0 or more)")
    return value


def _template(spec: Mapping[str, Any], where: str, path: str = "spec.template") -> dict[str, Any]:
    template = spec.get("template")
    if not isinstance(template, dict):
        raise UserError(f"{where}: {path}: missing (the pod template its pods are made from)")
    pod_spec = template.get("spec")
    containers = pod_spec.get("containers") if isinstance(pod_spec, dict) else None
    if not isinstance(containers, list) or not containers:
        raise UserError(f"{where}: {path}.spec.containers: missing (a pod runs at least one container)")
    if any(not isinstance(c, dict) for c in containers):
        raise UserError(f"{where}: {path}.spec.containers: each container must be a mapping")
    metadata = template.get("metadata")
    return {"metadata": metadata if isinstance(metadata, dict) else {}, "spec": pod_spec}


def _selector(spec: Mapping[str, Any], where: str, plain_map: bool = False) -> LabelSelector | None:
    """spec.selector; `plain_map`: a ReplicationController's, a map of labels (where `matchLabels`
    would be a label key like any other)."""
    raw = spec.get("selector")
    if raw is None:
        return None
    if not isinstance(raw, dict):
        raise UserError(f"{where}: spec.selector: must be a mapping")
    if not plain_map and ("matchLabels" in raw or "matchExpressions" in raw):
        return label_selector(raw)
    return label_selector({"matchLabels": raw})


def _replicated(
    raw: Mapping[str, Any], spec: Mapping[str, Any], where: str, source: Source, namespace: str, name: str
) -> Workload:
    kind = str(raw["kind"])
    replicas = _count(spec, "replicas", where, 1) or 0
    claims: tuple[str, ...] = ()
    first = 0
    if kind == STATEFUL_SET:
        templates = spec.get("volumeClaimTemplates") or []
        if not isinstance(templates, list):
            raise UserError(f"{where}: spec.volumeClaimTemplates: must be a list")
        names = [
            ((t or {}).get("metadata") or {}).get("name") if isinstance(t, dict) else None for t in templates
        ]
        if any(not isinstance(n, str) or not n for n in names):
            raise UserError(f"{where}: spec.volumeClaimTemplates: every template needs metadata.name")
        claims = tuple(str(n) for n in names)
        ordinals = spec.get("ordinals") or {}
        first = _count(ordinals, "start", where, 0) or 0 if isinstance(ordinals, dict) else 0
    return Workload(
        source,
        kind,
        namespace,
        name,
        replicas,
        _template(spec, where),
        _selector(spec, where, plain_map=kind == REPLICATION_CONTROLLER),
        claims,
        first,
        rolls_out=_rolls_out(kind, spec),
    )


def _rolls_out(kind: str, spec: Mapping[str, Any]) -> bool:
    """Whether the controller replaces running pods when the template changes: a Deployment always
    (RollingUpdate or Recreate), a StatefulSet unless `updateStrategy.type: OnDelete`; a ReplicaSet
    or ReplicationController never (its running pods keep the old template)."""
    if kind == DEPLOYMENT:
        return True
    if kind == STATEFUL_SET:
        strategy = spec.get("updateStrategy")
        return not (isinstance(strategy, dict) and strategy.get("type") == "OnDelete")
    return False


def _job_pods(spec: Mapping[str, Any], where: str) -> tuple[int, str]:
    """Pods a Job runs at once: parallelism (default 1), never more than completions."""
    if spec.get("suspend") is True:
        return 0, "suspended (spec.suspend): runs no pods until resumed"
    parallelism = _count(spec, "parallelism", where, 1) or 0
    completions = _count(spec, "completions", where, None)
    return (parallelism if completions is None else min(parallelism, completions)), ""


def _job(
    raw: Mapping[str, Any], spec: Mapping[str, Any], where: str, source: Source, namespace: str, name: str
) -> Workload:
    pods, note = _job_pods(spec, where)
    return Workload(source, JOB, namespace, name, pods, _template(spec, where), note=note)


def _cron_job(
    raw: Mapping[str, Any], spec: Mapping[str, Any], where: str, source: Source, namespace: str, name: str
) -> Workload:
    job = (spec.get("jobTemplate") or {}).get("spec") if isinstance(spec.get("jobTemplate"), dict) else None
    if not isinstance(job, dict):
        raise UserError(f"{where}: spec.jobTemplate.spec: missing (the Job each run creates)")
    pods, note = _job_pods(job, where)
    if spec.get("suspend") is True:
        pods, note = 0, "suspended (spec.suspend): starts no run until resumed"
    policy = spec.get("concurrencyPolicy") or "Allow"
    template = _template(job, where, "spec.jobTemplate.spec.template")
    return Workload(source, CRON_JOB, namespace, name, pods, template, concurrency=str(policy), note=note)


def _pod(
    raw: Mapping[str, Any], spec: Mapping[str, Any], where: str, source: Source, namespace: str, name: str
) -> Workload:
    metadata = raw.get("metadata") or {}
    template = _template({"template": {"metadata": metadata, "spec": spec}}, where, "Pod")
    return Workload(source, POD, namespace, name, 1, template)


def _daemon_set(
    raw: Mapping[str, Any], spec: Mapping[str, Any], where: str, source: Source, namespace: str, name: str
) -> Workload:
    strategy = spec.get("updateStrategy")
    on_delete = isinstance(strategy, dict) and strategy.get("type") == "OnDelete"
    template, selector = _template(spec, where), _selector(spec, where)
    return Workload(source, DAEMON_SET, namespace, name, None, template, selector, rolls_out=not on_delete)


_KINDS = {
    DEPLOYMENT: _replicated,
    STATEFUL_SET: _replicated,
    REPLICA_SET: _replicated,
    REPLICATION_CONTROLLER: _replicated,
    JOB: _job,
    CRON_JOB: _cron_job,
    POD: _pod,
    DAEMON_SET: _daemon_set,
}


# ------------------------------------------------------------------------------ against the cluster


@dataclass(frozen=True)
class Change:
    """What one workload adds to the cluster as it runs today."""

    workload: Workload
    running: int  # its pods the cluster already has (pending ones included)
    added: tuple[Pod, ...] = ()
    note: str = ""
    nodes: tuple[str, ...] = field(default=())  # a DaemonSet: the existing nodes it would run on
    replaced: tuple[Pod, ...] = ()  # running pods a rollout of the changed template removes


def running_pods(workload: Workload, state: ClusterState) -> list[Pod]:
    """The workload's pods in the cluster now (not finished, not being deleted), found through their
    controlling owner: a Deployment's ReplicaSet is `<name>-<pod-template-hash>` (the Deployment
    controller's naming, and the hash is the pod's `pod-template-hash` label)."""
    kind, name, namespace = workload.kind, workload.name, workload.namespace
    found = []
    for pod in state.pods:
        owner = pod.owner
        if (
            owner is None
            or pod.namespace != namespace
            or pod.deleting_since is not None
            or pod.phase in _TERMINAL
        ):
            continue
        if kind == DEPLOYMENT:
            ours = owner.kind == REPLICA_SET and owner.name == f"{name}-{pod.labels.get('pod-template-hash')}"
        elif kind == CRON_JOB:
            run = _RUN_SUFFIX.match(owner.name)
            ours = owner.kind == JOB and run is not None and run["cronjob"] == name
        else:
            ours = owner.kind == kind and owner.name == name
        if ours:
            found.append(pod)
    return found


def pod_object(
    workload: Workload,
    name: str,
    *,
    priority: int,
    claims: Mapping[str, str] | None = None,
    owner: OwnerRef | None = None,
    pinned_to: str = "",
    created: str | None = None,
    tolerations: Sequence[Mapping[str, str]] = (),
) -> dict[str, Any]:
    """The pod the workload's controller would create, pending and unschedulable (what scale-up is
    for). `claims`: volume name -> PVC name (a StatefulSet's claim templates). `pinned_to`: a node
    name, as the DaemonSet controller pins its pods (required node affinity on metadata.name, which
    replaces the template's node affinity terms)."""
    template_meta = workload.template.get("metadata") or {}
    spec = dict(workload.template.get("spec") or {})
    spec.pop("nodeName", None)
    spec["priority"] = priority
    if tolerations:
        spec["tolerations"] = [*(spec.get("tolerations") or ()), *(dict(t) for t in tolerations)]
    if claims:
        spec["volumes"] = [
            *(spec.get("volumes") or ()),
            *(
                {"name": volume, "persistentVolumeClaim": {"claimName": claim}}
                for volume, claim in claims.items()
            ),
        ]
    node_name = (workload.template.get("spec") or {}).get("nodeName")
    if pinned_to or node_name:
        affinity = dict(spec.get("affinity") or {})
        node_affinity = dict(affinity.get("nodeAffinity") or {})
        node_affinity["requiredDuringSchedulingIgnoredDuringExecution"] = {
            "nodeSelectorTerms": [
                {
                    "matchFields": [
                        {"key": "metadata.name", "operator": "In", "values": [pinned_to or node_name]}
                    ]
                }
            ]
        }
        affinity["nodeAffinity"] = node_affinity
        spec["affinity"] = affinity
    metadata: dict[str, Any] = {
        "name": name,
        "namespace": workload.namespace,
        "uid": f"what-if:{workload.namespace}/{name}",
        "labels": dict(template_meta.get("labels") or {}),
        "annotations": dict(template_meta.get("annotations") or {}),
    }
    if created is not None:
        metadata["creationTimestamp"] = created
    if owner is not None:
        metadata["ownerReferences"] = [
            {"kind": owner.kind, "name": owner.name, "controller": owner.controller}
        ]
    status = {
        "phase": "Pending",
        "conditions": [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}],
    }
    return {"kind": "Pod", "metadata": metadata, "spec": spec, "status": status}


def priority_of(workload: Workload, running: Sequence[Pod]) -> tuple[int, str]:
    """spec.priority, else a built-in class's value, else what the workload's running pods have,
    else 0 (with a note when a PriorityClass is named whose value the manifest does not hold)."""
    spec = workload.template.get("spec") or {}
    given = spec.get("priority")
    if isinstance(given, int) and not isinstance(given, bool):
        return given, ""
    name = spec.get("priorityClassName")
    if not name:
        return 0, ""
    if name in BUILTIN_PRIORITIES:
        return BUILTIN_PRIORITIES[name], ""
    if running:
        return running[0].priority, ""
    return 0, f"priorityClassName {name}: its value is not in the manifests or the cluster read; counted as 0"


def controller_owner(workload: Workload) -> OwnerRef:
    """The controlling owner a new pod of the workload would carry (what drain rules read)."""
    if workload.kind == DEPLOYMENT:
        return OwnerRef(REPLICA_SET, f"{workload.name}-what-if")
    if workload.kind == CRON_JOB:
        return OwnerRef(JOB, f"{workload.name}-what-if")
    return OwnerRef(workload.kind, workload.name)


def added_pods(workload: Workload, state: ClusterState, reader: ObjectReader, budget: WorkBudget) -> Change:
    """The pods a replicated workload, Job, CronJob or Pod adds to the cluster as it is: its wanted
    pods beyond those it runs now. `budget`: what this what-if may still build (spent here)."""
    running = running_pods(workload, state)
    wanted = workload.pods or 0  # never None here: a DaemonSet's pods depend on the nodes
    if workload.kind == CRON_JOB and workload.concurrency == "Allow":
        counted = 0  # another run starts beside a running one
    elif workload.kind == POD:
        counted = 1 if any(p.name == workload.name for p in running) or _pod_exists(workload, state) else 0
    else:
        counted = len(running)
    priority, priority_note = priority_of(workload, running)
    notes = [n for n in (workload.note, priority_note) if n]
    stale = _stale(workload, running, reader, priority) if workload.rolls_out else []
    if stale:
        return _rollout(workload, running, stale, reader, budget, priority, notes)
    if counted >= wanted:
        if wanted < counted:
            notes.insert(0, f"scales down from {counted} to {wanted} pod(s): adds nothing")
        elif counted:
            notes.insert(0, f"unchanged: its {counted} pod(s) already there")
        return Change(workload, counted, (), "; ".join(notes))
    count = wanted - counted
    budget.spend(workload, count)
    names = _new_names(workload, running, count)
    owner = controller_owner(workload)
    pods = []
    for name in names:
        claims = {c: f"{c}-{name}" for c in workload.claim_templates}
        raw = pod_object(workload, name, priority=priority, claims=claims, owner=owner)
        pods.append(reader.pod(raw))
    if counted:
        notes.insert(0, f"{counted} pod(s) running: adds {count}")
    return Change(workload, counted, tuple(pods), "; ".join(notes))


def _stale(workload: Workload, running: Sequence[Pod], reader: ObjectReader, priority: int) -> list[Pod]:
    """The running pods whose requests the file's template changes: a rollout replaces them."""
    if not running:
        return []
    new = reader.pod(pod_object(workload, workload.name, priority=priority)).requests
    return [p for p in running if p.requests != new]


def describe_requests(requests: Resources) -> str:
    """`cpu 100m, memory 1Gi`: the resources a pod asks for, as people write them."""
    parts = []
    for name, amount in sorted(requests.values.items()):
        if name == "cpu":
            parts.append(f"cpu {format_cpu(amount)}")
        elif name in ("memory", "ephemeral-storage") or name.startswith("hugepages-"):
            parts.append(f"{name} {format_bytes(amount)}")
        else:
            parts.append(f"{name} {amount}")
    return ", ".join(parts) or "nothing"


def _rollout(
    workload: Workload,
    running: Sequence[Pod],
    stale: Sequence[Pod],
    reader: ObjectReader,
    budget: WorkBudget,
    priority: int,
    notes: list[str],
) -> Change:
    """A changed template of a running Deployment or StatefulSet: its controller replaces every pod,
    so the answer is the cluster after the rollout: the old pods gone, all the wanted pods at the
    new requests pending (a StatefulSet's under their own names, with their own claims)."""
    wanted = workload.pods or 0
    budget.spend(workload, wanted)
    if workload.kind == STATEFUL_SET:
        names = [f"{workload.name}-{workload.first_ordinal + n}" for n in range(wanted)]
    else:
        names = [f"{workload.name}-what-if-{n}" for n in range(1, wanted + 1)]
    owner = controller_owner(workload)
    pods = tuple(
        reader.pod(
            pod_object(
                workload,
                name,
                priority=priority,
                claims={c: f"{c}-{name}" for c in workload.claim_templates},
                owner=owner,
            )
        )
        for name in names
    )
    old = describe_requests(stale[0].requests)
    new = describe_requests(pods[0].requests) if pods else "nothing"
    notes.insert(
        0,
        f"rollout: the template changes its pods' requests ({old} -> {new}), so its {len(running)} "
        f"running pod(s) are replaced by {wanted} at the new requests (planned as the cluster after "
        "the rollout)",
    )
    return Change(workload, len(running), pods, "; ".join(notes), replaced=tuple(running))


def _pod_exists(workload: Workload, state: ClusterState) -> bool:
    return any(p.namespace == workload.namespace and p.name == workload.name for p in state.pods)


def _new_names(workload: Workload, running: Sequence[Pod], count: int) -> list[str]:
    """A StatefulSet's missing ordinals (`<name>-<ordinal>`, as its controller names them); the name
    of a Pod; else `<name>-what-if-<n>`."""
    if workload.kind == POD:
        return [workload.name]
    if workload.kind == STATEFUL_SET:
        taken = {p.name for p in running}
        names: list[str] = []
        ordinal = workload.first_ordinal
        while len(names) < count:
            candidate = f"{workload.name}-{ordinal}"
            if candidate not in taken:
                names.append(candidate)
            ordinal += 1
        return names
    return [f"{workload.name}-what-if-{n}" for n in range(1, count + 1)]


def daemonset_object(workload: Workload) -> dict[str, Any]:
    """The DaemonSet as the API would hold it, for the project's DaemonSet reader."""
    return {
        "kind": DAEMON_SET,
        "metadata": {"name": workload.name, "namespace": workload.namespace},
        "spec": {"template": dict(workload.template)},
    }
