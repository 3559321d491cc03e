"""The capacity repo's working copy: fetch, commit without a checkout, push with retries.

The work dir is a bare repository holding the remote's branches as `refs/remotes/origin/*`. Commits
are built with plumbing from a fetched parent (a temporary index, `commit-tree`), so there is no
checked-out tree that a crash could leave dirty: every run starts from what it fetches, and a
half-done run leaves nothing the next one trips on.

Credentials never touch disk or argv: a token from the environment variable the config names reaches
git through `GIT_ASKPASS` (a script that only echoes another environment variable), and every error
message is scrubbed of it and of any `user:password@` in the URL.
"""

from __future__ import annotations

import contextlib
import fcntl
import io
import os
import re
import shutil
import tempfile
import time
from collections.abc import Callable, Collection, Iterator, Mapping
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import IO, Any

import git
from gitdb import IStream  # type: ignore[import-untyped]
from tenacity import (
    RetryCallState,
    Retrying,
    retry_if_exception_type,
    stop_after_attempt,
    stop_after_delay,
)
from tenacity.wait import WaitBaseT

from reconciler.config.documents import decode_utf8
from reconciler.config.settings import GitConfig
from reconciler.domain.backoff import FULL_JITTER, Backoff
from reconciler.domain.errors import OperationError, UserError
from reconciler.gitops.errors import GitError, WorkDirError

REMOTE = "origin"
_MARKER = "asg-reconciler-workdir"
_LOCK = "asg-reconciler.lock"
_ASKPASS = "asg-reconciler-askpass"
_PASSWORD_VAR = "ASG_RECONCILER_GIT_PASSWORD"
_USERNAME_VAR = "ASG_RECONCILER_GIT_USERNAME"
_ASKPASS_SCRIPT = f"""#!/bin/sh
# Answers git's credential prompts from the environment; holds no secret itself.
case "$1" in
  Username*) printf '%s\\n' "${{{_USERNAME_VAR}:-x-access-token}}" ;;
  *) printf '%s\\n' "${{{_PASSWORD_VAR}}}" ;;
esac
"""
# A rejected push to a branch: fetch that branch, ask the caller again, push again; at most this many
# times and never longer than git.timeout, waiting a random time up to unit * 2^(n-1), at most
# PUSH_WAIT_MAX, where unit is the time an attempt takes (at least PUSH_WAIT_INITIAL). Measured with
# 20 clusters pushing to one repository at once by benchmarks/fleet.py (docs/gitops.md).
PUSH_ATTEMPTS = 20
PUSH_WAIT_INITIAL = 0.05
PUSH_WAIT_MAX = 3.0
# A retry's fetch: one branch, no tags, no FETCH_HEAD, no walk for forced updates, no auto gc (sync,
# at the start of every plan, still runs it): it only has to bring the branch's new tip.
_FETCH_ONE = ("--no-tags", "--no-write-fetch-head", "--no-show-forced-updates", "--no-auto-gc")
_URL_CREDENTIALS = re.compile(r"(?P<scheme>[a-z][a-z0-9+.-]*://)[^/@\s]+@", re.IGNORECASE)


@dataclass(frozen=True)
class Identity:
    name: str
    email: str


@dataclass(frozen=True)
class CommitInfo:
    sha: str
    author_name: str
    author_email: str
    committer_name: str
    committer_email: str
    subject: str


@dataclass(frozen=True)
class Update:
    """What a caller wants on a branch: the file's new text and the commit message."""

    text: str
    message: str


class PushRejected(Exception):
    """The remote branch moved (non-fast-forward or a stale lease): fetch, re-plan, retry."""


def redact(text: str, secrets: tuple[str, ...] = ()) -> str:
    """`text` without URL credentials or any of `secrets`."""
    text = _URL_CREDENTIALS.sub(lambda m: m["scheme"] + "***@", text)
    for secret in secrets:
        if secret:
            text = text.replace(secret, "***")
    return text


_FULL_SHA = re.compile(r"[0-9a-f]{40}")


class WorkingCopy:
    """One capacity repo cloned into `path`; every public call is serialised by a file lock."""

    def __init__(
        self,
        url: str,
        path: Path,
        identity: Identity,
        *,
        token_env: str = "GIT_TOKEN",
        timeout: float = 120.0,
        environ: Mapping[str, str] | None = None,
        token_file: str = "",
    ) -> None:
        self.url = url
        self.path = Path(path)
        self.identity = identity
        self.timeout = timeout
        environ = os.environ if environ is None else environ
        self._token_from_env = environ.get(token_env, "") if token_env else ""
        self._token_file = token_file
        self._inherited = dict(environ)
        self._repo: git.Repo | None = None
        self._lock_depth = 0

    @classmethod
    def from_config(
        cls, config: GitConfig, work_dir: Path, environ: Mapping[str, str] | None = None
    ) -> WorkingCopy:
        if not config.url:
            raise UserError(
                "git.url: not set, so there is no capacity repository to read (set git.url in the config)"
            )
        return cls(
            config.url,
            Path(config.work_dir) if config.work_dir else work_dir,
            Identity(config.author_name, config.author_email),
            token_env=config.token_env,
            timeout=config.timeout.total_seconds(),
            environ=environ,
            token_file=config.token_file,
        )

    @property
    def _token(self) -> str:
        """The https token as of now: `git.tokenFile` read again at every use (a GitHub App token
        lasts an hour; whatever refreshes the file, the next fetch or push uses the new one), else
        `git.tokenEnv`'s value. Unreadable: "" here (what redacts has nothing to hide), and a
        UserError where git is about to use it (`_read_token`)."""
        try:
            return self._read_token()
        except UserError:
            return ""

    def _read_token(self) -> str:
        if not self._token_file:
            return self._token_from_env
        try:
            return Path(self._token_file).read_text(encoding="utf-8").strip()
        except (OSError, UnicodeDecodeError) as exc:
            reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else type(exc).__name__
            raise UserError(
                f"git.tokenFile: {self._token_file} cannot be read ({reason}); write the https token "
                "there, or unset git.tokenFile to use git.tokenEnv"
            ) from None

    @property
    def shown_url(self) -> str:
        return redact(self.url, (self._token,))

    def redact(self, text: str) -> str:
        """`text` as this copy writes it anywhere: without URL credentials or the git token."""
        return redact(text, (self._token,))

    # --------------------------------------------------------------------------------- the remote

    def sync(self) -> None:
        """Clone or fetch: afterwards `refs/remotes/origin/*` is exactly the remote's branches."""
        with self._locked():
            repo = self._open()
            self._git(
                "fetch", "--prune", "--no-tags", REMOTE, f"+refs/heads/*:refs/remotes/{REMOTE}/*", repo=repo
            )

    def fetch_branch(self, branch: str) -> str | None:
        """Fetch only `branch` (the other branches stay as last fetched): what a push retry needs.

        Its new tip, or None when the remote has no such branch (then the local copy of it goes too).
        """
        with self._locked():
            tracking = f"refs/remotes/{REMOTE}/{branch}"
            refspec = f"+refs/heads/{branch}:{tracking}"
            try:
                self._git("fetch", *_FETCH_ONE, REMOTE, refspec)
            except OperationError:
                if self.remote_head(branch) is None:  # gone (or never there): not an error
                    if self._resolve(tracking) is not None:
                        self._git("update-ref", "-d", tracking)
                    return None
                self._git("fetch", *_FETCH_ONE, REMOTE, refspec)  # created meanwhile
            return self._resolve(tracking)

    def fetch_ref(self, ref: str) -> None:
        """Bring one ref of the remote that `sync` does not fetch (GitHub's `refs/pull/N/head`, for a
        squashed pull request's head) into the clone under the same name, so gc keeps it."""
        if not ref.startswith("refs/") or ref.startswith(("refs/heads/", "refs/remotes/")) or ":" in ref:
            raise ValueError(f"not a ref to mirror: {ref!r}")
        with self._locked():
            self._git("fetch", *_FETCH_ONE, REMOTE, f"+{ref}:{ref}")

    def remote_head(self, branch: str) -> str | None:
        """The remote's tip of `branch` now, asked with one `git ls-remote` (no fetch): how the run
        loop's apply stage learns cheaply that main moved. None when the branch does not exist."""
        with self._locked():
            out = self._git("ls-remote", "--heads", REMOTE, f"refs/heads/{branch}", repo=self._open())
        for line in out.splitlines():
            sha, _, ref = line.partition("\t")
            if ref == f"refs/heads/{branch}":
                return sha
        return None

    def head(self, branch: str) -> str | None:
        """The fetched tip of `branch`, or None when the remote has no such branch (or no commits)."""
        with self._locked():
            return self._resolve(f"refs/remotes/{REMOTE}/{branch}")

    def branches(self) -> list[str]:
        """The remote's branches as last fetched (`sync`), sorted."""
        with self._locked():
            prefix = f"refs/remotes/{REMOTE}/"
            out = self._git("for-each-ref", "--format=%(refname)", prefix)
        return sorted(line[len(prefix) :] for line in out.splitlines() if line.startswith(prefix))

    def read_file(self, path: str, ref: str) -> str | None:
        """The file at `ref` (a branch name of the remote, or any commit-ish); None if absent.
        Text that is not UTF-8 is a UserError naming `ref:path:line` and the fix."""
        with self._locked():
            sha = self._branch_or_commit(ref)
            shown = ref[:12] if _FULL_SHA.fullmatch(ref) else ref
            return None if sha is None else self._file_at(sha, path, shown)

    def commit(
        self,
        parent: str | None,
        files: Mapping[str, str | None],
        message: str,
        *,
        when: datetime | None = None,
    ) -> str | None:
        """A commit on top of `parent` changing `files` (None deletes); None if the tree is unchanged.

        Built with a temporary index, so no checkout or branch moves; `push` publishes it.
        """
        with self._locked():
            repo = self._open()
            identity = {
                "GIT_AUTHOR_NAME": self.identity.name,
                "GIT_AUTHOR_EMAIL": self.identity.email,
                "GIT_COMMITTER_NAME": self.identity.name,
                "GIT_COMMITTER_EMAIL": self.identity.email,
            }
            if when is not None:
                identity["GIT_AUTHOR_DATE"] = identity["GIT_COMMITTER_DATE"] = when.isoformat()
            with tempfile.TemporaryDirectory(dir=repo.git_dir, prefix="index-") as scratch:
                env = {**identity, "GIT_INDEX_FILE": str(Path(scratch, "index"))}
                if parent:
                    repo.git.read_tree(parent, env=env)
                for name, text in files.items():
                    if text is None:
                        repo.git.update_index("--force-remove", "--", name, env=env)
                        continue
                    data = text.encode("utf-8")
                    blob = repo.odb.store(IStream(b"blob", len(data), io.BytesIO(data))).hexsha
                    repo.git.update_index("--add", "--cacheinfo", f"100644,{_text(blob)},{name}", env=env)
                tree = repo.git.write_tree(env=env)
                if parent and tree == repo.commit(parent).tree.hexsha:
                    return None
                message_file = Path(scratch, "message")
                message_file.write_text(message, encoding="utf-8")
                parents = ["-p", parent] if parent else []
                sha: str = repo.git.commit_tree(tree, *parents, "-F", str(message_file), env=env)
                return sha

    def push(self, sha: str, branch: str) -> None:
        """Fast-forward `branch` to `sha`; PushRejected when the remote moved under us."""
        self._push(sha, branch, lease=None)

    def force_push(self, sha: str, branch: str, expected: str | None) -> None:
        """Overwrite `branch` only if the remote still has `expected` there (None: must not exist)."""
        self._push(sha, branch, lease=expected or "")

    def delete_branch(self, branch: str, expected: str) -> None:
        """Delete the remote `branch` if it is still at `expected` (a lease, like `force_push`)."""
        with self._locked():
            infos = self._remote_push(f":refs/heads/{branch}", f"refs/heads/{branch}:{expected}")
            self._check_push(infos, branch)
            self._git("update-ref", "-d", f"refs/remotes/{REMOTE}/{branch}")

    def update(
        self,
        branch: str,
        path: str,
        change: Callable[[str | None], Update | None],
        *,
        attempts: int = PUSH_ATTEMPTS,
        wait_initial: float = PUSH_WAIT_INITIAL,
        wait_max: float = PUSH_WAIT_MAX,
    ) -> str | None:
        """Commit `change(current text)` on `branch` and push; on a rejected push fetch and ask again.

        `change` gets the file as it is on the freshly fetched branch (None when absent) and returns
        the new text and message, or None for nothing to do; that is where the caller re-plans.
        Returns the new commit, or None when nothing changed. Never force-pushes.

        A retry fetches only `branch` (in a fleet's repo every cluster has branches of its own, and
        the others are not needed to rebase) after a random wait that grows with each rejection
        (`_full_jitter`); it gives up after `attempts` tries or `timeout` seconds, whichever is first.
        """
        retrying = _push_retries(attempts, _full_jitter(wait_initial, wait_max), self.timeout)
        try:
            for attempt in retrying:
                with attempt:
                    if attempt.retry_state.attempt_number > 1:
                        parent = self.fetch_branch(branch)
                    else:
                        parent = self.head(branch)
                    wanted = change(self._file_at(parent, path) if parent else None)
                    if wanted is None:
                        return None
                    sha = self.commit(parent, {path: wanted.text}, wanted.message)
                    if sha is None:
                        return None
                    self.push(sha, branch)
                    return sha
        except PushRejected:
            tries, took = (
                retrying.statistics["attempt_number"],
                retrying.statistics["delay_since_first_attempt"],
            )
            raise GitError(
                f"git push to {branch} of {self.shown_url} was rejected {tries} times in {took:.0f}s:"
                " other writers keep moving it; try again later"
            ) from None
        return None  # pragma: no cover - the loop always returns or raises

    # ---------------------------------------------------------------------------------- reading log

    def merges_cleanly(self, ours: str, theirs: str) -> bool:
        """Whether `theirs` merges into `ours` without conflicts (git merge-tree, no work tree)."""
        with self._locked():
            try:
                self._git("merge-tree", "--write-tree", "--no-messages", ours, theirs)
            except OperationError:
                return False
            return True

    def is_ancestor(self, ancestor: str, descendant: str) -> bool:
        """Whether `ancestor` is in `descendant`'s history (a branch merged into it: a spent proposal)."""
        with self._locked():
            try:
                self._git("merge-base", "--is-ancestor", ancestor, descendant)
            except OperationError:
                return False
            return True

    def commits_not_by(self, branch: str, base: str, email: str) -> list[CommitInfo]:
        """Commits on `branch` but not on `base` that `email` did not both author and commit."""
        with self._locked():
            tip = self._resolve(f"refs/remotes/{REMOTE}/{branch}")
            if tip is None:
                return []
            since = self._resolve(f"refs/remotes/{REMOTE}/{base}")
            spec = f"{since}..{tip}" if since else tip
            out = self._git("log", "--format=%H%x00%an%x00%ae%x00%cn%x00%ce%x00%s", spec)
            found = []
            for line in out.splitlines():
                sha, an, ae, cn, ce, subject = line.split("\x00", 5)
                if ae.lower() != email.lower() or ce.lower() != email.lower():
                    found.append(CommitInfo(sha, an, ae, cn, ce, subject))
            return found

    def first_parent(self, ref: str, *, since: str | None = None) -> list[str]:
        """`ref`'s first-parent line, newest first (`ref`: a branch of the remote or any commit-ish).

        With `since`, only the commits after it (`since..ref`); [] when `ref` does not resolve.
        """
        with self._locked():
            tip = self._branch_or_commit(ref)
            if tip is None:
                return []
            out = self._git("rev-list", "--first-parent", f"{since}..{tip}" if since else tip, "--")
            return out.split()

    # ------------------------------------------------------------------------------------ git notes
    # A notes ref (`refs/notes/...`) is mirrored under its own name here, so `git log --notes=<ref>`
    # in the work dir (what `history` runs) sees what the remote has. It is only ever fast-forwarded
    # on the remote: a writer that lost a race fetches and re-applies its change (`update_note`).

    def fetch_notes(self, ref: str) -> str | None:
        """Make the local `ref` exactly the remote's; its tip, or None when the remote has none."""
        with self._locked():
            try:
                self._git("fetch", "--no-tags", REMOTE, f"+{ref}:{ref}")
            except OperationError:
                if self._git("ls-remote", REMOTE, ref).strip():
                    # there now: another writer (apply, in the same run process) may have created it
                    # between our fetch and this look; a second failure is a real one
                    self._git("fetch", "--no-tags", REMOTE, f"+{ref}:{ref}")
                    return self._resolve(ref)
                if self._resolve(ref) is not None:
                    self._git("update-ref", "-d", ref)
                return None
            return self._resolve(ref)

    def read_note(self, ref: str, commit: str) -> str | None:
        """The note `commit` has on the local `ref` (exactly as stored), or None."""
        with self._locked():
            repo = self._open()
            if self._resolve(ref) is None:
                return None
            try:
                blob: str = repo.git.notes(f"--ref={ref}", "list", commit)
            except git.GitCommandError as exc:
                if exc.status == 1:  # "no note found for object"
                    return None
                raise self._failure("notes", exc) from None
            return self._blob_text(blob.strip())

    def read_notes(self, ref: str, commits: Collection[str] | None = None) -> dict[str, str]:
        """commit -> note text for every note on the local `ref` (only `commits`, when given)."""
        with self._locked():
            if self._resolve(ref) is None:
                return {}
            found: dict[str, str] = {}
            for line in self._git("notes", f"--ref={ref}", "list").splitlines():
                blob, _, target = line.partition(" ")
                if commits is None or target in commits:
                    found[target] = self._blob_text(blob)
            return found

    def write_note(
        self, ref: str, commit: str, text: str, message: str, *, identity: Identity | None = None
    ) -> str:
        """Set `commit`'s note on the local `ref` to `text`: a new notes commit by `identity`.

        Nothing is pushed (`push_notes` publishes). Text and message never carry the git token.
        """
        with self._locked():
            repo = self._open()
            env = _identity_env(identity or self.identity)
            data = redact(text, (self._token,)).encode("utf-8")
            blob = _text(repo.odb.store(IStream(b"blob", len(data), io.BytesIO(data))).hexsha)
            parent = self._resolve(ref)
            try:  # git notes knows the fan-out of a notes tree; we keep only the tree it writes
                repo.git.notes(f"--ref={ref}", "add", "-f", "-C", blob, commit, env=env)
            except git.GitCommandError as exc:
                raise self._failure("notes", exc) from None
            tree = self._git("rev-parse", f"{ref}^{{tree}}")
            with tempfile.TemporaryDirectory(dir=repo.git_dir, prefix="index-") as scratch:
                message_file = Path(scratch, "message")
                message_file.write_text(redact(message, (self._token,)), encoding="utf-8")
                parents = ["-p", parent] if parent else []
                sha: str = repo.git.commit_tree(tree, *parents, "-F", str(message_file), env=env)
            self._git("update-ref", ref, sha)
            return sha

    def push_notes(self, ref: str) -> None:
        """Fast-forward the remote's `ref` to the local one (never forced); PushRejected if it moved."""
        with self._locked():
            infos = self._remote_push(f"{ref}:{ref}", None)
            self._check_push(infos, ref)

    def update_note(
        self,
        ref: str,
        commit: str,
        change: Callable[[str | None], Update | None],
        *,
        identity: Identity | None = None,
        attempts: int = PUSH_ATTEMPTS,
        wait_initial: float = PUSH_WAIT_INITIAL,
        wait_max: float = PUSH_WAIT_MAX,
    ) -> str | None:
        """Fetch `ref`, set `commit`'s note to `change(current note)` and push; on a rejected push again
        (with `update`'s retry policy: a fleet's apply stages share one notes ref).

        `change` gets the note as it is on the freshly fetched ref (None when there is none) and
        returns the new text and the notes commit's message, or None for nothing to do: that is where
        the caller merges its change into another writer's. Each attempt holds the work dir's lock
        from fetch to push. Returns the new notes commit, or None. Never force-pushes.
        """
        retrying = _push_retries(attempts, _full_jitter(wait_initial, wait_max), self.timeout)
        try:
            for attempt in retrying:
                with attempt, self._locked():
                    self.fetch_notes(ref)
                    current = self.read_note(ref, commit)
                    wanted = change(current)
                    if wanted is None or wanted.text == current:
                        return None
                    sha = self.write_note(ref, commit, wanted.text, wanted.message, identity=identity)
                    self.push_notes(ref)
                    return sha
        except PushRejected:
            tries = retrying.statistics["attempt_number"]  # fewer than `attempts` when git.timeout ended it
            raise GitError(
                f"git push to {ref} of {self.shown_url} was rejected {tries} times:"
                " other writers keep moving it; try again later"
            ) from None
        return None  # pragma: no cover - the loop always returns or raises

    # ------------------------------------------------------------------------------------ internals

    def _push(self, sha: str, branch: str, lease: str | None) -> None:
        with self._locked():
            local = f"refs/heads/{branch}"
            self._git("update-ref", local, sha)
            infos = self._remote_push(f"{local}:{local}", None if lease is None else f"{local}:{lease}")
            self._check_push(infos, branch)
            self._git("update-ref", f"refs/remotes/{REMOTE}/{branch}", sha)

    def _remote_push(self, refspec: str, lease: str | None) -> Any:
        repo = self._open()
        options: dict[str, Any] = {"force_with_lease": lease} if lease is not None else {}
        try:
            with repo.git.custom_environment(**self._network_env(repo)):
                return repo.remote(REMOTE).push(refspec, kill_after_timeout=self.timeout, **options)
        except git.GitCommandError as exc:
            raise self._failure("push", exc) from None

    def _check_push(self, infos: Any, branch: str) -> None:
        if not infos:
            error = getattr(infos, "error", None)
            raise (
                self._failure("push", error)
                if error
                else OperationError(f"git push to {branch} of {self.shown_url}: git reported nothing")
            )
        for info in infos:
            if info.flags & git.PushInfo.REJECTED:
                raise PushRejected(f"{branch}: {info.summary.strip()}")
            if info.flags & git.PushInfo.REMOTE_REJECTED and "failed to update ref" in info.summary:
                # Another writer held the ref's lock at that instant: the same race as a
                # non-fast-forward, so fetch, re-plan and retry.
                raise PushRejected(f"{branch}: {info.summary.strip()}")
            if info.flags & (git.PushInfo.REMOTE_REJECTED | git.PushInfo.REMOTE_FAILURE | git.PushInfo.ERROR):
                summary = redact(info.summary.strip(), (self._token,))
                raise GitError(f"git push to {branch} of {self.shown_url} was refused: {summary}")

    def _file_at(self, commit: str, path: str, shown: str | None = None) -> str | None:
        """The file at a commit known to exist (no `rev-parse`: a retry reads it on every attempt).
        Anyone who can push may commit any bytes: a file that is not UTF-8 is bad input (exit 2,
        nothing written), never a UnicodeDecodeError traceback."""
        with self._locked():
            try:
                blob = self._open().commit(commit).tree / path
            except KeyError:
                return None
            data: bytes = blob.data_stream.read()
            return decode_utf8(data, f"{shown or commit[:12]}:{path}", then=" and commit it")

    def _blob_text(self, blob: str) -> str:
        data: bytes = self._open().odb.stream(bytes.fromhex(blob)).read()
        return data.decode("utf-8", errors="replace")

    def _branch_or_commit(self, ref: str) -> str | None:
        """A full commit id is that commit, never a branch someone named like it (a pushed branch
        `<sha>` must not swap the manifest apply reads for an approved commit); anything else is
        the remote's branch of that name, else any commit-ish."""
        if _FULL_SHA.fullmatch(ref):
            return self._resolve(ref)  # git takes 40 hex digits as the object, not a ref
        return self._resolve(f"refs/remotes/{REMOTE}/{ref}") or self._resolve(ref)

    def _resolve(self, ref: str) -> str | None:
        try:
            sha: str = self._git("rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}")
        except OperationError:
            return None
        return sha or None

    def _git(self, *args: str, repo: git.Repo | None = None) -> str:
        repo = repo or self._open()
        network = args[0] in ("fetch", "push", "ls-remote")
        try:
            with repo.git.custom_environment(**(self._network_env(repo) if network else {})):
                out: str = repo.git.execute(
                    ["git", *args], kill_after_timeout=self.timeout if network else None
                )
                return out
        except git.GitCommandError as exc:
            raise self._failure(args[0], exc) from None

    def _failure(self, verb: str, exc: Exception) -> GitError:
        """A git failure as one line: the command, the redacted URL and git's own reason."""
        return GitError(f"git {verb} {self.shown_url}: {redact(git_reason(exc), (self._token,))}")

    def _network_env(self, repo: git.Repo) -> dict[str, str]:
        env = {"GIT_TERMINAL_PROMPT": "0"}
        stall = str(max(1, int(self.timeout)))
        if "GIT_SSH_COMMAND" not in self._inherited and "GIT_SSH" not in self._inherited:
            env["GIT_SSH_COMMAND"] = (
                f"ssh -o BatchMode=yes -o ConnectTimeout=15 -o ServerAliveInterval={stall} "
                "-o ServerAliveCountMax=1"
            )
        # git gives up a stalled transfer by itself too: the kill_after_timeout watchdog does not
        # outlive an interrupted command, which would leave git waiting on a hung server forever.
        settings = {"http.lowSpeedLimit": "1", "http.lowSpeedTime": stall}
        token = self._read_token()
        if token:
            env["GIT_ASKPASS"] = str(Path(repo.git_dir, _ASKPASS))
            env[_PASSWORD_VAR] = token
            # Drop configured credential helpers for this call so the token is what gets used.
            settings["credential.helper"] = ""
        count = int(self._inherited.get("GIT_CONFIG_COUNT", "0") or 0)
        env["GIT_CONFIG_COUNT"] = str(count + len(settings))
        for index, (key, value) in enumerate(settings.items(), start=count):
            env[f"GIT_CONFIG_KEY_{index}"] = key
            env[f"GIT_CONFIG_VALUE_{index}"] = value
        return env

    def _open(self) -> git.Repo:
        """The work dir's repository, created (or re-created, if ours and broken) as needed."""
        if self._repo is not None:
            return self._repo
        git_dir = self.path
        if git_dir.exists() and any(p.name != _LOCK for p in git_dir.iterdir()):
            if not (git_dir / _MARKER).exists():
                # someone's own checkout, or any folder: never taken over (its origin rewritten,
                # its lock files deleted), never deleted
                raise UserError(
                    f"git.workDir: {git_dir}: holds files not made by asg-reconciler (a checkout of "
                    "your own?); point git.workDir at a new or empty directory: it is a cache the "
                    "tool owns"
                )
            try:
                repo = git.Repo(git_dir)
                repo.git.rev_parse("--git-dir")
            except (git.InvalidGitRepositoryError, git.NoSuchPathError, git.GitCommandError):
                shutil.rmtree(git_dir)
                repo = self._init()
        else:
            repo = self._init()
        self._prepare(repo)
        self._repo = repo
        return repo

    def _init(self) -> git.Repo:
        self.path.mkdir(parents=True, exist_ok=True)
        repo = git.Repo.init(self.path, bare=True)
        (self.path / _MARKER).write_text("created by asg-reconciler; safe to delete\n")
        return repo

    def _prepare(self, repo: git.Repo) -> None:
        """Point origin at the URL and clear what a killed run may have left behind."""
        with repo.config_writer() as writer:
            writer.set_value(f'remote "{REMOTE}"', "url", self.url)
            writer.set_value(f'remote "{REMOTE}"', "fetch", f"+refs/heads/*:refs/remotes/{REMOTE}/*")
            writer.set_value("gc", "autoDetach", "false")
        askpass = Path(repo.git_dir, _ASKPASS)
        if not askpass.exists():
            askpass.write_text(_ASKPASS_SCRIPT)
            askpass.chmod(0o700)
        git_dir = Path(repo.git_dir)
        for stale in [*git_dir.glob("*.lock"), *git_dir.glob("refs/**/*.lock")]:
            if stale.name != _LOCK:
                stale.unlink(missing_ok=True)
        for scratch in git_dir.glob("index-*"):
            shutil.rmtree(scratch, ignore_errors=True)

    def _open_lock(self) -> IO[str]:
        """The work dir's lock file, opened for appending (the work dir made as needed). A work dir
        that cannot be made or written (a read-only root filesystem, a file in its place) is the
        config's to fix: a UserError naming git.workDir, never an OSError."""
        fix = (
            "set git.workDir to a writable directory (in a pod with readOnlyRootFilesystem, mount an "
            "emptyDir there, or set XDG_CACHE_HOME to one for the default)"
        )
        if self.path.exists() and not self.path.is_dir():
            raise WorkDirError(
                f"git.workDir: {self.path}: cannot write there (it is a file, not a directory); {fix}"
            )
        try:
            self.path.mkdir(parents=True, exist_ok=True)
            return open(self.path / _LOCK, "a")
        except OSError as exc:
            reason = exc.strerror or type(exc).__name__
            raise WorkDirError(f"git.workDir: {self.path}: cannot write there ({reason}); {fix}") from None

    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        """Serialise runs sharing this work dir (a stale git lock is then safe to remove)."""
        if self._lock_depth:
            self._lock_depth += 1
            try:
                yield
            finally:
                self._lock_depth -= 1
            return
        lock = self._open_lock()
        try:
            fcntl.flock(lock, fcntl.LOCK_EX)
            self._lock_depth = 1
            yield
        finally:
            self._lock_depth = 0
            fcntl.flock(lock, fcntl.LOCK_UN)
            lock.close()


def _full_jitter(initial: float, cap: float) -> Callable[[RetryCallState], float]:
    """A wait anywhere from 0 to unit * 2^(n-1) after the nth rejection, at most `cap` ("full
    jitter"), where unit is the mean time an attempt took, at least `initial`.

    Writers that lost the same race spread over a window that doubles until only about one of them
    tries at a time; measured in attempts, so a slow remote or a busy machine spreads them as widely
    as a fast one, and the first retries of two racing writers cost them a few tens of milliseconds.
    """

    def wait(state: RetryCallState) -> float:
        took = (state.outcome_timestamp or time.monotonic()) - state.start_time - state.idle_for
        unit = max(initial, took / state.attempt_number)
        return Backoff(unit, max(unit, cap), spread=FULL_JITTER).delay(state.attempt_number - 1)

    return wait


def _push_retries(attempts: int, wait: WaitBaseT, timeout: float | None = None) -> Retrying:
    """Retry a fetch-change-push on rejection only, backing off with jitter so racing writers part."""
    stop = stop_after_attempt(attempts)
    return Retrying(
        retry=retry_if_exception_type(PushRejected),
        stop=stop if timeout is None else stop | stop_after_delay(timeout),
        wait=wait,
        reraise=True,
    )


def git_reason(exc: Exception) -> str:
    """git's own one-line reason (`fatal: ...` or `error: ...`) from a GitPython error."""
    text = str(getattr(exc, "stderr", "") or exc).strip()
    wrapped = re.match(r"^stderr: '(.*)'$", text, flags=re.DOTALL)
    lines = [line.strip() for line in (wrapped[1] if wrapped else text).splitlines() if line.strip()]
    for prefix in ("fatal:", "error:"):
        for line in lines:
            if line.startswith(prefix):
                return line[len(prefix) :].strip()
    return lines[-1] if lines else "failed"


def _identity_env(identity: Identity) -> dict[str, str]:
    return {
        "GIT_AUTHOR_NAME": identity.name,
        "GIT_AUTHOR_EMAIL": identity.email,
        "GIT_COMMITTER_NAME": identity.name,
        "GIT_COMMITTER_EMAIL": identity.email,
    }


def _text(value: bytes | str) -> str:
    return value.decode("ascii") if isinstance(value, bytes) else value
