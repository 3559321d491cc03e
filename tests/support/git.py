"""Fixtures for the git test component (DESIGN §6): bare remotes, people committing, fast history.

Everything runs against local bare repositories (`file://` or a plain path), a `git daemon` for the
git protocol, and a tiny smart-HTTP server (`git http-backend` behind Basic auth) for token tests.
Commits made "by a person" go straight into the bare repo with plumbing (no clone), and long
histories are written with `git fast-import`, so 10,000 commits take well under a second.
"""

from __future__ import annotations

import base64
import os
import random
import shutil
import socket
import subprocess
import tempfile
import threading
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from reconciler.gitops.history import Entry
from reconciler.gitops.trailers import (
    SOURCE_EXTERNAL,
    CapacityMessage,
    Change,
    InstanceRemoval,
    Reason,
    build_message,
    summarize,
)

# git's SSH signing runs OpenSSH's ssh-keygen (Debian: openssh-client, which git recommends). Without it
# the signed-approval tests cannot run at all: they are skipped, saying so, rather than failing.
needs_ssh_keygen = pytest.mark.skipif(
    shutil.which("ssh-keygen") is None, reason="SSH-signed approvals need ssh-keygen (openssh-client)"
)

CLUSTER = "test-cluster"
MANIFEST_PATH = f"capacity/{CLUSTER}.yaml"
SEED_MANIFEST = f"""\
# Capacity of {CLUSTER} (test seed).
version: 1
cluster: {CLUSTER}
nodeGroups:
  asg-a:
    removeInstances: []
    hold: false
    desired: 2      # two to start with
    minSize: 0
    maxSize: 10
  asg-b:
    removeInstances: []
    hold: false
    desired: 1
    minSize: 1
    maxSize: 5
"""


def git(
    *args: str, cwd: Path | str | None = None, env: Mapping[str, str] | None = None, input: str | None = None
) -> str:
    """Run git, fail loudly, return stdout (a test helper: no retries, no redaction)."""
    result = subprocess.run(
        ["git", *args],
        cwd=cwd,
        env={**os.environ, **(env or {})},
        input=input,
        capture_output=True,
        text=True,
        check=False,
    )
    if result.returncode != 0:
        raise AssertionError(f"git {' '.join(args)} failed: {result.stderr.strip()}")
    return result.stdout


def init_bare(path: Path) -> Path:
    git("init", "--quiet", "--bare", "--initial-branch=main", str(path))
    return path


@dataclass(frozen=True)
class Person:
    """Someone committing to a repo directly (a person, or the bot in a test's setup)."""

    name: str
    email: str

    def env(self, when: datetime | None = None) -> dict[str, str]:
        env = {
            "GIT_AUTHOR_NAME": self.name,
            "GIT_AUTHOR_EMAIL": self.email,
            "GIT_COMMITTER_NAME": self.name,
            "GIT_COMMITTER_EMAIL": self.email,
        }
        if when is not None:
            env["GIT_AUTHOR_DATE"] = env["GIT_COMMITTER_DATE"] = when.isoformat()
        return env

    def commit(
        self,
        repo: Path,
        branch: str,
        files: Mapping[str, str | bytes | None],
        message: str,
        *,
        parents: Sequence[str] | None = None,
        when: datetime | None = None,
    ) -> str:
        """Commit `files` on top of `branch` (or explicit `parents`) in `repo` and move the branch
        (bytes are committed as they are: a file in some other encoding than UTF-8)."""
        if parents is None:
            tip = _resolve(repo, f"refs/heads/{branch}")
            parents = [tip] if tip else []
        with tempfile.TemporaryDirectory() as scratch:
            env = {**self.env(when), "GIT_INDEX_FILE": str(Path(scratch, "index"))}
            if parents:
                git("read-tree", parents[0], cwd=repo, env=env)
            for name, text in files.items():
                if text is None:
                    git("update-index", "--force-remove", "--", name, cwd=repo, env=env)
                else:
                    blob = _hash_object(repo, text)
                    git("update-index", "--add", "--cacheinfo", f"100644,{blob},{name}", cwd=repo, env=env)
            tree = git("write-tree", cwd=repo, env=env).strip()
            message_file = Path(scratch, "message")
            message_file.write_text(message)
            args = [arg for p in parents for arg in ("-p", p)]
            sha = git("commit-tree", tree, *args, "-F", str(message_file), cwd=repo, env=env).strip()
        git("update-ref", f"refs/heads/{branch}", sha, cwd=repo)
        return sha

    def merge(
        self, repo: Path, branch: str, other: str, message: str, *, when: datetime | None = None
    ) -> str:
        """A merge commit of `other` into `branch` keeping `other`'s tree (what a clean PR merge gives)."""
        ours, theirs = _resolve(repo, f"refs/heads/{branch}"), _resolve(repo, f"refs/heads/{other}")
        assert ours and theirs
        tree = git("rev-parse", f"{theirs}^{{tree}}", cwd=repo).strip()
        sha = git(
            "commit-tree", tree, "-p", ours, "-p", theirs, "-m", message, cwd=repo, env=self.env(when)
        ).strip()
        git("update-ref", f"refs/heads/{branch}", sha, cwd=repo)
        return sha


ALICE = Person("Alice Admin", "alice@example.com")
BOB = Person("Bob Builder", "bob@example.com")
BOT = Person("asg-reconciler", "asg-reconciler@users.noreply.local")


def _hash_object(repo: Path, content: str | bytes) -> str:
    data = content.encode() if isinstance(content, str) else content
    done = subprocess.run(
        ["git", "hash-object", "-w", "--stdin"], cwd=repo, input=data, capture_output=True, check=True
    )
    return done.stdout.decode().strip()


def _resolve(repo: Path, ref: str) -> str | None:
    result = subprocess.run(
        ["git", "rev-parse", "--verify", "--quiet", ref],
        cwd=repo,
        capture_output=True,
        text=True,
        check=False,
    )
    return result.stdout.strip() or None


def show(repo: Path, spec: str) -> str:
    """`git show <rev>:<path>` in a test."""
    return git("show", spec, cwd=repo)


# ----------------------------------------------------------------------------------- fast-import


@dataclass(frozen=True)
class FastCommit:
    """One commit for `fast_import`; `parents` are marks of earlier commits (first = first parent)."""

    mark: int
    ref: str
    message: str
    author: Person
    when: int  # seconds since the epoch (UTC)
    parents: tuple[int, ...] = ()
    files: Mapping[str, str] = field(default_factory=dict)
    committer: Person | None = None


def fast_import(repo: Path, commits: Iterable[FastCommit]) -> dict[int, str]:
    """Write `commits` into `repo` in one `git fast-import` run; returns mark -> commit id."""
    chunks: list[bytes] = []
    for c in commits:
        committer = c.committer or c.author
        message = c.message.encode()
        chunks.append(
            f"commit {c.ref}\nmark :{c.mark}\n"
            f"author {c.author.name} <{c.author.email}> {c.when} +0000\n"
            f"committer {committer.name} <{committer.email}> {c.when} +0000\n"
            f"data {len(message)}\n".encode()
            + message
            + b"\n"
        )
        if c.parents:
            chunks.append(f"from :{c.parents[0]}\n".encode())
        for parent in c.parents[1:]:
            chunks.append(f"merge :{parent}\n".encode())
        for name, text in c.files.items():
            data = text.encode()
            chunks.append(f"M 100644 inline {name}\ndata {len(data)}\n".encode() + data + b"\n")
        chunks.append(b"\n")
    with tempfile.TemporaryDirectory() as scratch:
        marks_file = Path(scratch, "marks")
        subprocess.run(
            ["git", "fast-import", "--quiet", "--force", f"--export-marks={marks_file}"],
            cwd=repo,
            input=b"".join(chunks),
            check=True,
            capture_output=True,
        )
        marks = {}
        for line in marks_file.read_text().splitlines():
            mark, sha = line.split()
            marks[int(mark[1:])] = sha
    return marks


# -------------------------------------------------------------------------------------- fixtures


@pytest.fixture
def bare_remote(tmp_path: Path) -> Path:
    """An empty bare repository (no commits, no branches)."""
    return init_bare(tmp_path / "remote.git")


@pytest.fixture
def seeded_remote(bare_remote: Path) -> Path:
    """A bare repository whose main holds one manifest, committed by Alice."""
    ALICE.commit(
        bare_remote,
        "main",
        {MANIFEST_PATH: SEED_MANIFEST},
        "Add the capacity manifest",
        when=datetime(2024, 1, 1, tzinfo=UTC),
    )
    return bare_remote


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def _wait_for_port(port: int, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with socket.socket() as sock:
            if sock.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.02)
    raise AssertionError(f"nothing listens on port {port}")


@dataclass(frozen=True)
class GitServer:
    root: Path  # bare repositories live here
    base_url: str
    token: str = ""

    def url(self, name: str) -> str:
        return f"{self.base_url}/{name}"


@pytest.fixture
def git_daemon(tmp_path: Path) -> Iterator[GitServer]:
    """`git daemon` serving `root/*.git` over git:// with pushes enabled."""
    root = tmp_path / "daemon"
    root.mkdir()
    port = free_port()
    process = subprocess.Popen(
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
        _wait_for_port(port)
        yield GitServer(root, f"git://127.0.0.1:{port}")
    finally:
        process.terminate()
        process.wait(timeout=10)


class _SmartHTTP(BaseHTTPRequestHandler):
    """`git http-backend` as CGI behind Basic auth: the password must be the server's token."""

    root: Path
    token: str
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True

    def do_GET(self) -> None:
        self._serve()

    def do_POST(self) -> None:
        self._serve()

    def log_message(self, format: str, *args: object) -> None:  # quiet
        pass

    def _serve(self) -> None:
        header = self.headers.get("Authorization", "")
        password = ""
        if header.startswith("Basic "):
            password = base64.b64decode(header[6:]).decode().partition(":")[2]
        if password != self.token:
            body = b"authentication required\n"
            self.send_response(401)
            self.send_header("WWW-Authenticate", 'Basic realm="git"')
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
            return
        path, _, query = self.path.partition("?")
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        env = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "GIT_PROJECT_ROOT": str(self.root),
            "GIT_HTTP_EXPORT_ALL": "1",
            "REMOTE_USER": "tester",
            "REQUEST_METHOD": self.command,
            "PATH_INFO": path,
            "QUERY_STRING": query,
            "CONTENT_TYPE": self.headers.get("Content-Type", ""),
            "CONTENT_LENGTH": str(len(body)),
            "HTTP_CONTENT_ENCODING": self.headers.get("Content-Encoding", ""),
            "GIT_PROTOCOL": self.headers.get("Git-Protocol", ""),
        }
        result = subprocess.run(
            ["git", "http-backend"], input=body, env=env, capture_output=True, check=False
        )
        head, _, payload = result.stdout.partition(b"\r\n\r\n")
        status = 200
        headers = []
        for line in head.decode().split("\r\n"):
            key, _, value = line.partition(": ")
            if key.lower() == "status":
                status = int(value.split()[0])
            elif key:
                headers.append((key, value))
        self.send_response(status)
        for key, value in headers:
            self.send_header(key, value)
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)


@pytest.fixture
def git_http(tmp_path: Path) -> Iterator[GitServer]:
    """Smart HTTP for `root/*.git`, accepting any user name with the password `GitServer.token`."""
    root = tmp_path / "http"
    root.mkdir()
    token = "s3cr3t-token-" + os.urandom(6).hex()
    handler = type("Handler", (_SmartHTTP,), {"root": root, "token": token})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield GitServer(root, f"http://127.0.0.1:{server.server_address[1]}", token)
    finally:
        server.shutdown()
        server.server_close()


# ------------------------------------------------------------------------ generated capacity history


def capacity_history(repo: Path, count: int, *, cluster: str = CLUSTER, seed: int = 0) -> list[Entry]:
    """Write about `count` commits of mixed capacity history to `repo`'s main; return the entries
    `history` must show for `cluster`, newest first.

    The mix: bot scale-ups, adopted drift, scale-down proposals merged by a person (merge commits),
    squash-merged scale-downs, another cluster's commits, and people's unrelated commits.
    """
    rng = random.Random(seed)
    groups = [f"asg-{letter}" for letter in "abcdef"]
    sizes = dict.fromkeys(groups, 5)
    commits: list[FastCommit] = []
    expected: list[tuple[int, dict[str, Any]]] = []  # (mark of the commit, Entry fields)
    when = 1_700_000_000
    main: int | None = None
    pull = 0

    def add(ref: str, message: str, author: Person, at: int, parents: tuple[int, ...], **kw: Any) -> int:
        mark = len(commits) + 1
        files = {f"capacity/{cluster}.yaml": "".join(f"{g}: {sizes[g]}\n" for g in groups)}
        commits.append(FastCommit(mark, ref, message, author, at, parents, files, **kw))
        return mark

    def record(mark: int, message: CapacityMessage, author: Person, time: int, **extra: Any) -> None:
        for change in message.changes:
            expected.append(
                (
                    mark,
                    dict(
                        kind="change",
                        cluster=message.cluster,
                        group=change.group,
                        time=datetime.fromtimestamp(time, UTC),
                        before=change.before,
                        after=change.after,
                        direction=change.direction,
                        reason=message.reason_for(change.group),
                        author=author.name,
                        author_email=author.email,
                        source=message.source,
                        instances=message.removals_for(change.group),
                        proposal=extra.get("proposal", message.proposal),
                        merged_by=extra.get("merged_by", ""),
                        opened=extra.get("opened"),
                    ),
                )
            )

    while len(commits) < count:
        when += 60
        roll = rng.random()
        parents = (main,) if main else ()
        if roll < 0.55 or main is None:  # scale-up by the bot
            chosen = rng.sample(groups, rng.randint(1, 3))
            changes = tuple(Change(g, sizes[g], sizes[g] + rng.randint(1, 4)) for g in chosen)
            for c in changes:
                sizes[c.group] = c.after
            reasons = tuple(Reason(c.group, f"{rng.randint(1, 40)} pending pods need nodes") for c in changes)
            message = CapacityMessage(cluster, summarize(changes), changes, reasons)
            main = add("refs/heads/main", build_message(message), BOT, when, parents)
            record(main, message, BOT, when)
        elif roll < 0.62:  # drift adopted into Git
            group = rng.choice(groups)
            change = Change(group, sizes[group], max(0, sizes[group] + rng.randint(-2, 3)))
            sizes[group] = change.after
            message = CapacityMessage(
                cluster,
                f"adopt drift {change}",
                (change,),
                (Reason("", "DesiredCapacity changed outside asg-reconciler"),),
                source=SOURCE_EXTERNAL,
            )
            main = add("refs/heads/main", build_message(message), BOT, when, parents)
            record(main, message, BOT, when)
        elif roll < 0.75:  # a proposal, merged by a person
            pull += 1
            group = rng.choice([g for g in groups if sizes[g] >= 2] or groups)
            take = min(sizes[group], rng.randint(1, 2))
            change = Change(group, sizes[group], sizes[group] - take)
            sizes[group] = change.after
            removals = tuple(InstanceRemoval(group, f"i-{rng.getrandbits(68):017x}") for _ in range(take))
            message = CapacityMessage(
                cluster,
                summarize((change,)),
                (change,),
                (Reason(group, f"{take} nodes under 50% for 10m"),),
                removals=removals,
                body="Proposed by asg-reconciler.\n\nReview the instances below.",
                proposal=f"asg-reconciler/{cluster}/scale-down@{when}" if rng.random() < 0.5 else "",
            )
            proposal = add("refs/heads/proposals", build_message(message), BOT, when, parents)
            merger = rng.choice([ALICE, BOB])
            main = add(
                "refs/heads/main",
                f"Merge pull request #{pull} from org/asg-reconciler/{cluster}/scale-down\n",
                merger,
                when + 30,
                (*parents, proposal),
            )
            record(
                proposal,
                message,
                BOT,
                when + 30,
                merged_by=merger.name,
                proposal=message.proposal or f"#{pull}",
                opened=datetime.fromtimestamp(when, UTC),
            )
        elif roll < 0.8:  # squash-merged scale-down: the forge commits as the person who merged
            pull += 1
            group = rng.choice([g for g in groups if sizes[g] >= 1] or groups)
            change = Change(group, sizes[group], max(0, sizes[group] - 1))
            sizes[group] = change.after
            message = CapacityMessage(
                cluster,
                f"{summarize((change,))} (#{pull})",
                (change,),
                removals=(InstanceRemoval(group, f"i-{rng.getrandbits(68):017x}"),),
            )
            main = add("refs/heads/main", build_message(message), BOT, when, parents, committer=ALICE)
            record(main, message, BOT, when, merged_by=ALICE.name, proposal=f"#{pull}")
        elif roll < 0.9:  # another cluster shares the repo
            message = CapacityMessage("other-cluster", "scale up x 1 -> 2", (Change("x", 1, 2),))
            main = add("refs/heads/main", build_message(message), BOT, when, parents)
        else:  # a person's commit without trailers
            main = add(
                "refs/heads/main",
                "Update the README\n\nSigned-off-by: Bob <bob@example.com>\n",
                BOB,
                when,
                parents,
            )
    marks = fast_import(repo, commits)
    entries = [Entry(commit=marks[mark], **fields) for mark, fields in expected]
    entries.sort(key=lambda e: e.time, reverse=True)
    return entries
