"""The read side of AWS for one process: its clients, the count of what it asked, and what it may
reuse instead of asking again (docs/aws-calls.md).

A one-shot command makes one reader and reads everything fresh (facts that never change come from
the disk cache). `run`'s plan stage keeps its reader across cycles and reuses the ASG descriptions
and the region's scaling policies for `aws.refreshInterval`, as cluster-autoscaler reuses its ASG
cache for a minute. Whatever is reused is dropped at once when a call fails (a deleted or renamed
group must never be acted on from memory) and when apply changed a group (`invalidate`). Apply's
own readers never reuse descriptions: it acts on AWS, so it reads AWS as it is.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import replace

from reconciler.aws.activities import Denied, denied_warning, fetch_launches
from reconciler.aws.cache import FactCache, cache_file
from reconciler.aws.calls import CallCounter
from reconciler.aws.clients import AwsClients, aws_errors, is_aws_endpoint, make_clients
from reconciler.aws.discovery import ClusterView, Described, describe, discover_node_groups
from reconciler.aws.groups import Ec2Facts, RefreshChecker
from reconciler.aws.managed_nodegroups import ManagedNodegroup, NodegroupRef, fetch_managed_nodegroups
from reconciler.config.settings import Config
from reconciler.domain.model import LaunchActivity, NodeGroup


class AwsReader:
    def __init__(
        self, config: Config, *, reuse: bool = False, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self._config = config
        self._clients: AwsClients | None = None
        self.counter = CallCounter()
        self.reuse = reuse
        self._clock = clock
        self._lock = threading.Lock()
        self._described: tuple[Described, float, object] | None = None
        self._refreshes: dict[str, tuple[bool, float]] = {}  # group -> (refresh under way, read at)
        self._nodegroups: dict[NodegroupRef, tuple[ManagedNodegroup, float]] = {}  # (answer, read at)
        # group -> (its launch attempts, read at, (desired, instances) when read)
        self._launches: dict[str, tuple[tuple[LaunchActivity, ...], float, tuple[int, int]]] = {}
        self._launched: dict[str, Ec2Facts] = {}  # launch times of instances seen without a node
        self._nodes_seen: frozenset[str] = frozenset()  # instances with a node at the last read
        self._generation = 0  # bumped by invalidate(): a read begun before it is not kept
        self._facts: FactCache | None = None

    @property
    def clients(self) -> AwsClients:
        """Made on first use, so a command fails on its config, Git or cluster before on AWS
        credentials, as it did before it had a reader."""
        with self._lock:
            if self._clients is None:
                self._clients = make_clients(self._config)
                self.counter.attach(self._clients.autoscaling)
                self.counter.attach(self._clients.ec2)
                if self._clients.eks is not None:
                    self.counter.attach(self._clients.eks)
            return self._clients

    @property
    def region(self) -> str:
        """The region the clients talk to, as resolved (the config's, else the environment's)."""
        return self.clients.region

    def fits(self, config: Config) -> bool:
        """Whether this reader still reads what `config` asks for (`run` reloads its config)."""
        return config.region == self._config.region

    def node_groups(
        self,
        config: Config,
        view: ClusterView,
        *,
        refreshes: bool = False,
        vet: Callable[[Described], None] = lambda described: None,
    ) -> tuple[NodeGroup, ...]:
        """The groups `config` names, asking AWS only what neither the reusable descriptions nor the
        cluster (`view`) already say; `refreshes`: ask every group about instance refreshes (status)."""
        try:
            described = self._descriptions(config, view)
            vet(described)  # may refuse before anything else is asked (an incomplete snapshot)
            facts = self._facts_for(described)
            groups = discover_node_groups(
                config,
                self.clients.autoscaling,
                self.clients.ec2,
                view,
                refreshes=refreshes,
                described=described,
                facts=facts,
                launched=self._launched,
                managed=self.managed_nodegroups,
            )
            groups = self._with_launches(groups)
        except BaseException:
            self.invalidate()
            raise
        self._launched = {
            i.instance_id: Ec2Facts(i.launch_time, i.instance_type)
            for g in groups
            for i in g.instances
            if i.launch_time is not None
        }
        with self._lock:
            self._nodes_seen = view.registered
        facts.save()
        return groups

    def refreshing(self, names: Iterable[str]) -> frozenset[str]:
        """Those of `names` with an instance refresh under way: one DescribeInstanceRefreshes each
        (`run`'s plan stage reuses an answer for aws.refreshInterval: an open proposal re-planned
        every cycle would ask again every cycle)."""
        checker = RefreshChecker(self.clients.autoscaling)
        max_age = self._config.aws.refresh_interval.total_seconds()
        found: set[str] = set()
        try:
            with aws_errors("looking for instance refreshes"):
                for name in sorted(set(names)):
                    with self._lock:
                        held, generation = self._refreshes.get(name), self._generation
                    if self.reuse and held is not None and 0 <= self._clock() - held[1] < max_age:
                        active = held[0]
                    else:
                        read_at = self._clock()
                        active = checker.active(name)
                        with self._lock:
                            if self._generation == generation:
                                self._refreshes[name] = (active, read_at)
                    if active:
                        found.add(name)
        except BaseException:
            self.invalidate()
            raise
        return frozenset(found)

    def _with_launches(self, groups: tuple[NodeGroup, ...]) -> tuple[NodeGroup, ...]:
        """Each group whose desired is above its instances, with its launch attempts (one
        DescribeScalingActivities each: aws/activities.py); the others as they are, nothing asked.
        `run`'s plan stage reuses an answer for aws.refreshInterval while the group's desired and
        instance count stay what they were when it was read (a new instance or a new desired: asked
        again), like the ASG descriptions it came with."""
        max_age = self._config.aws.refresh_interval.total_seconds()
        found: list[NodeGroup] = []
        denied = False
        with aws_errors("reading scaling activities"):
            for group in groups:
                if not group.unfilled:
                    found.append(group)
                    continue
                shape = (group.desired, len(group.instances))
                with self._lock:
                    held, generation = self._launches.get(group.name), self._generation
                if (
                    self.reuse
                    and held is not None
                    and held[2] == shape
                    and 0 <= self._clock() - held[1] < max_age
                ):
                    launches = held[0]
                elif denied:
                    found.append(replace(group, warnings=(*group.warnings, denied_warning(group.name))))
                    continue
                else:
                    read_at = self._clock()
                    try:
                        launches = fetch_launches(self.clients.autoscaling, group.name)
                    except Denied:
                        denied = True  # asked once per read: the others would be denied too
                        found.append(replace(group, warnings=(*group.warnings, denied_warning(group.name))))
                        continue
                    with self._lock:
                        if self._generation == generation:
                            self._launches[group.name] = (launches, read_at, shape)
                found.append(replace(group, launches=launches))
        return tuple(found)

    def managed_nodegroups(self, refs: Sequence[NodegroupRef]) -> dict[NodegroupRef, ManagedNodegroup]:
        """DescribeNodegroup for each of `refs` not answered within aws.refreshInterval (every time
        for a one-shot command; `run` asks again when a person may have changed the node group)."""
        eks = self.clients.eks
        if eks is None:
            return {}
        max_age = self._config.aws.refresh_interval.total_seconds()
        now = self._clock()
        with self._lock:
            held = {
                ref: self._nodegroups[ref][0]
                for ref in refs
                if self.reuse and ref in self._nodegroups and 0 <= now - self._nodegroups[ref][1] < max_age
            }
            generation = self._generation
        asked = fetch_managed_nodegroups(eks, [ref for ref in refs if ref not in held])
        with self._lock:
            if self._generation == generation:
                self._nodegroups.update(
                    {ref: (answer, now) for ref, answer in asked.items() if not answer.error}
                )
        return {**held, **asked}

    def invalidate(self) -> None:
        """Forget what may have changed: the next read describes the ASGs again."""
        with self._lock:
            self._generation += 1
            self._described = None
            self._refreshes.clear()
            self._launches.clear()
            self._nodegroups.clear()
            if self._facts is not None:
                self._facts.forget_aliases()

    def _descriptions(self, config: Config, view: ClusterView) -> Described:
        key = (config.node_groups, config.source)
        max_age = config.aws.refresh_interval.total_seconds()
        with self._lock:
            held, seen, generation = self._described, self._nodes_seen, self._generation
        if (
            self.reuse
            and held is not None
            and held[2] == key
            and 0 <= self._clock() - held[1] < max_age
            and not _instances_moved(held[0], seen, view)
        ):
            return held[0]
        read_at = self._clock()
        described = describe(config, self.clients.autoscaling)
        with self._lock:
            # not invalidated meanwhile (apply wrote during the read); an empty answer is not kept: the
            # group a person is tagging or creating right now is found at the next cycle
            if self._generation == generation and described.found:
                self._described = (described, read_at, key)
        return described

    def _facts_for(self, described: Described) -> FactCache:
        """The disk cache of the account the groups belong to (read from their ARNs: no STS call)."""
        clients = self.clients  # outside the lock: making them takes it
        with self._lock:
            if self._facts is None:
                arn = next((f.asg.get("AutoScalingGroupARN", "") for f in described.found), "")
                parts = arn.split(":")
                account = parts[4] if len(parts) > 4 else ""
                own = (clients.autoscaling, clients.ec2)
                endpoint = " ".join(str(c.meta.endpoint_url) for c in own if not is_aws_endpoint(c))
                self._facts = FactCache(cache_file(account, clients.region, endpoint) if account else None)
            return self._facts


def _instances_moved(described: Described, seen: frozenset[str], view: ClusterView) -> bool:
    """Whether the cluster shows an instance came or went since the descriptions were read: a node
    gone for an instance they list (terminated, a spot interruption: reused, it would look like an
    instance that never registered, proposed for removal and backing its group off), or a node for
    an instance they do not list (launched since). Either way they are read again."""
    listed = {i["InstanceId"] for f in described.found for i in f.asg.get("Instances", [])}
    gone = (seen & listed) - view.registered
    new = view.registered - seen - listed
    return bool(gone or new)
