"""The configuration: validated against schemas/config.schema.json, returned as frozen dataclasses.

The schema is the single source of the defaults; this module only converts units (durations to
timedelta, `min:max` ranges to ints) so nothing downstream parses strings.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from reconciler.config.documents import check, fill_defaults, load_schema, plain, read_yaml
from reconciler.domain.durations import parse_duration
from reconciler.domain.errors import UserError
from reconciler.domain.quantity import int_value, milli_value
from reconciler.domain.windows import HORIZON, MAX_DURATION, Window, next_opening, parse_cron, zone

DEFAULT_CONFIG_FILE = "asg-reconciler.yaml"
CONFIG_ENV = "ASG_RECONCILER_CONFIG"


@dataclass(frozen=True)
class NodeGroupsConfig:
    auto_discovery: tuple[str, ...] = ()
    explicit: tuple[str, ...] = ()


@dataclass(frozen=True)
class ExpanderOptions:
    priorities: tuple[tuple[int, tuple[str, ...]], ...] = ()  # highest priority first
    random_seed: int = 0
    # the price expander and the plan's cost (planning/pricing.py): USD per hour by instance type
    prices: Mapping[str, float] = field(default_factory=dict)  # on-demand, over the shipped table
    spot_prices: Mapping[str, float] = field(default_factory=dict)  # spot, over the discount
    spot_discount: float = 0.6  # spot priced at on-demand x (1 - discount) where no spot price is given


@dataclass(frozen=True)
class ScaleUpConfig:
    max_step: int = 20
    max_node_provision_time: timedelta = timedelta(minutes=15)
    review: bool = False
    new_pod_delay: timedelta = timedelta(0)
    expendable_priority_cutoff: int = -10
    balance_similar_node_groups: bool = False
    initial_backoff: timedelta = timedelta(minutes=5)
    max_backoff: timedelta = timedelta(minutes=30)
    # a group with no failure for this long starts its next backoff at initial_backoff again (CA's
    # --node-group-backoff-reset-timeout)
    backoff_reset_timeout: timedelta = timedelta(hours=3)


@dataclass(frozen=True)
class ScaleDownConfig:
    enabled: bool = True
    utilization_threshold: float = 0.5
    gpu_utilization_threshold: float = 0.5
    unneeded_time: timedelta = timedelta(minutes=10)
    unready_time: timedelta = timedelta(minutes=20)
    delay_after_scale_up: timedelta = timedelta(minutes=10)
    max_nodes_per_plan: int = 10
    proposal_ttl: timedelta = timedelta(hours=24)
    skip_nodes_with_local_storage: bool = True
    skip_nodes_with_system_pods: bool = True
    skip_nodes_with_custom_controller_pods: bool = True
    ignore_daemonsets_utilization: bool = False
    blocking_system_pod_disruption_timeout: timedelta = timedelta(hours=1)
    # when approved removals may be applied (reconciler/domain/windows.py); empty: any time
    windows: tuple[Window, ...] = ()


@dataclass(frozen=True)
class LimitsConfig:
    """Cluster-wide limits as cluster-autoscaler takes them; 0 max means unlimited."""

    max_nodes_total: int = 0
    cores_min: int = 0
    cores_max: int = 320000
    memory_min_gb: int = 0
    memory_max_gb: int = 6400000


@dataclass(frozen=True)
class GitConfig:
    url: str = ""
    branch: str = "main"
    path: str = ""
    work_dir: str = ""
    token_env: str = "GIT_TOKEN"
    timeout: timedelta = timedelta(seconds=60)  # each fetch, ls-remote or push, then killed
    token_file: str = ""  # read at every fetch and push (a refreshed GitHub App token); wins over token_env
    author_name: str = "asg-reconciler"
    author_email: str = "asg-reconciler@users.noreply.local"


@dataclass(frozen=True)
class ForgeConfig:
    type: str = "none"
    repo: str = ""
    token_env: str = "GITHUB_TOKEN"
    base_url: str = "https://api.github.com"
    token_file: str = ""  # read at every request (a refreshed GitHub App token); wins over token_env
    bot_login: str = ""  # the login the token comments as, e.g. my-app[bot] (App tokens cannot ask)


@dataclass(frozen=True)
class ApprovalConfig:
    mode: str = "signed"
    allowed_signers: str = "/etc/asg-reconciler/allowed_signers"
    min_approvals: int = 1
    # github-reviews: logins whose approvals never count, such as the plan bot's machine account
    ignore_reviewers: tuple[str, ...] = ()


@dataclass(frozen=True)
class ApplyConfig:
    max_step: int = 20
    drain_timeout: timedelta = timedelta(minutes=10)
    max_parallel_drains: int = 1
    drift: str = "warn"
    max_grace_period: timedelta = timedelta(minutes=10)
    allow_az_rebalance: bool = False
    signing_key: str = "/etc/asg-reconciler/record-key"  # apply's own key: signs its records
    record_signers: str = ""  # public keys whose records readers trust (apply trusts its own too)
    suspend: bool = False  # the kill switch in apply's own config (docs/apply.md "Kill switch")


@dataclass(frozen=True)
class RunConfig:
    stages: tuple[str, ...] = ("plan",)
    interval: timedelta = timedelta(seconds=30)
    apply_poll_interval: timedelta = timedelta(seconds=5)
    metrics_address: str = ":8085"  # "": no metrics or health server
    namespace: str = ""  # "": the pod's own namespace, else kube-system
    # new unschedulable pods are planned in batches (runtime/pod_batches.py, Karpenter's batcher):
    debounce: timedelta = timedelta(seconds=1)  # a batch closes after this long without a new pod
    batch_max_duration: timedelta = timedelta(seconds=10)  # ... or once it has been open this long
    batch_min_interval: timedelta = timedelta(seconds=5)  # between two pod-triggered cycles
    max_backoff: timedelta = timedelta(minutes=5)  # failed cycles back off exponentially up to this
    lease_duration: timedelta = timedelta(seconds=15)  # leader election, client-go's defaults
    renew_deadline: timedelta = timedelta(seconds=10)
    retry_period: timedelta = timedelta(seconds=2)
    shutdown_grace_period: timedelta = timedelta(seconds=30)  # the pod's terminationGracePeriodSeconds
    resync_interval: timedelta = timedelta(minutes=10)  # the plan stage's watch-fed cache lists again


@dataclass(frozen=True)
class AwsConfig:
    # how long `run` trusts what it described of the ASGs (cluster-autoscaler's is a fixed minute)
    refresh_interval: timedelta = timedelta(minutes=1)


@dataclass(frozen=True)
class KubernetesConfig:
    kubeconfig: str = ""
    context: str = ""
    page_size: int = 500
    request_timeout: timedelta = timedelta(seconds=30)  # every API call, connect and read
    autoscaler_lease: str = "cluster-autoscaler"  # cluster-autoscaler's --lease-resource-name
    autoscaler_status: str = "cluster-autoscaler-status"  # its --status-config-map-name
    # where it may run (its --namespace): only there is a Lease or status ConfigMap evidence of it
    autoscaler_namespaces: tuple[str, ...] = ("kube-system",)


@dataclass(frozen=True)
class NodeTemplatesConfig:
    """How allocatable is derived for a node that does not exist yet (docs/node-templates.md)."""

    vm_memory_overhead_percent: float = 0.075
    reserved_cpu_milli: int | None = None  # None: the EKS bootstrap formula
    reserved_memory: int | None = None  # bytes; None: the EKS formula 255Mi + 11Mi per pod
    eviction_hard_memory: int = 100 * 2**20
    max_pods: int | None = None  # None: the VPC CNI formula from the ENI limits


@dataclass(frozen=True)
class Config:
    cluster: str
    region: str = ""
    node_groups: NodeGroupsConfig = NodeGroupsConfig()
    expander: tuple[str, ...] = ("least-waste",)
    expander_options: ExpanderOptions = ExpanderOptions()
    scale_up: ScaleUpConfig = ScaleUpConfig()
    scale_down: ScaleDownConfig = ScaleDownConfig()
    limits: LimitsConfig = LimitsConfig()
    git: GitConfig = GitConfig()
    forge: ForgeConfig = ForgeConfig()
    approval: ApprovalConfig = ApprovalConfig()
    apply: ApplyConfig = ApplyConfig()
    run: RunConfig = RunConfig()
    aws: AwsConfig = AwsConfig()
    kubernetes: KubernetesConfig = KubernetesConfig()
    node_templates: NodeTemplatesConfig = NodeTemplatesConfig()
    source: str = field(default="", compare=False)

    @property
    def manifest_path(self) -> str:
        return self.git.path or f"capacity/{self.cluster}.yaml"


def config_path(explicit: str | None) -> Path:
    """`--config`, else `$ASG_RECONCILER_CONFIG`, else `asg-reconciler.yaml`."""
    return Path(explicit or os.environ.get(CONFIG_ENV) or DEFAULT_CONFIG_FILE)


def load_config(path: Path) -> Config:
    """Read, validate and convert a config file; any problem is a UserError naming file, key and fix."""
    document = read_yaml(path)
    return config_from_document(document, str(path))


def config_from_document(document: Any, label: str) -> Config:
    if not isinstance(document, dict):
        raise UserError(f"{label}: the config must be a YAML mapping with at least `cluster:`")
    problems = check(document, "config", label)
    if problems:
        raise UserError(str(problems[0]) + (f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""))
    schema = load_schema("config")
    data = fill_defaults(plain(document), schema, schema)
    try:
        return _build(data, label, document)
    except ValueError as exc:  # a duration the schema's pattern admits but timedelta cannot hold
        raise UserError(f"{label}: {exc} (use a realistic value such as 10m or 24h)") from None


def _duration(value: str) -> timedelta:
    return parse_duration(value)  # the schema pattern already guarantees the form


def _range(value: str) -> tuple[int, int]:
    low, high = value.split(":")
    return int(low), int(high)


def _check_run_timing(run: dict[str, Any], label: str) -> None:
    """client-go's own rule: a leader must give up (renewDeadline) before its Lease can be taken
    (leaseDuration), and retry several times within the deadline. Intervals above 0; a batch of
    pending pods may stay open at least as long as the idle period that closes it."""
    lease, renew, retry = (_duration(run[k]) for k in ("leaseDuration", "renewDeadline", "retryPeriod"))
    if not lease > renew > retry * 1.2 > timedelta(0):
        raise UserError(
            f"{label}: run.renewDeadline: needs leaseDuration > renewDeadline > 1.2 x retryPeriod > 0 "
            f"(got {run['leaseDuration']}, {run['renewDeadline']}, {run['retryPeriod']}; "
            "client-go's defaults are 15s, 10s, 2s)"
        )
    for key in ("interval", "applyPollInterval", "resyncInterval"):
        if _duration(run[key]) <= timedelta(0):
            raise UserError(f"{label}: run.{key}: must be above 0 (e.g. 30s)")
    if _duration(run["batchMaxDuration"]) < _duration(run["debounce"]):
        raise UserError(
            f"{label}: run.batchMaxDuration: must be at least run.debounce, the idle period that "
            f"closes a batch (got {run['batchMaxDuration']} and {run['debounce']}; Karpenter's defaults "
            "are 10s and 1s)"
        )


def _where(label: str, document: Any, path: tuple[str | int, ...]) -> str:
    """`file:line` of the deepest key along `path` in the round-trip document (just `file` without)."""
    node, line = document, None
    for key in path:
        try:
            position = node.lc.key(key) if isinstance(key, str) else node.lc.item(key)
            node = node[key]
        except (AttributeError, KeyError, IndexError, TypeError):
            break
        line = position[0] + 1
    return f"{label}:{line}" if line else label


def _windows(items: list[dict[str, Any]], label: str, document: Any) -> tuple[Window, ...]:
    """scaleDown.windows; what the schema cannot see (a cron field out of range, a zone that does
    not exist, a duration of 0 or above MAX_DURATION, windows under which no removal could ever go)
    is one line naming the file, line, key and fix."""
    windows = []
    for index, item in enumerate(items):
        key = f"scaleDown.windows.{index}"

        def where(name: str, index: int = index) -> str:
            return _where(label, document, ("scaleDown", "windows", index, name))

        schedule, zone_name = item["schedule"], item.get("timeZone", "UTC")
        try:
            parse_cron(schedule)
        except ValueError as exc:
            raise UserError(
                f"{where('schedule')}: {key}.schedule: {exc} (use minute hour day-of-month month "
                'day-of-week, e.g. "0 9 * * 1-5" for 09:00 on weekdays)'
            ) from None
        try:
            zone(zone_name)
        except ValueError as exc:
            raise UserError(f"{where('timeZone')}: {key}.timeZone: {exc}") from None
        try:
            duration: timedelta | None = _duration(item["duration"])
        except ValueError:  # the schema checked the form: too long to be a time at all
            duration = None
        if duration is not None and duration <= timedelta(0):
            raise UserError(
                f"{where('duration')}: {key}.duration: {item['duration']} must be above 0 "
                "(how long each window stays open, e.g. 8h)"
            )
        if duration is None or duration > MAX_DURATION:
            raise UserError(
                f"{where('duration')}: {key}.duration: {item['duration']} is above {MAX_DURATION.days} "
                f"days ({MAX_DURATION.days * 24}h), the longest a window may stay open (e.g. 8h; for no "
                "limit on when removals go, leave scaleDown.windows out)"
            )
        windows.append(Window(schedule, duration, item.get("maxNodes"), zone_name))
    where_all = _where(label, document, ("scaleDown", "windows"))
    if windows and all(w.blackout for w in windows):
        raise UserError(
            f"{where_all}: scaleDown.windows: every window has maxNodes 0, so no approved removal would "
            "ever be applied (give one a maxNodes above 0, or leave it out; to stop scale-downs, set "
            "scaleDown.enabled: false)"
        )
    if windows and next_opening(windows, datetime.now(UTC)) is None:
        raise UserError(
            f"{where_all}: scaleDown.windows: no approved removal could be applied for the next "
            f"{HORIZON.days // 366} years: whenever a window with maxNodes above 0 is open, one with "
            "maxNodes 0 is open too (move or shorten the maxNodes 0 window, or lengthen the others)"
        )
    return tuple(windows)


def _build(data: dict[str, Any], label: str, document: Any = None) -> Config:
    su, sd, lim = data["scaleUp"], data["scaleDown"], data["limits"]
    cores, memory = _range(lim["cores"]), _range(lim["memory"])
    for name, (low, high) in (("cores", cores), ("memory", memory)):
        if high and low > high:
            raise UserError(f"{label}: limits.{name}: minimum {low} is above maximum {high} (use min:max)")
    for spec in data["nodeGroups"]["explicit"]:
        low, high, _ = spec.split(":", 2)
        if int(low) > int(high):
            raise UserError(
                f"{label}: nodeGroups.explicit: {spec!r} has min {low} above max {high} (use min:max:name)"
            )
    _check_run_timing(data["run"], label)
    nt = data["nodeTemplates"]
    git = data["git"]
    forge, approval, apply, run, kube = (
        data["forge"],
        data["approval"],
        data["apply"],
        data["run"],
        data["kubernetes"],
    )
    if forge["type"] == "github" and not forge.get("repo"):
        raise UserError(f"{label}: forge.repo: required when forge.type is github (use owner/name)")
    if approval["mode"] == "github-reviews" and forge["type"] != "github":
        raise UserError(
            f"{label}: approval.mode: github-reviews needs forge.type github "
            "(set forge.type and forge.repo, or use approval.mode signed)"
        )
    priorities = sorted(
        ((int(k), tuple(v)) for k, v in data["expanderOptions"]["priorities"].items()), reverse=True
    )
    for priority, patterns in data["expanderOptions"]["priorities"].items():
        for index, pattern in enumerate(patterns):
            try:
                re.compile(pattern)
            except re.error as exc:
                where = _where(label, document, ("expanderOptions", "priorities", priority, index))
                raise UserError(
                    f"{where}: expanderOptions.priorities.{priority}: {pattern!r} is not a regular"
                    f" expression ({exc.msg} at position {exc.pos}); the priority expander takes regexes"
                    " searched in group names, as cluster-autoscaler's (e.g. .*spot.* rather than *spot*)"
                ) from None
    expander = tuple(data["expander"].split(","))
    if "priority" in expander and not priorities:
        raise UserError(
            f"{label}: expanderOptions.priorities: required by the priority expander "
            '(map priorities to group-name regexes, e.g. {"10": [".*"]})'
        )
    return Config(
        cluster=data["cluster"],
        region=data.get("region", ""),
        node_groups=NodeGroupsConfig(
            tuple(data["nodeGroups"]["autoDiscovery"]), tuple(data["nodeGroups"]["explicit"])
        ),
        expander=expander,
        expander_options=ExpanderOptions(
            tuple(priorities),
            data["expanderOptions"]["randomSeed"],
            prices=dict(data["expanderOptions"]["prices"]),
            spot_prices=dict(data["expanderOptions"]["spotPrices"]),
            spot_discount=data["expanderOptions"]["spotDiscount"],
        ),
        scale_up=ScaleUpConfig(
            max_step=su["maxStep"],
            max_node_provision_time=_duration(su["maxNodeProvisionTime"]),
            review=su["review"],
            new_pod_delay=_duration(su["newPodDelay"]),
            expendable_priority_cutoff=su["expendablePriorityCutoff"],
            balance_similar_node_groups=su["balanceSimilarNodeGroups"],
            initial_backoff=_duration(su["initialBackoff"]),
            max_backoff=_duration(su["maxBackoff"]),
            backoff_reset_timeout=_duration(su["backoffResetTimeout"]),
        ),
        scale_down=ScaleDownConfig(
            enabled=sd["enabled"],
            utilization_threshold=sd["utilizationThreshold"],
            gpu_utilization_threshold=sd["gpuUtilizationThreshold"],
            unneeded_time=_duration(sd["unneededTime"]),
            unready_time=_duration(sd["unreadyTime"]),
            delay_after_scale_up=_duration(sd["delayAfterScaleUp"]),
            max_nodes_per_plan=sd["maxNodesPerPlan"],
            proposal_ttl=_duration(sd["proposalTTL"]),
            skip_nodes_with_local_storage=sd["skipNodesWithLocalStorage"],
            skip_nodes_with_system_pods=sd["skipNodesWithSystemPods"],
            skip_nodes_with_custom_controller_pods=sd["skipNodesWithCustomControllerPods"],
            ignore_daemonsets_utilization=sd["ignoreDaemonSetsUtilization"],
            blocking_system_pod_disruption_timeout=_duration(sd["blockingSystemPodDisruptionTimeout"]),
            windows=_windows(sd["windows"], label, document),
        ),
        limits=LimitsConfig(lim["maxNodesTotal"], cores[0], cores[1], memory[0], memory[1]),
        git=GitConfig(
            url=git.get("url", ""),
            branch=git["branch"],
            path=git.get("path", ""),
            work_dir=git.get("workDir", ""),
            token_env=git["tokenEnv"],
            token_file=git["tokenFile"],
            timeout=_duration(git["timeout"]),
            author_name=git["authorName"],
            author_email=git["authorEmail"],
        ),
        forge=ForgeConfig(
            forge["type"],
            forge.get("repo", ""),
            forge["tokenEnv"],
            forge["baseUrl"],
            token_file=forge["tokenFile"],
            bot_login=forge["botLogin"],
        ),
        approval=ApprovalConfig(
            approval["mode"],
            approval["allowedSigners"],
            approval["minApprovals"],
            tuple(approval["ignoreReviewers"]),
        ),
        apply=ApplyConfig(
            max_step=apply["maxStep"],
            drain_timeout=_duration(apply["drainTimeout"]),
            max_parallel_drains=apply["maxParallelDrains"],
            drift=apply["drift"],
            max_grace_period=_duration(apply["maxGracePeriod"]),
            allow_az_rebalance=apply["allowAZRebalance"],
            signing_key=apply["signingKey"],
            record_signers=apply["recordSigners"],
            suspend=apply["suspend"],
        ),
        run=RunConfig(
            stages=tuple(run["stages"]),
            interval=_duration(run["interval"]),
            apply_poll_interval=_duration(run["applyPollInterval"]),
            metrics_address=run["metricsAddress"],
            namespace=run["namespace"],
            debounce=_duration(run["debounce"]),
            batch_max_duration=_duration(run["batchMaxDuration"]),
            batch_min_interval=_duration(run["batchMinInterval"]),
            max_backoff=_duration(run["maxBackoff"]),
            lease_duration=_duration(run["leaseDuration"]),
            renew_deadline=_duration(run["renewDeadline"]),
            retry_period=_duration(run["retryPeriod"]),
            shutdown_grace_period=_duration(run["shutdownGracePeriod"]),
            resync_interval=_duration(run["resyncInterval"]),
        ),
        aws=AwsConfig(refresh_interval=_duration(data["aws"]["refreshInterval"])),
        kubernetes=KubernetesConfig(
            kube.get("kubeconfig", ""),
            kube.get("context", ""),
            kube["pageSize"],
            _duration(kube["requestTimeout"]),
            kube["clusterAutoscaler"]["leaseName"],
            kube["clusterAutoscaler"]["statusConfigMapName"],
            tuple(kube["clusterAutoscaler"]["namespaces"]),
        ),
        node_templates=NodeTemplatesConfig(
            vm_memory_overhead_percent=nt["vmMemoryOverheadPercent"],
            reserved_cpu_milli=None if nt["reservedCPU"] == "eks" else milli_value(nt["reservedCPU"]),
            reserved_memory=None if nt["reservedMemory"] == "eks" else int_value(nt["reservedMemory"]),
            eviction_hard_memory=int_value(nt["evictionHardMemory"]),
            max_pods=None if nt["maxPods"] == "vpc-cni" else int(nt["maxPods"]),
        ),
        source=label,
    )
