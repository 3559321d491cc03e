"""Many clusters, one capacity repo: 20 plan processes push scale-ups to one `git daemon` remote at once.

Each writer is a real OS process running the project's push path (`WorkingCopy.update`, what
`publish` calls for main) for its own cluster and manifest (`clusters/cNN/capacity.yaml`), several
rounds in a row so contention lasts: fetch everything (as every plan starts), plan for a while,
then decide one scale-up and time it from "plan decided" to "pushed". Afterwards the remote is
checked: every intended commit on main exactly once, main linear (each commit's parent the tip
before it: a fresh rebase), each commit touching only its own manifest, every manifest at its
final value. Prints p50/p99/max, the rejected pushes (retries) and the wall time; exits 1 when p99
is over 5 s or the check fails. `--writers/--rounds` change the size; the tests run a smaller one.
"""

from __future__ import annotations

import argparse
import contextlib
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

from reconciler.errors import OperationError
from reconciler.gitops.manifest_edit import ManifestEditor
from reconciler.gitops.repo import Identity, Update, WorkingCopy
from reconciler.gitops.trailers import CapacityMessage, Change, Reason, build_message
from tests.fixtures_git import ALICE, BOT, FastCommit, fast_import, free_port, git, init_bare

WRITERS = 20
ROUNDS = 5
TARGET_P99 = 5.0
PLANNING = (0.05, 0.25)  # seconds between a plan's fetch and its decision (AWS, Kubernetes, planner)
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


def writer(cluster: str, url: str, work: Path, rounds: int, seed: int) -> None:
    """One cluster's plan process: clone, say ready, wait for go, then `rounds` scale-ups, each
    printed as a JSON line."""
    rng = random.Random(seed)
    copy = WorkingCopy(url, work, Identity(BOT.name, BOT.email), token_env="")
    copy.sync()
    print("ready", flush=True)
    if sys.stdin.readline().strip() != "go":
        return
    for n in range(1, rounds + 1):
        copy.sync()  # every plan starts with a full fetch (plan_stage.working_copy)
        time.sleep(rng.uniform(*PLANNING))
        print(json.dumps(scale_up(copy, cluster, n).__dict__), flush=True)


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
    """Start one writer process per cluster, release them together, collect what each pushed;
    also the wall time from the release to the last writer's end."""
    script = str(Path(__file__).resolve())
    procs = []
    for n, cluster in enumerate(clusters):
        args = ["--writer", cluster, "--url", url, "--work", str(work_root / cluster)]
        args += ["--rounds", str(rounds), "--seed", str(n)]
        procs.append(
            subprocess.Popen(
                [sys.executable, script, *args],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
        )
    try:
        for proc in procs:
            assert proc.stdout is not None and proc.stdin is not None
            ready, _, _ = select.select([proc.stdout], [], [], TIMEOUT)
            line = proc.stdout.readline().strip() if ready else ""
            if line != "ready":
                raise RuntimeError(f"a writer did not start: {line!r} {_stderr(proc)}")
        started = time.perf_counter()
        for proc in procs:
            assert proc.stdin is not None
            proc.stdin.write("go\n")
            proc.stdin.flush()
        results: list[Pushed] = []
        for proc in procs:
            out, err = proc.communicate(timeout=TIMEOUT)
            if proc.returncode != 0:
                raise RuntimeError(f"a writer failed (exit {proc.returncode}): {err.strip()[-2000:]}")
            results += [Pushed(**json.loads(line)) for line in out.splitlines() if line.strip()]
        wall = time.perf_counter() - started
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    return results, wall


def _stderr(proc: subprocess.Popen[str]) -> str:
    if proc.poll() is None:
        proc.kill()
    _, err = proc.communicate()
    return err.strip()[-2000:]


# ------------------------------------------------------------------------------------- the check


def check_remote(repo: Path, clusters: Sequence[str], rounds: int, results: Sequence[Pushed]) -> list[str]:
    """What is wrong on the remote's main after the fleet ran (empty: nothing)."""
    problems: list[str] = []
    base = git("rev-list", "--max-count=1", f"--grep={MARK}", "--invert-grep", "main", cwd=repo).strip()
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
        with serve(root) as base_url:
            url = f"{base_url}/capacity.git"
            results, wall = run_fleet(url, Path(scratch, "work"), clusters, args.rounds)
        problems = check_remote(repo, clusters, args.rounds, results)
    seconds = [r.seconds for r in results if r.sha is not None] or [float("inf")]
    retries = sum(r.attempts - 1 for r in results)
    lost = sum(r.sha is None for r in results)
    p50, p99 = percentile(seconds, 50), percentile(seconds, 99)
    print(
        f"fleet: {len(clusters)} writers x {args.rounds} rounds over git daemon, {len(results)} commits:"
        f" plan decided -> pushed p50 {p50:.2f}s, p99 {p99:.2f}s, max {max(seconds):.2f}s;"
        f" {retries} retries (rejected pushes), most for one commit {max(r.attempts for r in results) - 1};"
        f" {lost} gave up; wall {wall:.1f}s (target p99 <= {TARGET_P99:.0f}s, none lost)"
    )
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
