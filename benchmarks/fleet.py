"""Many clusters, one capacity repo: 20 plan processes push scale-ups to one `git daemon` remote at once.

Each writer is a real OS process running the project's push path (`WorkingCopy.update`, what
`publish` calls for main) for its own cluster and manifest (`clusters/cNN/capacity.yaml`). Each
round releases all of them together, as a fleet-wide event makes every cluster plan at the same
moment: each fetches everything (as every plan starts), plans for 0.1-0.3 s, decides one scale-up
and pushes it; the time from "plan decided" to "pushed" is measured; 5 rounds keep the contention
up. Afterwards the remote is checked: every intended commit on main exactly once, main linear (each
commit's parent the tip before it: a fresh rebase), each commit touching only its own manifest,
every manifest at its final value. Prints p50/p99/max of the pushed commits, the rejected pushes
(retries), the commits given up and the wall time of the rounds; exits 1 when p99 is over 5 s or
the check fails. `--writers/--rounds` change the size; tests/integration/test_gitops_fleet.py
runs a smaller fleet through the same code.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import math
import os
import random
import re
import select
import socket
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from reconciler.domain.errors import OperationError
from reconciler.gitops.manifest_edit import ManifestEditor
from reconciler.gitops.repo import Identity, Update, WorkingCopy
from reconciler.gitops.trailers import CapacityMessage, Change, Reason, build_message
from tests.support.git import ALICE, BOT, FastCommit, fast_import, free_port, git, init_bare

WRITERS = 20
ROUNDS = 5
TARGET_P99 = 5.0
PLANNING = (0.1, 0.3)  # seconds between a plan's fetch and its decision (AWS, Kubernetes, planner)
HISTORY = 1_000  # earlier commits on main, so fetches negotiate against a repo with a past
GROUP = "general"
START_DESIRED = 3
MARK = "fleet round"  # Capacity-Reason: fleet round cNN/R - one per intended commit
TIMEOUT = 300.0


def cluster_name(n: int) -> str:
    return f"c{n:02d}"


def manifest_path(cluster: str) -> str:
    return f"clusters/{cluster}/capacity.yaml"


def manifest_text(cluster: str, desired: int) -> str:
    return (
        f"# Desired capacity of cluster {cluster}, kept by asg-reconciler.\n"
        "version: 1\n"
        f"cluster: {cluster}\n"
        "nodeGroups:\n"
        f"  {GROUP}:\n"
        "    removeInstances: []\n"
        "    hold: false\n"
        f"    desired: {desired}\n"
        "    minSize: 0\n"
        "    maxSize: 1000\n"
    )


# ------------------------------------------------------------------------------------- the remote


def seed_remote(repo: Path, clusters: Sequence[str], history: int = HISTORY) -> None:
    """main with every cluster's manifest at START_DESIRED after `history` older commits, and each
    cluster's state branch (a fleet repo has them, and a plan's full fetch sees them)."""
    init_bare(repo)
    commits: list[FastCommit] = []
    when = 1_700_000_000
    for n in range(history):
        cluster = clusters[n % len(clusters)]
        value = START_DESIRED if n >= history - len(clusters) else 1 + n % 7
        parents = (n,) if n else ()
        files = {manifest_path(c): manifest_text(c, START_DESIRED) for c in clusters} if n == 0 else {}
        files[manifest_path(cluster)] = manifest_text(cluster, value)
        message = f"capacity({cluster}): set {GROUP} to {value}\n"
        commits.append(FastCommit(n + 1, "refs/heads/main", message, BOT, when + 60 * n, parents, files))
    for m, cluster in enumerate(clusters, start=history + 1):
        state = {"state.json": json.dumps({"since": {}, "backoffs": {}, "cluster": cluster}) + "\n"}
        ref = f"refs/heads/asg-reconciler/{cluster}/state"
        commits.append(FastCommit(m, ref, "state\n", BOT, when + 60 * m, (), state))
    if history == 0:
        files = {manifest_path(c): manifest_text(c, START_DESIRED) for c in clusters}
        ALICE.commit(repo, "main", files, "Add the fleet's manifests")
    fast_import(repo, commits)


@contextlib.contextmanager
def serve(root: Path) -> Iterator[str]:
    """`git daemon` serving the bare repositories under `root` with pushes on; yields the base URL."""
    port = free_port()
    daemon = subprocess.Popen(
        [
            "git",
            "daemon",
            "--reuseaddr",
            "--export-all",
            "--enable=receive-pack",
            # Its default limit of 32 connections counts children still finishing a push (gc --auto)
            # and, when reached, drops a live connection from the same address: here every writer
            # is 127.0.0.1, in a fleet each cluster has its own.
            "--max-connections=0",
            f"--base-path={root}",
            "--listen=127.0.0.1",
            f"--port={port}",
            str(root),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 10
        while True:
            with socket.socket() as sock:
                if sock.connect_ex(("127.0.0.1", port)) == 0:
                    break
            if time.monotonic() > deadline:
                raise RuntimeError(f"git daemon did not listen on port {port}")
            time.sleep(0.02)
        yield f"git://127.0.0.1:{port}"
    finally:
        daemon.terminate()
        daemon.wait(timeout=10)


# ------------------------------------------------------------------------------------- one writer


@dataclass(frozen=True)
class Pushed:
    """One intended commit as its writer saw it."""

    cluster: str
    round: int
    sha: str | None  # None: update gave up (the error says why)
    seconds: float  # plan decided -> pushed (or -> gave up)
    attempts: int  # calls of the change function: 1 + rejected pushes
    error: str = ""
    refetched: int = 0  # the plan's own fetch failed (a connection git daemon dropped) and ran again


def writer(cluster: str, url: str, work: Path, rounds: int, seed: int) -> None:
    """One cluster's plan process: clone, say ready, then for each "go" one plan cycle ending in a
    scale-up, printed as a JSON line."""
    rng = random.Random(seed)
    copy = WorkingCopy(url, work, Identity(BOT.name, BOT.email), token_env="")
    copy.sync()
    print("ready", flush=True)
    for n in range(1, rounds + 1):
        if sys.stdin.readline().strip() != "go":
            return
        refetched = plan_fetch(copy)
        time.sleep(rng.uniform(*PLANNING))
        pushed = dataclasses.replace(scale_up(copy, cluster, n), refetched=refetched)
        print(json.dumps(pushed.__dict__), flush=True)


def plan_fetch(copy: WorkingCopy) -> int:
    """The full fetch every plan starts with (plan_stage.working_copy); when it fails the plan
    fails and the next cycle fetches again, as here at once. How many times it failed."""
    for failed in range(5):
        try:
            copy.sync()
            return failed
        except OperationError:
            time.sleep(0.1)
    copy.sync()
    return 5


def scale_up(copy: WorkingCopy, cluster: str, n: int) -> Pushed:
    """Decide `cluster`'s group one node bigger than on the fetched main and push it as a plan does:
    through `WorkingCopy.update`, whose change function re-plans on whatever main it fetched."""
    path = manifest_path(cluster)
    label = f"main:{path}"
    text = copy.read_file(path, "main")
    assert text is not None, f"{path} is not on main"
    wanted = _desired(ManifestEditor(text, label)) + 1
    calls = 0

    def change(current: str | None) -> Update | None:
        """Our own file, so the decision stands unless main already has it."""
        nonlocal calls
        calls += 1
        assert current is not None
        editor = ManifestEditor(current, label)
        before = _desired(editor)
        if before >= wanted:
            return None
        editor.set_desired(GROUP, wanted)
        message = CapacityMessage(
            cluster=cluster,
            summary=f"scale up {GROUP} {before} -> {wanted}",
            changes=(Change(GROUP, before, wanted),),
            reasons=(Reason("", f"{MARK} {cluster}/{n}"),),
        )
        return Update(editor.render(), build_message(message))

    decided = time.perf_counter()
    try:
        sha, error = copy.update("main", path, change), ""
    except OperationError as exc:
        sha, error = None, str(exc)
    return Pushed(cluster, n, sha, time.perf_counter() - decided, calls, error)


def _desired(editor: ManifestEditor) -> int:
    group = editor.manifest().group(GROUP)
    assert group is not None
    return group.desired


def run_fleet(url: str, work_root: Path, clusters: Sequence[str], rounds: int) -> tuple[list[Pushed], float]:
    """Start one writer process per cluster; each round, release them all at once and wait until
    each has pushed. What each pushed, and the wall time of the rounds."""
    script = str(Path(__file__).resolve())
    work_root.mkdir(parents=True, exist_ok=True)
    writers: list[tuple[subprocess.Popen[str], Path]] = []
    for n, cluster in enumerate(clusters):
        args = ["--writer", cluster, "--url", url, "--work", str(work_root / cluster)]
        args += ["--rounds", str(rounds), "--seed", str(n)]
        log = work_root / f"{cluster}.log"
        with log.open("w") as stderr:  # GitPython logs every rejected push there
            proc = subprocess.Popen(
                [sys.executable, script, *args],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=stderr,
                text=True,
            )
        writers.append((proc, log))
    try:
        for proc, log in writers:
            _line(proc, log, "ready")
        results: list[Pushed] = []
        started = time.perf_counter()
        for _ in range(rounds):
            for proc, _log in writers:
                assert proc.stdin is not None
                proc.stdin.write("go\n")
                proc.stdin.flush()
            results += [Pushed(**json.loads(_line(proc, log, "{"))) for proc, log in writers]
        wall = time.perf_counter() - started
        for proc, _log in writers:
            assert proc.stdin is not None
            proc.stdin.close()
            proc.wait(timeout=TIMEOUT)
    finally:
        for proc, _log in writers:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    return results, wall


def _line(proc: subprocess.Popen[str], log: Path, starts: str) -> str:
    """The writer's next line, which must start with `starts`."""
    assert proc.stdout is not None
    ready, _, _ = select.select([proc.stdout], [], [], TIMEOUT)
    line = proc.stdout.readline().strip() if ready else ""
    if not line.startswith(starts):
        tail = log.read_text().strip().splitlines()[-3:]
        raise RuntimeError(f"a writer said {line!r} (exit {proc.poll()}), not {starts}...: {tail}")
    return line


# ------------------------------------------------------------------------------------- the check


def check_remote(
    repo: Path, base: str, clusters: Sequence[str], rounds: int, results: Sequence[Pushed]
) -> list[str]:
    """What is wrong on the remote's main since `base` (the seeded tip) after the fleet ran (empty:
    nothing)."""
    problems: list[str] = []
    lines = git("rev-list", "--parents", "--reverse", f"{base}..main", cwd=repo).splitlines()
    tip = base
    for line in lines:  # linear: each commit's only parent is the tip before it
        sha, *parents = line.split()
        if parents != [tip]:
            problems.append(f"{sha[:12]} has parents {[p[:12] for p in parents]}, not the tip {tip[:12]}")
        tip = sha
    log = git("log", "--format=%H%x00%B%x01", f"{base}..main", cwd=repo)
    marks: Counter[str] = Counter()
    for entry in filter(None, (e.strip() for e in log.split("\x01"))):
        sha, _, body = entry.partition("\x00")
        found = re.findall(rf"^Capacity-Reason: {MARK} (\S+)$", body, flags=re.MULTILINE)
        if len(found) != 1:
            problems.append(f"{sha[:12]} is not one fleet commit: {body.splitlines()[0]!r}")
            continue
        marks[found[0]] += 1
        cluster = found[0].split("/")[0]
        touched = git("diff-tree", "--no-commit-id", "--name-only", "-r", sha, cwd=repo).split()
        if touched != [manifest_path(cluster)]:
            problems.append(f"{sha[:12]} ({found[0]}) changes {touched}, not only its own manifest")
    for cluster in clusters:
        for n in range(1, rounds + 1):
            if marks[f"{cluster}/{n}"] != 1:
                problems.append(f"{cluster}/{n} is on main {marks[f'{cluster}/{n}']} times, not once")
        text = git("show", f"main:{manifest_path(cluster)}", cwd=repo)
        if text != manifest_text(cluster, START_DESIRED + rounds):
            problems.append(f"{manifest_path(cluster)} on main is not at desired {START_DESIRED + rounds}")
    on_main = set(git("rev-list", f"{base}..main", cwd=repo).split())
    for pushed in results:
        if pushed.sha is None:
            problems.append(f"{pushed.cluster}/{pushed.round} was not pushed: {pushed.error}")
        elif pushed.sha not in on_main:
            problems.append(
                f"{pushed.cluster}/{pushed.round}: {pushed.sha[:12]} was pushed but is not on main"
            )
    if len(results) != len(clusters) * rounds:
        problems.append(f"{len(results)} results, expected {len(clusters) * rounds}")
    return problems


def percentile(values: Sequence[float], q: float) -> float:
    """The nearest-rank percentile: the value at least q of the samples are at or under."""
    ordered = sorted(values)
    return ordered[max(0, min(len(ordered) - 1, math.ceil(len(ordered) * q / 100) - 1))]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--writers", type=int, default=WRITERS)
    parser.add_argument("--rounds", type=int, default=ROUNDS)
    parser.add_argument("--writer", help=argparse.SUPPRESS)
    parser.add_argument("--url", help=argparse.SUPPRESS)
    parser.add_argument("--work", help=argparse.SUPPRESS)
    parser.add_argument("--seed", type=int, default=0, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.writer:
        writer(args.writer, args.url, Path(args.work), args.rounds, args.seed)
        return 0
    clusters = [cluster_name(n) for n in range(1, args.writers + 1)]
    with tempfile.TemporaryDirectory() as scratch:
        root = Path(scratch, "daemon")
        repo = root / "capacity.git"
        seed_remote(repo, clusters)
        seeded = git("rev-parse", "main", cwd=repo).strip()
        with serve(root) as base_url:
            url = f"{base_url}/capacity.git"
            results, wall = run_fleet(url, Path(scratch, "work"), clusters, args.rounds)
        problems = check_remote(repo, seeded, clusters, args.rounds, results)
    seconds = [r.seconds for r in results if r.sha is not None] or [float("inf")]
    retries = sum(r.attempts - 1 for r in results)
    lost = sum(r.sha is None for r in results)
    refetched = sum(r.refetched for r in results)
    p50, p99 = percentile(seconds, 50), percentile(seconds, 99)
    print(
        f"fleet: {len(clusters)} writers x {args.rounds} rounds over git daemon, {len(results)} commits:"
        f" plan decided -> pushed p50 {p50:.2f}s, p99 {p99:.2f}s, max {max(seconds):.2f}s;"
        f" {retries} retries (rejected pushes), most for one commit {max(r.attempts for r in results) - 1};"
        f" {lost} gave up; wall {wall:.1f}s (target p99 <= {TARGET_P99:.0f}s, none lost)"
    )
    if refetched:
        print(f"  ({refetched} plan fetches before a decision failed, dropped by git daemon, and ran again)")
    for problem in problems[:10]:
        print(f"  FAILED: {problem}")
    if len(problems) > 10:
        print(f"  ... and {len(problems) - 10} more")
    if problems or p99 > TARGET_P99:
        print("fleet: missed the target" if not problems else "fleet: FAILED - the remote is not as intended")
        return 1
    return 0


if __name__ == "__main__":
    os.environ.setdefault("GIT_TERMINAL_PROMPT", "0")
    sys.exit(main())
