"""`history --report` over 10,000 capacity commits: <= 5 s, and <= 3x `history --output json` of the
same repository, both timed as the CLI runs them (a new process each, best of N, in alternation).

The capacity repository is written with `git fast-import` in about a second: three clusters'
manifests in capacity/, bot scale-ups, scale-down proposals on side branches merged by people,
cancelled removals, adopted drift, holds set and lifted by hand, people's unrelated commits, and
apply's records (git notes) for most of main's commits, drift and restores among them; one proposal
is left open. Prints one summary line; exits 1 when a target is missed.
"""

from __future__ import annotations

import random
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from reconciler.gitops.records import NOTES_REF, ApplyRecord, GroupRecord, encode_note
from reconciler.gitops.trailers import (
    CapacityMessage,
    Change,
    InstanceRemoval,
    Reason,
    build_message,
    summarize,
)

COMMITS = 10_000
ROUNDS = 5
TARGET_SECONDS = 5.0
TARGET_RATIO = 3.0
START = 1_700_000_000
BOT = ("asg-reconciler", "asg-reconciler@users.noreply.local")
APPLIER = ("asg-reconciler-apply", "asg-reconciler-apply@users.noreply.local")
PEOPLE = (("Alice Admin", "alice@example.com"), ("Bob Builder", "bob@example.com"))
CLUSTERS = {  # name -> (groups, share of the commits)
    "prod-eks": (("general-a", "general-b", "general-c", "spot-batch", "gpu", "memory"), 0.6),
    "staging": (("stg-general", "stg-spot", "stg-arm"), 0.25),
    "batch": (("batch-spot", "batch-ondemand"), 0.15),
}


@dataclass
class _Group:
    desired: int
    removals: list[str] = field(default_factory=list)
    hold: bool = False

    @property
    def target(self) -> int:
        return self.desired - len(self.removals)


@dataclass
class _Commit:
    mark: int
    ref: str
    message: str
    author: tuple[str, str]
    when: int
    parents: tuple[int, ...]
    files: dict[str, str]


def manifest_text(cluster: str, groups: dict[str, _Group]) -> str:
    """A manifest as the bot writes it (docs/manifest.md)."""
    lines = [
        f"# Desired capacity of the Auto Scaling Groups of cluster {cluster}, kept by asg-reconciler.",
        "version: 1",
        f"cluster: {cluster}",
        "",
        "nodeGroups:",
    ]
    for name, group in groups.items():
        lines.append(f"  {name}:")
        if group.removals:
            lines.append("    removeInstances:")
            lines += [f"      - {i}" for i in group.removals]
        else:
            lines.append("    removeInstances: []")
        lines += [
            f"    hold: {'true' if group.hold else 'false'}",
            f"    desired: {group.desired}",
            "    minSize: 0",
            "    maxSize: 500",
        ]
    return "\n".join(lines) + "\n"


class _Writer:
    """Generates the history in memory, then writes it with two `git fast-import` runs."""

    def __init__(self, seed: int, start: int) -> None:
        self.rng = random.Random(seed)
        self.state = {
            c: {g: _Group(self.rng.randint(2, 8)) for g in groups} for c, (groups, _) in CLUSTERS.items()
        }
        self.commits: list[_Commit] = []
        self.records: dict[
            int, list[tuple[int, str, list[tuple[str, str, int, int, tuple[str, ...], str]]]]
        ] = {}
        self.main: int | None = None
        self.when = start
        self.pull = 0
        self.aws = {c: {g: s.target for g, s in groups.items()} for c, groups in self.state.items()}

    def commit(
        self, ref: str, message: str, author: tuple[str, str], parents: tuple[int, ...], files: dict[str, str]
    ) -> int:
        mark = len(self.commits) + 1
        self.commits.append(_Commit(mark, ref, message, author, self.when, parents, files))
        return mark

    def on_main(
        self, message: str, author: tuple[str, str], cluster: str, extra: tuple[int, ...] = ()
    ) -> int:
        files = {f"capacity/{cluster}.yaml": manifest_text(cluster, self.state[cluster])}
        self.main = self.commit(
            "refs/heads/main", message, author, ((self.main,) if self.main else ()) + extra, files
        )
        return self.main

    def record(
        self, mark: int, cluster: str, groups: list[tuple[str, str, int, int, tuple[str, ...], str]]
    ) -> None:
        self.records.setdefault(mark, []).append((self.when + 20, cluster, groups))

    def apply(self, mark: int, cluster: str) -> None:
        """Apply brings AWS to the manifest (raises; terminates approved removals), recorded."""
        done = []
        for name, group in self.state[cluster].items():
            aws = self.aws[cluster][name]
            if group.target > aws:
                done.append(
                    (name, "scale-up", aws, group.target, (), f"raised desired {aws} -> {group.target}")
                )
            elif group.removals:
                after = aws - len(group.removals)
                detail = "; ".join(f"drained node of {i} and terminated {i}" for i in group.removals)
                done.append((name, "scale-down", aws, after, tuple(group.removals), detail))
                group.desired -= len(group.removals)
                group.removals.clear()
            else:
                continue
            self.aws[cluster][name] = group.target
        if done:
            self.record(mark, cluster, done)

    def step(self) -> None:
        rng = self.rng
        self.when += rng.randint(30, 900)
        cluster = rng.choices(list(CLUSTERS), [share for _, share in CLUSTERS.values()])[0]
        groups = self.state[cluster]
        roll = rng.random()
        free = [g for g, s in groups.items() if not s.hold]
        small = [g for g in free if groups[g].target < 40]  # clusters grow and shrink, within bounds
        if (roll < 0.5 and small) or self.main is None:  # the bot scales up
            chosen = rng.sample(small or list(groups), min(len(small or groups), rng.randint(1, 2)))
            changes = []
            for name in chosen:
                before = groups[name].target
                groups[name].desired += rng.randint(1, 4)
                changes.append(Change(name, before, groups[name].target))
            reasons = tuple(
                Reason(c.group, f"{rng.randint(1, 40)} pending pod(s) need {c.after - c.before} × m5.large")
                for c in changes
            )
            mark = self.on_main(
                build_message(CapacityMessage(cluster, summarize(changes), tuple(changes), reasons)),
                BOT,
                cluster,
            )
            if rng.random() < 0.9:
                self.apply(mark, cluster)
        elif roll < 0.62:  # a scale-down proposal, merged by a person
            shrinkable = [g for g in free if groups[g].target >= 2] or list(groups)
            name = (
                max(shrinkable, key=lambda g: groups[g].target)
                if rng.random() < 0.5
                else rng.choice(shrinkable)
            )
            group = groups[name]
            take = min(group.target, rng.randint(1, 3))
            instances = [f"i-{rng.getrandbits(68):017x}" for _ in range(take)]
            before = group.target
            branch = f"asg-reconciler/{cluster}/scale-down"
            group.removals += instances
            message = CapacityMessage(
                cluster,
                summarize((Change(name, before, group.target),)),
                (Change(name, before, group.target),),
                (Reason(name, f"{take} node(s) under 50% utilisation for 10m; their pods fit elsewhere"),),
                removals=tuple(InstanceRemoval(name, i) for i in instances),
                body="Instances, nodes and why they are removable are in the pull request.",
                proposal=branch,
            )
            files = {f"capacity/{cluster}.yaml": manifest_text(cluster, groups)}
            side = self.commit(
                f"refs/heads/{branch}",
                build_message(message),
                BOT,
                ((self.main,) if self.main else ()),
                files,
            )
            self.when += rng.randint(600, 36_000)  # the time it waits for a person
            self.pull += 1
            person = rng.choice(PEOPLE)
            mark = self.on_main(
                f"Merge pull request #{self.pull} from org/{branch}\n", person, cluster, (side,)
            )
            if rng.random() < 0.85:
                self.apply(mark, cluster)
            elif rng.random() < 0.5:  # cancelled before apply: pods went pending again
                cancelled = list(group.removals)
                group.removals.clear()
                change = Change(name, group.target - len(cancelled), group.target)
                reason = Reason(
                    name, f"cancel approved removal of {', '.join(cancelled)}: pending pods need the capacity"
                )
                self.when += 60
                self.on_main(
                    build_message(CapacityMessage(cluster, summarize((change,)), (change,), (reason,))),
                    BOT,
                    cluster,
                )
        elif roll < 0.68:  # drift: someone lowers desired by hand; apply notices it and restores
            name = rng.choice(list(groups))
            aws = self.aws[cluster][name]
            if aws >= 1 and self.main is not None:
                lowered = aws - 1
                self.record(
                    self.main,
                    cluster,
                    [
                        (
                            name,
                            "scale-up",
                            lowered,
                            aws,
                            (),
                            f"drift: desired lowered outside the tool from {aws} to {lowered}"
                            " since the last apply; "
                            f"raised desired {lowered} -> {aws}",
                        )
                    ],
                )
        elif roll < 0.72:  # drift adopted into Git
            name = rng.choice(free or list(groups))
            before = groups[name].target
            groups[name].desired = max(
                len(groups[name].removals), groups[name].desired + rng.choice((-1, 1, 2))
            )
            change = Change(name, before, groups[name].target)
            self.aws[cluster][name] = groups[name].target
            reason = Reason(
                name,
                f"desired changed outside the tool ({before} -> {change.after}), adopted (apply.drift adopt)",
            )
            message = CapacityMessage(
                cluster, f"adopt {change} (set outside the tool)", (change,), (reason,), source="external"
            )
            self.on_main(build_message(message), BOT, cluster)
        elif roll < 0.74:  # a person holds a group, or lifts the hold
            name = rng.choice(list(groups))
            groups[name].hold = not groups[name].hold
            verb = "Hold" if groups[name].hold else "Release"
            self.on_main(f"{verb} {name} during the rollout\n", rng.choice(PEOPLE), cluster)
        else:  # people's other commits
            mark = len(self.commits) + 1
            files = {"README.md": f"Capacity of our clusters (revision {mark}).\n"}
            self.main = self.commit(
                "refs/heads/main",
                "Update the README\n",
                rng.choice(PEOPLE),
                ((self.main,) if self.main else ()),
                files,
            )

    def open_proposal(self) -> None:
        cluster, name = "prod-eks", "general-a"
        group = self.state[cluster][name]
        before = group.target
        instance = f"i-{self.rng.getrandbits(68):017x}"
        group.removals.append(instance)
        change = Change(name, before, group.target)
        message = CapacityMessage(
            cluster,
            summarize((change,)),
            (change,),
            (Reason(name, "1 node(s) under 50% utilisation for 10m; their pods fit elsewhere"),),
            removals=(InstanceRemoval(name, instance),),
            proposal=f"asg-reconciler/{cluster}/scale-down",
        )
        files = {f"capacity/{cluster}.yaml": manifest_text(cluster, self.state[cluster])}
        self.when += 60
        self.commit(
            f"refs/heads/asg-reconciler/{cluster}/scale-down",
            build_message(message),
            BOT,
            (self.main,) if self.main else (),
            files,
        )
        group.removals.remove(instance)

    def write(self, repo: Path) -> None:
        stream: list[bytes] = []
        for c in self.commits:
            message = c.message.encode()
            person = f"{c.author[0]} <{c.author[1]}> {c.when} +0000"
            stream.append(f"commit {c.ref}\nmark :{c.mark}\nauthor {person}\ncommitter {person}\n".encode())
            stream.append(f"data {len(message)}\n".encode() + message + b"\n")
            if c.parents:
                stream.append(f"from :{c.parents[0]}\n".encode())
            stream += [f"merge :{p}\n".encode() for p in c.parents[1:]]
            for name, text in c.files.items():
                data = text.encode()
                stream.append(f"M 100644 inline {name}\ndata {len(data)}\n".encode() + data + b"\n")
            stream.append(b"\n")
        with tempfile.TemporaryDirectory() as scratch:
            marks_file = Path(scratch, "marks")
            subprocess.run(
                ["git", "fast-import", "--quiet", "--force", f"--export-marks={marks_file}"],
                cwd=repo,
                input=b"".join(stream),
                check=True,
                capture_output=True,
            )
            marks = {
                int(m[1:]): sha for m, sha in (line.split() for line in marks_file.read_text().splitlines())
            }
        notes = [
            f"commit {NOTES_REF}\ncommitter apply <apply@example.com> {self.when} +0000\n".encode()
            + b"data 7\nrecords\n"
        ]
        for mark, runs in self.records.items():
            sha = marks[mark]
            records = [
                ApplyRecord(
                    sha,
                    datetime.fromtimestamp(at, UTC),
                    True,
                    tuple(
                        GroupRecord(g, action, b, a, tuple(t), detail)
                        for g, action, b, a, t, detail in groups
                    ),
                    applier=APPLIER[0],
                    cluster=cluster,
                )
                for at, cluster, groups in runs
            ]
            data = encode_note(records).encode()
            notes.append(f"N inline {sha}\ndata {len(data)}\n".encode() + data + b"\n")
        subprocess.run(
            ["git", "fast-import", "--quiet"],
            cwd=repo,
            input=b"".join(notes),
            check=True,
            capture_output=True,
        )


def build_capacity_repo(repo: Path, commits: int, *, seed: int = 0, start: int = START) -> int:
    """A bare capacity repository at `repo` with about `commits` commits from `start` (seconds since
    the epoch) on; returns how many apply records its notes hold."""
    subprocess.run(["git", "init", "--quiet", "--bare", "--initial-branch=main", str(repo)], check=True)
    writer = _Writer(seed, start)
    while len(writer.commits) < commits:
        writer.step()
    writer.open_proposal()
    writer.write(repo)
    merged = subprocess.run(
        ["git", "for-each-ref", "--merged=main", "--format=%(refname)", "refs/heads/asg-reconciler/"],
        cwd=repo,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    for ref in merged:  # merged proposals' branches are deleted, as a forge does
        subprocess.run(["git", "update-ref", "-d", ref], cwd=repo, check=True)
    return sum(len(runs) for runs in writer.records.values())


def _cli(config: Path, *args: str) -> float:
    started = time.perf_counter()
    subprocess.run(
        [sys.executable, "-m", "reconciler", "history", "--config", str(config), *args],
        check=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    return time.perf_counter() - started


def main() -> int:
    with tempfile.TemporaryDirectory() as scratch:
        root = Path(scratch)
        records = build_capacity_repo(root / "capacity.git", COMMITS, seed=1)
        config = root / "asg-reconciler.yaml"
        config.write_text(
            f"cluster: prod-eks\ngit: {{url: '{root / 'capacity.git'}', workDir: '{root / 'work'}'}}\n"
        )
        report = root / "report.html"
        _cli(config, "--output", "json")  # the first run clones
        times: dict[str, list[float]] = {"json": [], "report": []}
        for _ in range(ROUNDS):
            times["json"].append(_cli(config, "--output", "json"))
            times["report"].append(_cli(config, "--report", str(report)))
        size = report.stat().st_size
    json_s, report_s = min(times["json"]), min(times["report"])
    ratio = report_s / json_s
    ok = report_s <= TARGET_SECONDS and ratio <= TARGET_RATIO
    print(
        f"history --report: {COMMITS} commits ({records} apply records), {size // 1024} KiB of HTML:"
        f" report {report_s * 1000:.0f} ms, --output json {json_s * 1000:.0f} ms, ratio {ratio:.2f}"
        f" (targets <= {TARGET_SECONDS:.0f} s and <= {TARGET_RATIO:.0f}x): {'ok' if ok else 'MISSED'}"
    )
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
