"""`run` as the split deployment runs it, against the real API server: a plan-stage process and an
apply-stage process, each as its own ServiceAccount under the shipped RBAC. Pending pods reach the
plan stage through its watch-fed cache, each stage leads on a real Lease, the plan stage writes its
Events and the status ConfigMap with the wake-up hint, apply acts on it; after an etcd compaction and
an API server restart the watches get 410 Gone and the cache lists again; the kill switch stops apply
and releasing it lets the held scale-up through. No 403 anywhere in either log."""

from __future__ import annotations

import json
import signal
from pathlib import Path

import pytest
import urllib3
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from reconciler.kube.status_configmap import PUSHED_KEY, STATUS_CONFIGMAP
from tests.support import k8s_objects as k
from tests.support.git import git
from tests.support.real_cluster import as_new, new_api_client
from tests.support.real_world import RealWorld, healthy
from tests.support.run_process import RunProcess, wait_for

from .test_rbac_service_accounts import ACCOUNTS, CLUSTER, NAMESPACE, shipped_rbac

pytestmark = pytest.mark.xdist_group("realcluster")  # one control plane, one worker (conftest.py)

# apply acts on the plan stage's hint, not its poll; the Leases at their defaults, so a leader keeps
# its Lease (and its cache) over the API server's few seconds of restart
KEYS = {
    "namespace": NAMESPACE,
    "interval": "30s",
    "applyPollInterval": "30s",
    "leaseDuration": "15s",
    "renewDeadline": "10s",
    "retryPeriod": "2s",
}


def answers_as(kubeconfig: Path) -> bool:
    api = new_api_client(kubeconfig)
    try:
        client.CoreV1Api(api).list_pod_for_all_namespaces(limit=1)
        return True
    except (ApiException, urllib3.exceptions.HTTPError):
        return False
    finally:
        api.close()


def test_split_run_against_the_real_server(eks_world: RealWorld, capsys: pytest.CaptureFixture[str]) -> None:
    world, cluster = eks_world, eks_world.cluster
    audited = len(cluster.plane.audit())  # the log is the session's: this test's part starts here
    cluster.apply(*shipped_rbac(cluster))
    plan_kubeconfig = cluster.kubeconfig_as(world.tmp / "plan.kubeconfig", NAMESPACE, "asg-reconciler-plan")
    apply_kubeconfig = cluster.kubeconfig_as(
        world.tmp / "apply.kubeconfig", NAMESPACE, "asg-reconciler-apply"
    )
    plan_config = world.write_config(plan_kubeconfig, name="plan.yaml")
    apply_config = world.write_config(apply_kubeconfig, name="apply.yaml")
    admin_config = world.write_config(
        cluster.kubeconfig, name="admin.yaml", extra=f"run: {{namespace: {NAMESPACE}}}\n"
    )
    world.group("general", "m5.large", desired=1)
    web = as_new(k.deployment("web", "shop", replicas=1, requests={"cpu": "1500m"}))  # one a node
    cluster.apply(web)
    cluster.wait(lambda: healthy(cluster.pods("shop"), "web") == 1, 60, "web running")

    def scale(replicas: int) -> None:
        cluster.kubectl("scale", "deployment/web", "-n", "shop", f"--replicas={replicas}")

    with (
        RunProcess(plan_config, stages="plan", keys=KEYS) as plan,
        RunProcess(apply_config, stages="apply", keys=KEYS) as apply,
    ):
        logs = lambda: plan.output() + apply.output()  # noqa: E731
        wait_for(lambda: plan.get("/readyz")[0] == 200, 60, "plan ready", log=logs)
        wait_for(lambda: apply.get("/readyz")[0] == 200, 60, "apply ready", log=logs)
        assert plan.metric("asg_reconciler_leader", stage="plan") == 1.0
        assert apply.metric("asg_reconciler_leader", stage="apply") == 1.0
        for lease in (f"asg-reconciler-plan-leader-{CLUSTER}", f"asg-reconciler-apply-leader-{CLUSTER}"):
            held = json.loads(cluster.kubectl("get", "lease", lease, "-n", NAMESPACE, "-o", "json"))
            assert held["spec"]["holderIdentity"], held

        # two more replicas: pending, seen by the watch, planned, pushed, hinted, applied
        scale(3)
        wait_for(lambda: world.desired("general") == 3, 60, "the scale-up applied", log=logs)
        world.wait_nodes("general", 3)
        cluster.wait(lambda: healthy(cluster.pods("shop"), "web") == 3, 60, "3 web pods running")

        def status() -> dict[str, str]:
            found = cluster.kubectl("get", "configmap", STATUS_CONFIGMAP, "-n", NAMESPACE, "-o", "json")
            return json.loads(found).get("data") or {}  # type: ignore[no-any-return]

        assert status()[PUSHED_KEY] == git("rev-parse", "main", cwd=world.remote).strip()
        wait_for(
            lambda: "general" in status().get("status-plan", ""), 30, "the plan stage's status", log=logs
        )
        wait_for(
            lambda: "general" in status().get("status-apply", ""), 60, "the apply stage's status", log=logs
        )
        assert "woken by the plan stage's push" in apply.output()
        events = json.loads(cluster.kubectl("get", "events", "-n", "shop", "-o", "json"))["items"]
        assert any(e["reason"] == "TriggeredScaleUp" for e in events), events

        # etcd compacted and the API server restarted while both processes are frozen: when they
        # go on, every watch resumes from a revision the new watch cache does not have: 410 Gone,
        # and the cache lists again. (Frozen, because a client that reconnects in the first second
        # after the restart meets RBAC's caches not yet synced: 403 for every ServiceAccount.)
        for process in (plan, apply):
            process.process.send_signal(signal.SIGSTOP)
        try:
            cluster.kubectl("create", "configmap", "bump", "-n", "shop")  # history moves past the watches
            cluster.plane.compact()
            cluster.plane.restart_apiserver()
            cluster.wait(lambda: answers_as(plan_kubeconfig), 60, "RBAC answering for the plan account again")
        finally:
            for process in (plan, apply):
                process.process.send_signal(signal.SIGCONT)
        wait_for(
            lambda: plan.metric("asg_reconciler_cache_relists_total", kind="Pod", reason="expired") == 1.0,
            60,
            "the Pod watch's 410 and a new list",
            log=plan.output,
        )
        assert "is too old: listing again" in plan.output()
        scale(4)  # the cache still sees what happens
        wait_for(lambda: world.desired("general") == 4, 90, "the scale-up after the relist", log=logs)
        world.wait_nodes("general", 4)

        # the kill switch: apply stops, plan keeps planning; released, the held raise goes through
        said = world.cli(capsys, "suspend", "--reason", "incident 42", config=admin_config)
        assert said.code == 0, said.out + said.err
        wait_for(lambda: apply.metric("asg_reconciler_suspended") == 1.0, 60, "apply suspended", log=logs)
        before = git("rev-parse", "main", cwd=world.remote).strip()
        scale(5)
        wait_for(
            lambda: git("rev-parse", "main", cwd=world.remote).strip() != before,
            60,
            "the plan pushed",
            log=logs,
        )
        wait_for(
            lambda: (apply.metric("asg_reconciler_errors_total", stage="apply", kind="suspended") or 0) >= 1,
            60,
            "a suspended apply cycle",
            log=logs,
        )
        assert world.desired("general") == 4  # committed, not applied
        resumed = world.cli(capsys, "resume", config=admin_config)
        assert resumed.code == 0, resumed.out + resumed.err
        wait_for(lambda: world.desired("general") == 5, 90, "the scale-up after resume", log=logs)
        assert plan.stop(signal.SIGTERM) == 0 and apply.stop(signal.SIGTERM) == 0
    for log in (plan.output(), apply.output()):
        assert "Traceback" not in log and "Forbidden" not in log, log
    story = [
        e
        for e in cluster.plane.audit(audited)
        if e["stage"] == "ResponseComplete" and e["user"]["username"] in ACCOUNTS
    ]
    refused = [
        f"{e['user']['username']} {e['verb']} {e['requestURI']}"
        for e in story
        if e["responseStatus"]["code"] == 403
    ]
    assert story and not refused, refused
