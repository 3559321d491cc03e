"""What-if's workload reader: which pods a manifest runs at once, read by the project's pod parser,
and how much of it a cluster already runs."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from reconciler.domain.errors import UserError
from reconciler.domain.model import ClusterState, Pod
from reconciler.kube.manifest_files import split_documents
from reconciler.kube.parse import ObjectReader
from reconciler.kube.workloads import (
    Change,
    WorkBudget,
    Workload,
    added_pods,
    pod_object,
    read_workloads,
)
from tests.support import k8s_objects as k

GI = 1024**3


def read_one(tmp_path: Path, text: str) -> Workload:
    path = tmp_path / "app.yaml"
    path.write_text(text)
    (workload,) = read_workloads([path]).workloads
    return workload


def state(*pods: dict[str, Any]) -> ClusterState:
    reader = ObjectReader()
    return ClusterState(nodes=(), pods=tuple(reader.pod(p) for p in pods))


def add(workload: Workload, cluster: ClusterState | None = None) -> Change:
    return added_pods(workload, cluster or state(), ObjectReader(), WorkBudget())


def only(change: Change) -> Pod:
    (pod,) = change.added
    return pod


def test_requests_are_read_by_the_project_pod_parser(tmp_path: Path) -> None:
    """max(app containers + sidecars, the largest init container) + overhead, as the scheduler."""
    workload = read_one(
        tmp_path,
        """
apiVersion: apps/v1
kind: Deployment
metadata: {name: web, namespace: apps}
spec:
  replicas: 1
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      overhead: {memory: 128Mi}
      initContainers:
        - {name: migrate, image: m, resources: {requests: {memory: 3Gi, cpu: 100m}}}
        - {name: proxy, image: p, restartPolicy: Always, resources: {requests: {memory: 256Mi}}}
      containers:
        - {name: app, image: a, resources: {requests: {memory: 1Gi, cpu: 500m}}}
      nodeSelector: {workload: web}
      tolerations: [{key: dedicated, operator: Exists, effect: NoSchedule}]
""",
    )
    pod = only(add(workload))
    assert pod.requests.memory == 3 * GI + 128 * 2**20  # the init container's 3Gi wins, plus overhead
    assert pod.requests.cpu == 500
    assert pod.scheduling.node_selector == (("workload", "web"),)
    assert pod.labels == {"app": "web"} and pod.is_unschedulable
    assert (pod.owner is not None) and pod.owner.kind == "ReplicaSet"


@pytest.mark.parametrize(
    ("spec", "pods"),
    [
        ("{}", 1),
        ("{parallelism: 4, completions: 10}", 4),
        ("{parallelism: 5, completions: 2}", 2),
        ("{completions: 3}", 1),
        ("{parallelism: 3}", 3),
        ("{parallelism: 0}", 0),
        ("{parallelism: 4, suspend: true}", 0),
    ],
)
def test_a_job_runs_parallelism_pods_at_once_never_more_than_completions(
    tmp_path: Path, spec: str, pods: int
) -> None:
    flow = spec.rstrip("}") + (", " if spec != "{}" else "") + "template: {spec: {containers: [{name: a}]}}}"
    workload = read_one(tmp_path, f"apiVersion: batch/v1\nkind: Job\nmetadata: {{name: j}}\nspec: {flow}\n")
    assert workload.pods == pods
    assert len(add(workload).added) == pods


def test_a_cronjob_adds_a_run_beside_a_running_one_unless_it_forbids_that(tmp_path: Path) -> None:
    text = """
apiVersion: batch/v1
kind: CronJob
metadata: {{name: report, namespace: apps}}
spec:
  schedule: "0 * * * *"
  concurrencyPolicy: {policy}
  jobTemplate: {{spec: {{parallelism: 3, template: {{spec: {{containers: [{{name: a}}]}}}}}}}}
"""
    running = state(  # a run in progress: the Job report-29012345 with two pods left
        *(
            k.pod(
                f"report-29012345-{i}", "apps", node_name="n1", owner_kind="Job", owner_name="report-29012345"
            )
            for i in range(2)
        ),
        k.pod("reporter-1", "apps", node_name="n1", owner_kind="Job", owner_name="reporter-29012345"),
    )
    allow = add(read_one(tmp_path, text.format(policy="Allow")), running)
    assert (allow.running, len(allow.added)) == (0, 3)
    forbid = add(read_one(tmp_path, text.format(policy="Forbid")), running)
    assert (forbid.running, len(forbid.added)) == (2, 1)


def test_a_statefulset_adds_its_missing_ordinals_with_their_claims(tmp_path: Path) -> None:
    workload = read_one(
        tmp_path,
        """
apiVersion: apps/v1
kind: StatefulSet
metadata: {name: db, namespace: data}
spec:
  replicas: 4
  selector: {matchLabels: {app: db}}
  template: {metadata: {labels: {app: db}}, spec: {containers: [{name: db}]}}
  volumeClaimTemplates: [{metadata: {name: data}}]
""",
    )
    running = state(
        *(k.pod(f"db-{i}", "data", node_name="n1", owner_kind="StatefulSet", owner_name="db") for i in (0, 1))
    )
    change = add(workload, running)
    assert [p.name for p in change.added] == ["db-2", "db-3"]
    assert change.added[0].volumes.pvc_claims == ("data-db-2",)
    assert change.note == "2 pod(s) running: adds 2"


def test_a_pods_node_name_pins_it_as_the_scheduler_would_be_bypassed(tmp_path: Path) -> None:
    workload = read_one(
        tmp_path,
        "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec: {nodeName: n7, containers: [{name: a}]}\n",
    )
    pod = only(add(workload))
    assert pod.node_name == "" and pod.is_unschedulable
    (term,) = pod.scheduling.required_node_affinity
    assert [(r.key, r.values) for r in term.match_fields] == [("metadata.name", ("n7",))]
    assert add(workload, state(k.pod("p", "default", node_name="n7"))).added == ()


def test_typed_lists_and_kubectl_document_separators(tmp_path: Path) -> None:
    path = tmp_path / "list.yaml"
    path.write_text(
        "--- # kubectl get deploy -o yaml prints typed lists\n"
        "apiVersion: apps/v1\nkind: DeploymentList\nitems:\n"
        "- apiVersion: apps/v1\n  metadata: {name: a}\n"
        "  spec: {selector: {}, template: {spec: {containers: [{name: a}]}}}\n"
        "---\n"
        'apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c}\ndata: {text: "----\\n--- not a separator"}\n'
    )
    manifests = read_workloads([path])
    assert [(w.kind, w.name, w.pods, str(w.source)) for w in manifests.workloads] == [
        ("Deployment", "a", 1, f"{path}:5: document 2, item 0")
    ]
    assert [s.kind for s in manifests.skipped] == ["ConfigMap"]
    assert [offset for offset, _ in split_documents("a: 1\n---\nb: 2\n----\nc: 3\n")] == [0, 2]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            "apiVersion: example.com/v1\nkind: Deployment\nmetadata: {name: d}\nspec: {}\n",
            "unsupported kind example.com/v1 Deployment",
        ),
        ("kind: Deployment\nmetadata: {name: d}\nspec: {}\n", "apiVersion: missing"),
        ("- a\n- b\n", "expected a Kubernetes object (a mapping with apiVersion and kind), got a list"),
        ("apiVersion: apps/v1\nkind: Deployment\nspec: {}\n", "metadata: missing"),
        (
            "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: d}\n"
            "spec: {template: {spec: {containers: []}}}\n",
            "spec.template.spec.containers: missing",
        ),
        (
            "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: d}\n"
            "spec: {replicas: 1000000, selector: {}, template: {spec: {containers: [{name: a}]}}}\n",
            "adds 1000000 pod(s), more than what-if simulates (100000 in all)",
        ),
        (
            "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: d}\n"
            "spec: {selector: {}, template: {spec: {containers: "
            "[{name: a, resources: {requests: {cpu: lots}}}]}}}\n",
            "Deployment d: spec.template.spec.containers[a].resources.requests.cpu: 'lots' is not a "
            "Kubernetes quantity",
        ),
    ],
    ids=[
        "foreign-group",
        "no-api-version",
        "not-a-mapping",
        "no-metadata",
        "no-containers",
        "too-many",
        "quantity",
    ],
)
def test_mistakes_are_user_errors_naming_the_document(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "app.yaml"
    path.write_text(text)
    with pytest.raises(UserError) as caught:  # while reading, before any cluster is asked
        for workload in read_workloads([path]).workloads:
            add(workload)  # ... except for a count only the cluster's running pods tell
    assert str(path) in str(caught.value) and message in str(caught.value)


def test_a_workload_given_twice_is_refused(tmp_path: Path) -> None:
    text = "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec: {containers: [{name: a}]}\n"
    path = tmp_path / "app.yaml"
    path.write_text(text + "---\n" + text)
    with pytest.raises(UserError, match=r"Pod default/p is also in .*app.yaml:2: document 1"):
        read_workloads([path])


def test_priority_from_the_manifest_a_builtin_class_or_the_running_pods(tmp_path: Path) -> None:
    def deployment(spec: str) -> Workload:
        return read_one(
            tmp_path,
            "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web}\n"
            f"spec: {{replicas: 2, selector: {{}}, "
            f"template: {{spec: {{{spec}containers: [{{name: a}}]}}}}}}\n",
        )

    assert {p.priority for p in add(deployment("priority: 7, ")).added} == {7}
    builtin = add(deployment("priorityClassName: system-cluster-critical, "))
    assert {p.priority for p in builtin.added} == {2000000000}
    running = state(
        k.pod(
            "web-abc-0",
            node_name="n1",
            priority=1000,
            labels={"pod-template-hash": "abc"},
            owner_kind="ReplicaSet",
            owner_name="web-abc",
        )
    )
    named = add(deployment("priorityClassName: high, "), running)
    assert [p.priority for p in named.added] == [1000]  # 1 running, 1 added
    unknown = add(deployment("priorityClassName: high, "))
    assert {p.priority for p in unknown.added} == {0}
    assert "priorityClassName high: its value is not in the manifests or the cluster read" in unknown.note


def test_a_directory_is_every_manifest_under_it(tmp_path: Path) -> None:
    (tmp_path / "deploy" / "web").mkdir(parents=True)
    (tmp_path / "deploy" / "web" / "pod.yaml").write_text(
        "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec: {containers: [{name: a}]}\n"
    )
    (tmp_path / "deploy" / "README.md").write_text("# not a manifest\n")
    (tmp_path / "deploy" / "job.json").write_text(
        '{"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "j"},'
        ' "spec": {"template": {"spec": {"containers": [{"name": "a"}]}}}}'
    )
    manifests = read_workloads([tmp_path / "deploy"])
    assert [(w.kind, w.source.file) for w in manifests.workloads] == [
        ("Job", str(tmp_path / "deploy" / "job.json")),
        ("Pod", str(tmp_path / "deploy" / "web" / "pod.yaml")),
    ]
    (tmp_path / "empty").mkdir()
    with pytest.raises(UserError, match=r"empty: no \.yaml, \.yml or \.json files in this directory"):
        read_workloads([tmp_path / "empty"])


def test_a_quantity_the_api_server_accepts_is_read_saturated(tmp_path: Path) -> None:
    """`memory: 1e33` is a manifest kube-apiserver would take: what-if answers for it (no group
    fits) rather than refusing the file as a mistake (issue 28)."""
    workload = read_one(
        tmp_path,
        """
apiVersion: apps/v1
kind: DaemonSet
metadata: {name: agent, namespace: team-a}
spec:
  selector: {matchLabels: {app: agent}}
  template:
    metadata: {labels: {app: agent}}
    spec: {containers: [{name: a, resources: {requests: {memory: 1e33, cpu: 10m}}}]}
""",
    )
    pod = ObjectReader().pod(pod_object(workload, "agent-0", priority=0))
    assert pod.requests.memory == 2**63 - 1 and pod.requests.cpu == 10
