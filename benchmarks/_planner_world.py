"""The planner benchmark's cluster (issue 3), described once and rendered two ways.

`build_world()` lays out, from a fixed seed, 5,000 nodes in 200 single-zone ASGs (nine pools of eight
instance types; batch and GPU pools tainted, the memory pool labelled), 150,000 running pods (four
DaemonSets on every node, the rest from ~400 ReplicaSets, StatefulSets and a few bare pods, some
with PDBs, local storage, hostname anti-affinity, zone spread or in kube-system) and 2,000 pending pods
in 36 shapes. Exactly 10% of the nodes are filled below the 0.5 utilisation threshold; the pools the
pending pods ask for are filled to 90-97%, so those pods need new nodes, as the scheduler said.

The description is then rendered
- as kubectl JSON (`dump_objects`), built with the factories of tests/support/k8s_objects.py
  (`realistic_pod` for every pod, ~4.5 KB each), for `plan --dry-run --snapshot`;
- as the model (`cluster_state`, `node_groups`): each controller's pod JSON is parsed once by the real
  reader (`reconciler.kube.parse.ObjectReader`) and cloned per pod, so the in-memory ClusterState is
  what reading the dump gives, with the same shared label maps and Scheduling objects.
"""

from __future__ import annotations

import functools
import hashlib
import random
import sys
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from reconciler.domain.model import (  # noqa: E402
    ClusterState,
    Instance,
    NodeGroup,
    NodeTemplate,
    Pod,
    Resources,
    Taint,
)
from reconciler.kube.parse import ObjectReader  # noqa: E402
from reconciler.planning.types import PlannerMemory  # noqa: E402
from tests.support import k8s_objects as k  # noqa: E402
from tests.support.k8s_objects import DEFAULT_TOLERATIONS  # noqa: E402

REGION = "us-east-1"
ZONES = ("us-east-1a", "us-east-1b", "us-east-1c")
CLUSTER = "bench"
DISCOVERY_TAGS = {
    "k8s.io/cluster-autoscaler/enabled": "true",
    f"k8s.io/cluster-autoscaler/{CLUSTER}": "owned",
}
TEMPLATE_TAG = "k8s.io/cluster-autoscaler/node-template"
CONFIG_DOCUMENT: Mapping[str, Any] = {
    "cluster": CLUSTER,
    "region": REGION,
    "nodeGroups": {"autoDiscovery": ["asg:tag=" + ",".join(DISCOVERY_TAGS)]},
}
CONFIG_YAML = (
    f"cluster: {CLUSTER}\nregion: {REGION}\nnodeGroups:\n  autoDiscovery:\n"
    f"    - asg:tag={','.join(DISCOVERY_TAGS)}\n"
)

NODES = 5_000
RUNNING_PODS = 150_000
PENDING_PODS = 2_000
UNDER_SHARE = 0.10
THRESHOLD = 0.5
GPU = "nvidia.com/gpu"
MI = 2**20
TOLERATE_ALL: tuple[Mapping[str, Any], ...] = ({"operator": "Exists"},)
BATCH_TOLERATIONS = (
    *DEFAULT_TOLERATIONS,
    {"key": "dedicated", "operator": "Equal", "value": "batch", "effect": "NoSchedule"},
)
GPU_TOLERATIONS = (
    *DEFAULT_TOLERATIONS,
    {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"},
)


# ------------------------------------------------------------------------------------ machines


@dataclass(frozen=True)
class InstanceType:
    name: str
    vcpus: int
    mem_gib: int
    max_pods: int
    gpus: int = 0

    @property
    def alloc_cpu(self) -> int:
        """Millicores after the EKS kube-reserved CPU (6% of the first core, 1%, 0.5% x2, 0.25% rest)."""
        reserved = 60 + 10 + 5 + 5 + max(self.vcpus - 4, 0) * 2.5
        return self.vcpus * 1000 - int(reserved)

    @property
    def capacity_ki(self) -> int:
        return int(self.mem_gib * 1024 * 1024 * 0.9475)  # what EC2 leaves the kernel, as kubelet reports

    @property
    def alloc_ki(self) -> int:
        return self.capacity_ki - (255 + 11 * self.max_pods + 100) * 1024  # EKS reserved + eviction

    @property
    def alloc_mem(self) -> int:
        return self.alloc_ki * 1024

    def capacity(self) -> dict[str, str]:
        out = {"cpu": str(self.vcpus), "memory": f"{self.capacity_ki}Ki", "pods": str(self.max_pods)}
        out["ephemeral-storage"] = "83873772Ki"
        if self.gpus:
            out[GPU] = str(self.gpus)
        return out

    def allocatable(self) -> dict[str, str]:
        out = {"cpu": f"{self.alloc_cpu}m", "memory": f"{self.alloc_ki}Ki", "pods": str(self.max_pods)}
        out["ephemeral-storage"] = "76224326324"
        if self.gpus:
            out[GPU] = str(self.gpus)
        return out


M5_XL = InstanceType("m5.xlarge", 4, 16, 58)
M5_2XL = InstanceType("m5.2xlarge", 8, 32, 58)
M5_4XL = InstanceType("m5.4xlarge", 16, 64, 234)
C5_2XL = InstanceType("c5.2xlarge", 8, 16, 58)
C5_4XL = InstanceType("c5.4xlarge", 16, 32, 234)
R5_XL = InstanceType("r5.xlarge", 4, 32, 58)
R5_2XL = InstanceType("r5.2xlarge", 8, 64, 58)
G4DN_XL = InstanceType("g4dn.xlarge", 4, 16, 29, gpus=1)


@dataclass(frozen=True)
class Pool:
    """Groups of one instance type, one per zone in turn. Hot pools are what pending pods ask for."""

    name: str
    itype: InstanceType
    groups: int
    base_pods: int  # app pods on a typical node
    labels: Mapping[str, str] = field(default_factory=dict)
    taints: tuple[str, ...] = ()
    hot: bool = False
    at_max: int = 0  # groups already at their max size

    def node_labels(self) -> dict[str, str]:
        return {"pool": self.name, **self.labels}


POOLS = (
    Pool("web", M5_XL, 50, 24),
    Pool("services", M5_2XL, 40, 30),
    Pool("compute", C5_2XL, 25, 28, hot=True),
    Pool("cache", R5_XL, 20, 24),
    Pool("data", M5_4XL, 20, 45, hot=True),
    Pool("platform", M5_XL, 15, 22),
    Pool("memory", R5_2XL, 10, 26, labels={"workload": "memory"}, hot=True),
    Pool(
        "batch",
        C5_4XL,
        10,
        40,
        labels={"workload": "batch"},
        taints=("dedicated=batch:NoSchedule",),
        hot=True,
    ),
    Pool(
        "gpu",
        G4DN_XL,
        10,
        12,
        labels={"workload": "gpu", "k8s.amazonaws.com/accelerator": "nvidia-tesla-t4"},
        taints=("nvidia.com/gpu=true:NoSchedule",),
        hot=True,
        at_max=5,
    ),
)
POOL = {p.name: p for p in POOLS}
UNTAINTED = tuple(p.name for p in POOLS if not p.taints and not p.labels)
SIZES = (15, 20, 25, 30, 35)  # nodes per group, in turn: 25 on average, 5,000 in all


@dataclass(frozen=True)
class GroupSpec:
    name: str
    pool: str
    zone: str
    size: int  # registered nodes
    min_size: int
    max_size: int
    unregistered: int = 0  # instances launched a few minutes ago, no node yet (upcoming capacity)


@dataclass(frozen=True)
class NodeSpec:
    name: str
    group: int
    ready: bool = True


# ------------------------------------------------------------------------------------ workloads


@dataclass(frozen=True)
class Controller:
    """What a set of pods shares: owner, requests, scheduling, volumes, annotations."""

    kind: str  # ReplicaSet | StatefulSet | DaemonSet | "" (bare pods)
    app: str
    namespace: str
    cpu: int  # millicores
    mem: int  # MiB
    gpu: int = 0
    pools: tuple[str, ...] = ()  # where generation may place its running pods
    node_selector: Mapping[str, str] = field(default_factory=dict)
    node_affinity: Mapping[str, Any] | None = None
    tolerations: tuple[Mapping[str, Any], ...] = DEFAULT_TOLERATIONS
    anti_affinity: bool = False  # required, on the hostname, against its own pods
    zone_spread: bool = False  # DoNotSchedule on the zone, maxSkew 1
    pod_affinity: str = ""  # required pod affinity to this app: unmodelled
    local_storage: bool = False
    safe_local: bool = False  # annotated safe-to-evict-local-volumes
    safe_to_evict: str = ""
    priority: int = 0
    age: timedelta = timedelta(days=3)
    pending: int = 0  # pending pods of this shape
    weight: float = 1.0  # how often generation picks it for a node

    @functools.cached_property
    def owner_name(self) -> str:
        if self.kind == "ReplicaSet":
            return f"{self.app}-{_digest(self.namespace + self.app, 10)}"
        return self.app

    def pod_name(self, ordinal: int) -> str:
        if self.kind in ("StatefulSet", ""):
            return f"{self.app}-{ordinal}"
        return f"{self.owner_name}-{_digest(f'{self.app}/{ordinal}', 5)}"

    def requests(self) -> dict[str, str]:
        out = {"cpu": f"{self.cpu}m", "memory": f"{self.mem}Mi"}
        if self.gpu:
            out[GPU] = str(self.gpu)
        return out

    @property
    def blocks_drain(self) -> bool:
        return (
            self.kind == ""
            or self.safe_to_evict == "false"
            or (self.local_storage and not self.safe_local)
            or (self.namespace == "kube-system" and self.age < timedelta(hours=1))
        )


def _digest(text: str, length: int) -> str:
    alphabet = "bcdfghjklmnpqrstvwxz2456789"
    number = int.from_bytes(hashlib.sha1(text.encode()).digest()[:8], "big")
    out = []
    for _ in range(length):
        number, index = divmod(number, len(alphabet))
        out.append(alphabet[index])
    return "".join(out)


@dataclass
class World:
    groups: list[GroupSpec]
    nodes: list[NodeSpec]
    controllers: list[Controller]
    daemonsets: list[Controller]
    pods: list[tuple[int, int, int]]  # (controller, ordinal, node index or -1 when pending)
    pdbs: list[tuple[int, int]]  # (controller, disruptions allowed)
    under: list[str]  # nodes filled below the threshold
    not_ready: list[str]
    stats: dict[str, Any] = field(default_factory=dict)


# ------------------------------------------------------------------------------------ layout

WORDS = (
    "checkout", "cart", "search", "catalog", "payments", "auth", "profile", "orders", "billing", "notify",
    "gateway", "inventory", "pricing", "reviews", "shipping", "recommend", "media", "session", "ledger",
    "quotes",
)  # fmt: skip
CPU_SIZES = (25, 50, 50, 100, 100, 150, 200, 250, 250, 300, 400, 500, 500, 750, 1000, 1000, 1500, 2000)
MEM_PER_CPU = (1024, 2048, 2048, 4096)  # MiB per core


def _mem(cpu: int, per_core: int) -> int:
    return max(64, round(cpu * per_core / 1000 / 64) * 64)


def _daemonsets() -> list[Controller]:
    return [
        Controller("DaemonSet", "aws-node", "kube-system", 25, 64, tolerations=TOLERATE_ALL),
        Controller("DaemonSet", "kube-proxy", "kube-system", 100, 128, tolerations=TOLERATE_ALL),
        Controller("DaemonSet", "ebs-csi-node", "kube-system", 10, 40, tolerations=TOLERATE_ALL),
        Controller("DaemonSet", "node-exporter", "monitoring", 50, 64, tolerations=TOLERATE_ALL),
    ]


def _running_controllers(rng: random.Random) -> tuple[list[Controller], list[tuple[int, int]]]:
    controllers: list[Controller] = []
    pdbs: list[tuple[int, int]] = []
    for index in range(360):
        namespace = f"team-{index % 40:02d}"
        app = f"{WORDS[index % len(WORDS)]}-{index}"
        cpu = rng.choice(CPU_SIZES)
        home = UNTAINTED[index % len(UNTAINTED)]
        pinned = index % 2 == 0
        c = Controller(
            "StatefulSet" if index % 10 == 7 else "ReplicaSet",
            app,
            namespace,
            cpu,
            _mem(cpu, rng.choice(MEM_PER_CPU)),
            pools=(home,) if pinned else UNTAINTED,
            node_selector={"pool": home} if pinned else {},
            anti_affinity=index % 25 == 3,
            zone_spread=index % 5 == 1,  # a fifth of the controllers, as the planner issue asks
            local_storage=index % 20 == 5,
            safe_local=index % 40 == 5,
            safe_to_evict="true" if index % 30 == 13 else "false" if index % 97 == 50 else "",
        )
        if c.blocks_drain:
            c = replace(c, weight=0.12)
        controllers.append(c)
        if index % 3 == 0:
            pdbs.append((len(controllers) - 1, 0 if index % 30 == 0 else 1 + index % 3))
    for index in range(10):
        cpu = rng.choice((250, 500, 1000, 2000))
        controllers.append(
            Controller(
                "ReplicaSet",
                f"memcache-{index}",
                f"team-{index * 4:02d}",
                cpu,
                _mem(cpu, 8192),
                pools=("memory",),
                node_selector={"workload": "memory"},
            )
        )
    for index in range(10):
        cpu = rng.choice((500, 1000, 2000, 4000))
        controllers.append(
            Controller(
                "ReplicaSet",
                f"etl-worker-{index}",
                "batch",
                cpu,
                _mem(cpu, 2048),
                pools=("batch",),
                node_selector={"workload": "batch"},
                tolerations=BATCH_TOLERATIONS,
            )
        )
    for index in range(10):
        serving = index < 5
        cpu = rng.choice((1000, 2000)) if serving else rng.choice((100, 200, 500))
        controllers.append(
            Controller(
                "ReplicaSet",
                f"{'inference' if serving else 'gpu-sidecar'}-{index}",
                "ml",
                cpu,
                _mem(cpu, 4096),
                gpu=1 if serving else 0,
                pools=("gpu",),
                node_selector={"workload": "gpu"},
                tolerations=GPU_TOLERATIONS,
            )
        )
        if serving:
            pdbs.append((len(controllers) - 1, 1))
    system = [
        Controller("ReplicaSet", "coredns", "kube-system", 100, 70, pools=("platform",), weight=0.3),
        Controller("ReplicaSet", "metrics-server", "kube-system", 100, 200, pools=("platform",), weight=0.1),
        Controller(
            "ReplicaSet", "ebs-csi-controller", "kube-system", 50, 128, pools=("platform",), weight=0.2
        ),
        Controller(
            "ReplicaSet",
            "aws-load-balancer-controller",
            "kube-system",
            100,
            256,
            pools=("platform",),
            age=timedelta(minutes=20),
            weight=0.05,
        ),
        Controller("StatefulSet", "prometheus", "monitoring", 2000, 8192, pools=("platform",), weight=0.1),
        Controller("ReplicaSet", "grafana", "monitoring", 250, 512, pools=("platform",), weight=0.2),
        Controller(
            "ReplicaSet", "kube-state-metrics", "monitoring", 100, 256, pools=("platform",), weight=0.1
        ),
        Controller("", "debug-shell", "team-03", 100, 128, pools=UNTAINTED, weight=0.02),
    ]
    for c in system:
        controllers.append(c)
        if c.app in ("coredns", "ebs-csi-controller", "grafana"):
            pdbs.append((len(controllers) - 1, 1))
    return controllers, pdbs


def _pending_shapes() -> list[Controller]:
    """36 shapes, 2,000 pods: most need new nodes in the hot pools, some fit existing capacity, some
    fit nowhere (and the plan must say why)."""
    shapes: list[Controller] = []

    def add(app: str, namespace: str, count: int, cpu: int, mem: int, **kw: Any) -> None:
        shapes.append(
            Controller("ReplicaSet", app, namespace, cpu, mem, pending=count, age=timedelta(minutes=5), **kw)
        )

    compute = {"pool": "compute"}
    for i, (cpu, mem, count) in enumerate(
        ((1000, 1024, 100), (1000, 2048, 80), (1500, 2048, 80), (1500, 3072, 70), (2000, 2048, 70),
         (2000, 4096, 70), (1200, 1536, 70), (1800, 2560, 60))
    ):  # fmt: skip
        add(f"render-{i}", f"team-{i:02d}", count, cpu, mem, node_selector=compute)
    data = {"pool": "data"}
    for i, (cpu, mem, count) in enumerate(
        ((2000, 8192, 80), (2500, 8192, 70), (3000, 12288, 70), (3500, 8192, 60), (4000, 16384, 60),
         (2000, 4096, 60))
    ):  # fmt: skip
        add(f"spark-exec-{i}", f"team-{10 + i:02d}", count, cpu, mem, node_selector=data, zone_spread=True)
    memory = {"workload": "memory"}
    for i, (cpu, mem, count) in enumerate(
        ((500, 16384, 60), (1000, 20480, 50), (1000, 24576, 50), (500, 12288, 40))
    ):
        add(f"redis-shard-{i}", f"team-{20 + i:02d}", count, cpu, mem, node_selector=memory)
    for i, (cpu, mem, count) in enumerate(
        ((4000, 8192, 50), (6000, 8192, 50), (8000, 16384, 40), (5000, 6144, 40))
    ):
        add(
            f"nightly-{i}",
            "batch",
            count,
            cpu,
            mem,
            node_selector={"workload": "batch"},
            tolerations=BATCH_TOLERATIONS,
        )
    for i, count in enumerate((50, 40, 30)):
        add(
            f"train-{i}",
            "ml",
            count,
            2000,
            8192,
            gpu=1,
            node_selector={"workload": "gpu"},
            tolerations=GPU_TOLERATIONS,
        )
    # fit existing capacity (the under-utilised nodes have room)
    add("cron-report", "team-30", 100, 200, 256)
    add("webhook-relay", "team-31", 50, 500, 1024)
    # no selector, too big for every existing node: new m5.4xlarge nodes of the data pool
    add("video-transcode", "team-32", 50, 8000, 30720)
    # fit nowhere, each for its own reason
    add("giant-solver", "team-33", 10, 64000, 65536)
    add("nvme-cache", "team-34", 40, 500, 1024, node_selector={"disktype": "nvme"})
    add("gpu-no-toleration", "ml", 20, 1000, 4096, gpu=1, node_selector={"workload": "gpu"})
    add("arm-build", "team-35", 40, 1000, 2048, node_selector={"kubernetes.io/arch": "arm64"})
    add("zonal-ledger", "team-36", 60, 500, 1024, zone_spread=True)
    add("cache-sidecar", "team-37", 30, 250, 512, pod_affinity="checkout-0")
    add("best-effort-crawl", "team-38", 50, 500, 512, priority=-100)
    add(
        "m6i-only",
        "team-39",
        50,
        1000,
        2048,
        node_affinity={
            "nodeSelectorTerms": [
                {
                    "matchExpressions": [
                        {"key": "node.kubernetes.io/instance-type", "operator": "In", "values": ["m6i.large"]}
                    ]
                }
            ]
        },
    )
    assert sum(s.pending for s in shapes) == PENDING_PODS, sum(s.pending for s in shapes)
    assert len(shapes) <= 50
    return shapes


# ------------------------------------------------------------------------------------ filling


def build_world(seed: int = 3) -> World:
    rng = random.Random(seed)
    groups: list[GroupSpec] = []
    nodes: list[NodeSpec] = []
    for pool in POOLS:
        for index in range(pool.groups):
            size = SIZES[len(groups) % len(SIZES)]
            at_max = index < pool.at_max
            unregistered = 2 if pool.name == "web" and index in (7, 8) else 0
            groups.append(
                GroupSpec(
                    name=f"{pool.name}-{ZONES[index % 3][-1]}-{index // 3 + 1:02d}",
                    pool=pool.name,
                    zone=ZONES[index % 3],
                    size=size,
                    min_size=2 if pool.name == "platform" else 1,
                    max_size=size if at_max else size + unregistered + 10,
                    unregistered=unregistered,
                )
            )
            for _ in range(size):
                at = len(nodes)
                name = f"ip-10-{at // 250}-{at % 250 // 50}-{at % 50 + 10}.ec2.internal"
                nodes.append(NodeSpec(name, len(groups) - 1))
    assert len(nodes) == NODES and len(groups) == 200

    daemonsets = _daemonsets()
    running, pdbs = _running_controllers(rng)
    shapes = _pending_shapes()
    controllers = running + shapes

    cold = [i for i, n in enumerate(nodes) if not POOL[groups[n.group].pool].hot]
    under_index = set(rng.sample(cold, int(NODES * UNDER_SHARE)))
    others = [i for i in cold if i not in under_index]
    not_ready_index = set(rng.sample(others, 5))

    # app pods per node: more on bigger and busier nodes, 130,000 in all
    ds_count = len(daemonsets)
    targets: list[float] = []
    raw: list[float] = []
    for i, n in enumerate(nodes):
        pool = POOL[groups[n.group].pool]
        if i in under_index:
            u = rng.uniform(0.10, 0.40)
        elif pool.hot:
            u = rng.uniform(0.91, 0.97)
        else:
            u = rng.uniform(0.60, 0.88)
        targets.append(u)
        raw.append(pool.base_pods * (0.55 + u))
    want_total = RUNNING_PODS - ds_count * NODES
    factor = want_total / sum(raw)
    counts = [int(r * factor) for r in raw]
    caps = [POOL[groups[n.group].pool].itype.max_pods - ds_count for n in nodes]
    counts = [min(c, cap) for c, cap in zip(counts, caps, strict=True)]
    short = want_total - sum(counts)
    order = sorted(range(NODES), key=lambda i: -raw[i])
    while short > 0:
        for i in order:
            if short == 0:
                break
            if counts[i] < caps[i]:
                counts[i] += 1
                short -= 1

    by_pool: dict[str, list[int]] = {p.name: [] for p in POOLS}
    for index, c in enumerate(running):
        for pool_name in c.pools:
            by_pool[pool_name].append(index)
    ds_cpu = sum(d.cpu for d in daemonsets)
    ds_mem = sum(d.mem for d in daemonsets) * MI
    ordinals = [0] * len(controllers)
    pods: list[tuple[int, int, int]] = []
    for ds_index in range(ds_count):
        for node_index in range(NODES):
            pods.append((-1 - ds_index, node_index, node_index))  # DaemonSet pods: negative controller
    used: list[tuple[int, int]] = []

    def world_pool(node_index: int) -> str:
        return groups[nodes[node_index].group].pool

    for i, n in enumerate(nodes):
        pool = POOL[groups[n.group].pool]
        it = pool.itype
        under = i in under_index
        cap_share = 0.45 if under else 0.985
        cpu_cap, mem_cap = int(it.alloc_cpu * cap_share) - ds_cpu, int(it.alloc_mem * cap_share) - ds_mem
        budget_cpu = targets[i] * it.alloc_cpu - ds_cpu
        budget_mem = targets[i] * it.alloc_mem - ds_mem
        candidates = _subset(rng, by_pool[pool.name], running, 40)
        cpu_used = mem_used = 0
        placed: set[int] = set()
        gpu_free = 0 if under else it.gpus
        for j in range(counts[i]):
            left = counts[i] - j
            jitter = rng.uniform(0.6, 1.4)
            want = (
                max(budget_cpu - cpu_used, 0) / left * jitter,
                max(budget_mem - mem_used, 0) / left * jitter,
            )
            room = (cpu_cap - cpu_used, mem_cap - mem_used)
            pick = _closest(candidates, running, want, room, (it.alloc_cpu, it.alloc_mem), placed, gpu_free)
            if pick is None:
                break
            c = running[pick]
            cpu_used += c.cpu
            mem_used += c.mem * MI
            gpu_free -= c.gpu
            placed.add(pick)
            pods.append((pick, ordinals[pick], i))
            ordinals[pick] += 1
        used.append((cpu_used + ds_cpu, mem_used + ds_mem))

    # top up what early stops left short with the smallest pod, on busy nodes that may run it
    tiny = min(
        range(len(running)), key=lambda x: (running[x].blocks_drain, running[x].cpu, running[x].mem, x)
    )
    small = running[tiny]
    busy = [i for i in range(NODES) if i not in under_index and world_pool(i) in small.pools]
    short = RUNNING_PODS - len(pods)
    while short > 0:
        added = 0
        for i in busy:
            if short == 0:
                break
            it = POOL[world_pool(i)].itype
            cpu, mem = used[i]
            if cpu + small.cpu > it.alloc_cpu * 0.985 or mem + small.mem * MI > it.alloc_mem * 0.985:
                continue
            used[i] = (cpu + small.cpu, mem + small.mem * MI)
            pods.append((tiny, ordinals[tiny], i))
            ordinals[tiny] += 1
            short -= 1
            added += 1
        if not added:
            raise RuntimeError(f"the world has no room for {short} more running pods")
    for index, c in enumerate(controllers):
        for _ in range(c.pending):
            pods.append((index, ordinals[index], -1))
            ordinals[index] += 1

    # what the planner will see: max(cpu, memory) requested / allocatable, GPU share on GPU nodes
    gpu_used = [0] * NODES
    for controller, _, node_index in pods:
        if controller >= 0 and node_index >= 0:
            gpu_used[node_index] += controllers[controller].gpu
    under_names: list[str] = []
    for i, n in enumerate(nodes):
        it = POOL[groups[n.group].pool].itype
        cpu, mem = used[i]
        share = gpu_used[i] / it.gpus if it.gpus else max(cpu / it.alloc_cpu, mem / it.alloc_mem)
        if share < THRESHOLD:
            under_names.append(n.name)
    if len(under_names) != len(under_index):
        raise RuntimeError(f"{len(under_names)} nodes came out under the threshold, not {len(under_index)}")
    nodes = [replace(n, ready=False) if i in not_ready_index else n for i, n in enumerate(nodes)]
    world = World(
        groups=groups,
        nodes=nodes,
        controllers=controllers,
        daemonsets=daemonsets,
        pods=pods,
        pdbs=pdbs,
        under=sorted(under_names),
        not_ready=sorted(nodes[i].name for i in not_ready_index),
    )
    world.stats = {
        "running": sum(1 for p in pods if p[2] >= 0),
        "pending": sum(1 for p in pods if p[2] < 0),
        "controllers": len(running),
        "shapes": len(shapes),
        "under": len(under_names),
        "pdbs": len(pdbs),
    }
    return world


def _subset(rng: random.Random, pool: Sequence[int], running: Sequence[Controller], size: int) -> list[int]:
    """A weighted random handful of the controllers that may run in a pool, smallest CPU first."""
    weights = [running[i].weight for i in pool]
    chosen = set(rng.choices(pool, weights=weights, k=size))
    return sorted(chosen, key=lambda i: (running[i].cpu, running[i].mem, i))


def _closest(
    candidates: Sequence[int],
    running: Sequence[Controller],
    want: tuple[float, float],
    room: tuple[int, int],
    scale: tuple[int, int],
    placed: set[int],
    gpu_free: int,
) -> int | None:
    """The candidate nearest `want` (CPU, memory bytes; each relative to the node's allocatable) that
    still fits in `room`: the scheduler's balanced packing, roughly."""
    best, best_gap = None, 0.0
    for index in candidates:
        c = running[index]
        mem = c.mem * MI
        if c.cpu > room[0] or mem > room[1]:
            continue
        if c.gpu > gpu_free or (c.anti_affinity and index in placed):
            continue
        gap = abs(c.cpu - want[0]) / scale[0] + abs(mem - want[1]) / scale[1]
        if gpu_free and c.gpu:
            gap = -1.0  # a free GPU is used first: a GPU node is busy when its GPU is
        if best is None or gap < best_gap:
            best, best_gap = index, gap
    return best


# ------------------------------------------------------------------------------------ rendering


def _ts(now: datetime, age: timedelta) -> str:
    return k.ts(now - age)


def pod_object(c: Controller, name: str, node_name: str, now: datetime) -> dict[str, Any]:
    """One pod as kubectl prints it: `realistic_pod` (a Deployment pod) edited to this controller."""
    extra_labels = {"statefulset.kubernetes.io/pod-name": name} if c.kind == "StatefulSet" else None
    obj = k.realistic_pod(
        name,
        c.namespace,
        node_name=node_name,
        app=c.app,
        requests=c.requests(),
        labels=extra_labels,
        owner_name=c.owner_name if c.kind == "ReplicaSet" else f"{c.app}-rs",
        creation_timestamp=_ts(now, c.age),
    )
    meta, spec = obj["metadata"], obj["spec"]
    if c.kind == "":
        del meta["ownerReferences"]
        meta.pop("generateName", None)
    elif c.kind != "ReplicaSet":
        meta["ownerReferences"] = [k.owner_reference(c.kind, c.app, c.namespace)]
        meta["labels"].pop("pod-template-hash", None)
    if c.gpu:
        spec["containers"][0]["resources"]["limits"][GPU] = str(c.gpu)
    if c.node_selector:
        spec["nodeSelector"] = dict(c.node_selector)
    if c.tolerations is not DEFAULT_TOLERATIONS:
        spec["tolerations"] = [dict(t) for t in c.tolerations]
    affinity: dict[str, Any] = {}
    if c.node_affinity is not None:
        affinity["nodeAffinity"] = {"requiredDuringSchedulingIgnoredDuringExecution": c.node_affinity}
    if c.anti_affinity:
        term = {"labelSelector": {"matchLabels": {"app": c.app}}, "topologyKey": "kubernetes.io/hostname"}
        affinity["podAntiAffinity"] = {"requiredDuringSchedulingIgnoredDuringExecution": [term]}
    if c.pod_affinity:
        term = {
            "labelSelector": {"matchLabels": {"app": c.pod_affinity}},
            "topologyKey": "kubernetes.io/hostname",
        }
        affinity["podAffinity"] = {"requiredDuringSchedulingIgnoredDuringExecution": [term]}
    if affinity:
        spec["affinity"] = affinity
    if c.zone_spread:
        spec["topologySpreadConstraints"] = [
            {
                "maxSkew": 1,
                "topologyKey": "topology.kubernetes.io/zone",
                "whenUnsatisfiable": "DoNotSchedule",
                "labelSelector": {"matchLabels": {"app": c.app}},
            }
        ]
    if c.local_storage:
        spec["volumes"].append(k.empty_dir_volume("scratch"))
        spec["containers"][0]["volumeMounts"].append({"name": "scratch", "mountPath": "/scratch"})
    annotations = meta.setdefault("annotations", {})
    if c.safe_local:
        annotations[_SAFE_LOCAL] = "scratch"
    if c.safe_to_evict:
        annotations[_SAFE] = c.safe_to_evict
    if c.priority:
        spec["priority"] = c.priority
        spec["priorityClassName"] = "best-effort"
        spec["preemptionPolicy"] = "Never"
    return obj


_SAFE = "cluster-autoscaler.kubernetes.io/safe-to-evict"
_SAFE_LOCAL = "cluster-autoscaler.kubernetes.io/safe-to-evict-local-volumes"


def _daemonset_object(d: Controller, now: datetime) -> dict[str, Any]:
    return k.daemonset(
        d.app,
        d.namespace,
        requests=d.requests(),
        tolerations=[dict(t) for t in d.tolerations],
        desired=NODES,
        creation_timestamp=_ts(now, timedelta(days=90)),
    )


def _pdb_object(c: Controller, allowed: int, now: datetime) -> dict[str, Any]:
    return k.pdb(
        f"{c.app}-pdb",
        c.namespace,
        match_labels={"app": c.app},
        min_available=1,
        disruptions_allowed=allowed,
        creation_timestamp=_ts(now, timedelta(days=30)),
    )


InstanceIds = Mapping[str, tuple[str, ...]]  # group -> instance ids: its nodes' in order, then unregistered


def default_instance_ids(world: World) -> dict[str, tuple[str, ...]]:
    ids: dict[str, list[str]] = {g.name: [] for g in world.groups}
    for n in world.nodes:
        ids[world.groups[n.group].name].append(k.instance_id_for(n.name))
    for g in world.groups:
        ids[g.name].extend(k.instance_id_for(f"{g.name}-launching-{i}") for i in range(g.unregistered))
    return {name: tuple(values) for name, values in ids.items()}


def _node_instances(world: World, ids: InstanceIds) -> dict[str, str]:
    taken: dict[str, int] = {}
    out = {}
    for n in world.nodes:
        group = world.groups[n.group].name
        index = taken.get(group, 0)
        out[n.name] = ids[group][index]
        taken[group] = index + 1
    return out


def _node_object(world: World, n: NodeSpec, instance_id: str, now: datetime) -> dict[str, Any]:
    g = world.groups[n.group]
    pool = POOL[g.pool]
    return k.node(
        n.name,
        labels={**pool.node_labels(), "eks.amazonaws.com/capacityType": "ON_DEMAND"},
        instance_type=pool.itype.name,
        zone=g.zone,
        instance_id=instance_id,
        allocatable=pool.itype.allocatable(),
        capacity=pool.itype.capacity(),
        taints=list(pool.taints) or None,
        ready=n.ready,
        ready_since=now - (timedelta(minutes=40) if not n.ready else timedelta(days=10)),
        creation_timestamp=now - timedelta(days=10),
    )


def _controller(world: World, index: int) -> Controller:
    return world.controllers[index] if index >= 0 else world.daemonsets[-1 - index]


def dump_objects(world: World, now: datetime, ids: InstanceIds | None = None) -> Iterator[dict[str, Any]]:
    """Every object of the dump, in the order `kubectl get nodes,daemonsets,pdb,pods -A -o json` prints."""
    ids = ids if ids is not None else default_instance_ids(world)
    instance_of = _node_instances(world, ids)
    for n in world.nodes:
        yield _node_object(world, n, instance_of[n.name], now)
    for d in world.daemonsets:
        yield _daemonset_object(d, now)
    for index, allowed in world.pdbs:
        yield _pdb_object(world.controllers[index], allowed, now)
    names = [n.name for n in world.nodes]
    for controller, ordinal, node_index in world.pods:
        c = _controller(world, controller)
        yield pod_object(c, c.pod_name(ordinal), names[node_index] if node_index >= 0 else "", now)


# ------------------------------------------------------------------------------------ the model


def cluster_state(world: World, now: datetime, ids: InstanceIds | None = None) -> ClusterState:
    """The ClusterState reading `dump_objects(world, now, ids)` gives, built without the JSON of
    150,000 pods: one representative per controller goes through the real reader, then is cloned."""
    ids = ids if ids is not None else default_instance_ids(world)
    instance_of = _node_instances(world, ids)
    reader = ObjectReader()
    nodes = [reader.node(_node_object(world, n, instance_of[n.name], now)) for n in world.nodes]
    daemonsets = [reader.daemonset(_daemonset_object(d, now)) for d in world.daemonsets]
    pdbs = [reader.pdb(_pdb_object(world.controllers[i], allowed, now)) for i, allowed in world.pdbs]
    representatives: dict[tuple[int, bool], Pod] = {}
    names = [n.name for n in world.nodes]
    pods: list[Pod] = []
    for controller, ordinal, node_index in world.pods:
        running = node_index >= 0
        rep = representatives.get((controller, running))
        c = _controller(world, controller)
        if rep is None:
            rep = reader.pod(pod_object(c, "representative", "node" if running else "", now))
            representatives[(controller, running)] = rep
        name = c.pod_name(ordinal)
        labels = rep.labels
        if c.kind == "StatefulSet":
            labels = {**labels, "statefulset.kubernetes.io/pod-name": name}
        pods.append(
            Pod(
                namespace=rep.namespace,
                name=name,
                uid=k.make_uid("Pod", c.namespace, name),
                requests=rep.requests,
                node_name=names[node_index] if running else "",
                phase=rep.phase,
                created=rep.created,
                labels=labels,
                annotations=rep.annotations,
                owner=rep.owner,
                priority=rep.priority,
                scheduling=rep.scheduling,
                volumes=rep.volumes,
                scheduled_status=rep.scheduled_status,
                scheduled_reason=rep.scheduled_reason,
                scheduled_since=rep.scheduled_since,
            )
        )
    return ClusterState(
        nodes=tuple(sorted(nodes, key=lambda n: n.name)),
        pods=tuple(sorted(pods, key=lambda p: (p.namespace, p.name))),
        pdbs=tuple(sorted(pdbs, key=lambda p: (p.namespace, p.name))),
        daemonsets=tuple(sorted(daemonsets, key=lambda d: (d.namespace, d.name))),
        read_at=now,
    )


def asg_tags(pool: Pool) -> dict[str, str]:
    """Discovery tags plus the node-template tags cluster-autoscaler users put on such groups."""
    tags = dict(DISCOVERY_TAGS)
    for key, value in pool.node_labels().items():
        tags[f"{TEMPLATE_TAG}/label/{key}"] = value
    for taint in pool.taints:
        key, _, rest = taint.partition("=")
        tags[f"{TEMPLATE_TAG}/taint/{key}"] = rest
    return tags


def node_groups(world: World, now: datetime, ids: InstanceIds | None = None) -> tuple[NodeGroup, ...]:
    """What discovery describes for the 200 ASGs (instances InService; templates from the instance type
    and the node-template tags)."""
    ids = ids if ids is not None else default_instance_ids(world)
    groups = []
    for g in world.groups:
        pool = POOL[g.pool]
        it = pool.itype
        instances = tuple(
            Instance(
                instance_id,
                "InService",
                g.zone,
                it.name,
                now - (timedelta(minutes=3) if index >= g.size else timedelta(days=10)),
            )
            for index, instance_id in enumerate(ids[g.name])
        )
        capacity = {"cpu": it.vcpus * 1000, "memory": it.capacity_ki * 1024, "pods": it.max_pods}
        allocatable = {"cpu": it.alloc_cpu, "memory": it.alloc_mem, "pods": it.max_pods}
        if it.gpus:
            capacity[GPU] = allocatable[GPU] = it.gpus
        labels = {
            "kubernetes.io/arch": "amd64",
            "kubernetes.io/os": "linux",
            "node.kubernetes.io/instance-type": it.name,
            "topology.kubernetes.io/region": REGION,
            "topology.kubernetes.io/zone": g.zone,
            **pool.node_labels(),
        }
        taints = tuple(_taint(t) for t in pool.taints)
        groups.append(
            NodeGroup(
                name=g.name,
                min_size=g.min_size,
                max_size=g.max_size,
                desired=g.size + g.unregistered,
                instances=tuple(sorted(instances, key=lambda i: i.instance_id)),
                zones=(g.zone,),
                tags=asg_tags(pool),
                suspended_processes=("AZRebalance",),
                instance_types=(it.name,),
                asg_min_size=g.min_size,
                asg_max_size=g.max_size,
                template=NodeTemplate(
                    instance_type=it.name,
                    labels=labels,
                    taints=taints,
                    capacity=Resources(capacity),
                    allocatable=Resources(allocatable),
                    source=f"asg {g.name} ({it.name})",
                ),
            )
        )
    return tuple(sorted(groups, key=lambda x: x.name))


def _taint(text: str) -> Taint:
    body, _, effect = text.rpartition(":")
    key, _, value = body.partition("=")
    return Taint(key, value, effect)


def planner_memory(
    world: World, now: datetime, unneeded_for: timedelta = timedelta(minutes=30)
) -> PlannerMemory:
    """As the state branch would hold it: every under-threshold node unneeded for half an hour, past
    the 10-minute unneededTime, so scale-down proposes removals."""
    return PlannerMemory(unneeded_since={name: now - unneeded_for for name in world.under})
