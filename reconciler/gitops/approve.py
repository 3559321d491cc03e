"""`asg-reconciler approve PROPOSAL`: merge a scale-down proposal with the caller's own signature.

This is how a person approves under `approval.mode: signed`: a `--no-ff` merge of the proposal
branch into `git.branch`, signed with the caller's SSH key, which the signed gate then verifies
against `approval.allowedSigners`. Everything about the caller comes from their own git
configuration and environment: `user.name`, `user.email`, `user.signingKey` with `gpg.format ssh`,
and their own credentials for the remote (ssh agent, credential helper). The bot's work dir, token
and identity are never used, and credentials written into an https URL are dropped.

The work happens in a temporary bare repository: the merge is computed with
`git merge-tree --write-tree` (git 2.38 or newer) and committed with `git commit-tree -S`, so no work
tree is checked out. The proposal's tip is fixed when it is first fetched: a rejected push (someone
moved the branch) fetches the new main and merges that same tip again, so what lands is what was
approved even if the bot rewrites the branch meanwhile. The proposal branch is deleted afterwards
only if it still points at that tip.
"""

from __future__ import annotations

import logging
import os
import subprocess
import tempfile
import time
import urllib.parse
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from reconciler.config.documents import decode_utf8
from reconciler.domain.backoff import Backoff
from reconciler.domain.errors import OperationError, RefusedError, UserError
from reconciler.domain.verdict import Verdict
from reconciler.gitops.errors import GitError
from reconciler.gitops.repo import WorkingCopy, redact

log = logging.getLogger(__name__)

_REPO_VARS = ("GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE", "GIT_OBJECT_DIRECTORY", "GIT_COMMON_DIR")
_SIGNING_HINT = (
    "approve signs the merge with your own SSH key: git config --global gpg.format ssh && "
    "git config --global user.signingKey ~/.ssh/id_ed25519.pub (the key listed in approval.allowedSigners)"
)
_MAX_WAIT = 30.0  # seconds: the longest pause between two pushes racing another writer


@dataclass(frozen=True)
class _Pushed:
    ok: bool
    retry: bool  # rejected because the branch moved: fetch, merge again, push again
    reason: str


def approve(
    repo: str | WorkingCopy,
    proposal_branch: str,
    main_branch: str = "main",
    *,
    expected_head: str | None = None,
    verify: Callable[[str, Path], Verdict] | None = None,
    manifest: tuple[str, Callable[[str, str], str | None]] | None = None,
    environ: Mapping[str, str] | None = None,
    attempts: int = 5,
    wait: float = 0.2,
    timeout: float = 120.0,
) -> str:
    """Merge `proposal_branch` into `main_branch` as a commit signed by the caller; return its sha.

    `repo` is the capacity repository's URL, or a WorkingCopy whose URL (only) is used.
    `expected_head`: the proposal commit the person reviewed; refuse if the branch is elsewhere.
    `verify`: called with the signed merge and the scratch repository before anything is pushed
    (the CLI passes the signed gate's `check` when it can read `approval.allowedSigners`), so a key
    apply would not accept is refused here instead of landing an unapprovable merge.
    `manifest`: (path, problem(text, label) -> one line or None). A main whose manifest at `path` does
    not parse is refused, and so is a merge whose result does not: a signed merge onto a broken main
    must not become the approval of whatever the broken commits slipped in (apply would refuse those
    removals anyway; refusing here says so before anything is pushed).
    `environ`: the caller's environment (git config via HOME / GIT_CONFIG_GLOBAL, ssh agent).

    Raises UserError (no such proposal, already merged, no signing key configured), RefusedError
    (conflicts with main, moved since review, `verify` said no) or OperationError (git failed,
    pushes rejected `attempts` times).
    """
    url = _without_https_credentials(repo.url if isinstance(repo, WorkingCopy) else repo)
    git = _Git(url, environ if environ is not None else os.environ, timeout)
    with tempfile.TemporaryDirectory(prefix="asg-reconciler-approve-") as scratch:
        git.cwd = Path(scratch)
        git.run("init", "--quiet", "--bare", scratch)
        heads = git.remote_heads(main_branch, proposal_branch)  # what there is to approve comes first
        if proposal_branch not in heads:
            raise UserError(
                f"proposal branch {proposal_branch!r} does not exist on {git.shown_url}: nothing to "
                "approve (it may have been merged or closed already)"
            )
        if main_branch not in heads:
            raise UserError(f"git.branch: {main_branch!r} does not exist on {git.shown_url}")
        _check_signing_config(git)
        git.fetch(f"+refs/heads/{proposal_branch}:refs/proposal", f"+refs/heads/{main_branch}:refs/main")
        proposal = git.run("rev-parse", "refs/proposal^{commit}").strip()  # fixed from here on
        if expected_head and not proposal.startswith(expected_head.lower()):
            raise RefusedError(
                f"proposal {proposal_branch} is at {proposal[:12]}, not the reviewed {expected_head[:12]}: "
                "review it again"
            )
        for attempt in range(1, attempts + 1):
            if attempt > 1:
                git.fetch(f"+refs/heads/{main_branch}:refs/main")
            main = git.run("rev-parse", "refs/main^{commit}").strip()
            if git.is_ancestor(proposal, main):
                raise UserError(
                    f"proposal {proposal_branch} ({proposal[:12]}) is already merged into {main_branch}: "
                    "nothing to approve. If apply refuses what it lists as not approved (a merge made "
                    "with the forge's button carries no signature apply accepts), run `asg-reconciler "
                    f"plan`: it withdraws those removals from main and proposes them again; then run "
                    f"`asg-reconciler approve {proposal_branch}`"
                )
            if manifest is not None:
                _check_manifest(git, manifest, main, f"{main_branch} ({main[:12]})", "fix it there first")
            tree = _merge_tree(git, main, proposal, proposal_branch, main_branch)
            if manifest is not None:
                _check_manifest(git, manifest, tree, "the merge", "resolve it on the proposal branch")
            sha = _signed_merge(git, tree, main, proposal, proposal_branch, main_branch)
            if verify is not None:
                verdict = verify(sha, git.cwd)
                if not verdict.approved:
                    raise RefusedError(
                        f"apply would not accept this approval, so nothing was pushed: {verdict.reason}"
                    )
            pushed = git.push(f"{sha}:refs/heads/{main_branch}")
            if pushed.ok:
                _delete_branch(git, proposal_branch, proposal)
                return sha
            if not pushed.retry:
                raise GitError(f"git push to {main_branch} of {git.shown_url} was refused: {pushed.reason}")
            if attempt < attempts:
                time.sleep(Backoff(wait, max(wait, _MAX_WAIT), spread=(1.0, 2.0)).delay(attempt - 1))
        raise GitError(
            f"git push to {main_branch} of {git.shown_url} was rejected {attempts} times: another "
            "writer keeps moving it; run approve again"
        )


def _check_signing_config(git: _Git) -> None:
    """The caller's git config (read where the merge is made) signs with SSH and names them."""
    for key, variable in (("user.name", "GIT_COMMITTER_NAME"), ("user.email", "GIT_COMMITTER_EMAIL")):
        if not git.config(key) and not git.env.get(variable):
            raise UserError(f"git config {key} is not set: the approval merge is made in your name")
    fmt = git.config("gpg.format") or "openpgp"
    if fmt != "ssh":
        raise UserError(
            f"git config gpg.format is {fmt!r}, but approval.mode signed verifies SSH signatures; "
            + _SIGNING_HINT
        )
    if not git.config("user.signingKey") and not git.config("gpg.ssh.defaultKeyCommand"):
        raise UserError(f"git config user.signingKey is not set; {_SIGNING_HINT}")


def _check_manifest(
    git: _Git, manifest: tuple[str, Callable[[str, str], str | None]], rev: str, where: str, fix: str
) -> None:
    path, problem = manifest
    data = git.blob(f"{rev}:{path}")
    if data is None:
        return  # no manifest there: nothing that could hide a removal
    label = f"{rev[:12]}:{path}"
    try:
        found = problem(decode_utf8(data, label, then=" and commit it"), label)
    except UserError as exc:  # not UTF-8: as unreadable as a YAML error
        found = str(exc)
    if found is not None:
        raise RefusedError(
            f"the manifest of {where} cannot be read ({found}); approving on top of it would approve "
            f"whatever it lists, so nothing was merged: {fix}, then approve again"
        )


def _merge_tree(git: _Git, main: str, proposal: str, proposal_branch: str, main_branch: str) -> str:
    result = git.call("merge-tree", "--write-tree", "--name-only", "--no-messages", main, proposal)
    lines = result.stdout.splitlines()
    if result.returncode == 0 and lines:
        return lines[0].strip()
    if result.returncode == 1 and lines:
        files = ", ".join(line for line in lines[1:] if line.strip()) or "some files"
        raise RefusedError(
            f"proposal {proposal_branch} no longer merges cleanly into {main_branch} (conflict in "
            f"{files}): let the next plan rebuild it, or resolve it on the branch and approve again"
        )
    raise GitError(f"git merge-tree failed (approve needs git 2.38 or newer): {git.reason(result)}")


def _signed_merge(
    git: _Git, tree: str, main: str, proposal: str, proposal_branch: str, main_branch: str
) -> str:
    # The subject is git's own merge subject, so `history` names the proposal it merged.
    message = (
        f"Merge branch '{proposal_branch}' into {main_branch}\n\n"
        "Approved with `asg-reconciler approve`: this merge is signed by the approver's own key.\n"
    )
    result = git.call("commit-tree", "-S", tree, "-p", main, "-p", proposal, input=message)
    if result.returncode != 0:
        raise UserError(f"could not sign the merge with your key: {git.reason(result)}; {_SIGNING_HINT}")
    return result.stdout.strip()


def _delete_branch(git: _Git, branch: str, tip: str) -> None:
    try:
        pushed = git.push(f":refs/heads/{branch}", lease=f"refs/heads/{branch}:{tip}")
    except OperationError as exc:
        log.warning("merged, but could not delete %s: %s", branch, exc)
        return
    if not pushed.ok:
        log.warning("merged, but kept %s: it moved after it was merged (%s)", branch, pushed.reason)


def _without_https_credentials(url: str) -> str:
    """An http(s) URL without `user:password@` (a bot token must not be reused); others as given,
    since `git@` in an ssh URL is a user name, not a credential."""
    parts = urllib.parse.urlsplit(url)
    if parts.scheme.lower() in ("http", "https") and "@" in parts.netloc:
        return parts._replace(netloc=parts.netloc.rpartition("@")[2]).geturl()
    return url


class _Git:
    """git in the scratch repository, with the caller's environment; errors scrubbed of the URL."""

    def __init__(self, url: str, environ: Mapping[str, str], timeout: float) -> None:
        self.url = url
        self.shown_url = redact(url)
        self.env = {k: v for k, v in environ.items() if k not in _REPO_VARS}
        self.timeout = timeout
        self.cwd = Path(".")

    def call(
        self, *args: str, input: str | None = None, network: bool = False
    ) -> subprocess.CompletedProcess[str]:
        try:
            return subprocess.run(
                ["git", *args],
                cwd=self.cwd,
                env=self.env,
                input=input,
                capture_output=True,
                text=True,
                timeout=self.timeout if network else None,
                check=False,
            )
        except subprocess.TimeoutExpired:
            raise GitError(f"git {args[0]} {self.shown_url}: no answer within {self.timeout:g}s") from None
        except OSError as exc:
            raise GitError(f"cannot run git: {exc}") from None

    def blob(self, spec: str) -> bytes | None:
        """`git show SPEC` as bytes, None when there is no such file: a file's text is decoded by
        `decode_utf8` (an error naming its line), never by the locale (a UnicodeDecodeError)."""
        try:
            result = subprocess.run(
                ["git", "show", spec], cwd=self.cwd, env=self.env, capture_output=True, check=False
            )
        except OSError as exc:
            raise GitError(f"cannot run git: {exc}") from None
        return result.stdout if result.returncode == 0 else None

    def run(self, *args: str, network: bool = False) -> str:
        result = self.call(*args, network=network)
        if result.returncode != 0:
            where = f" {self.shown_url}" if network else ""
            raise GitError(f"git {args[0]}{where}: {self.reason(result)}")
        return result.stdout

    def reason(self, result: subprocess.CompletedProcess[str]) -> str:
        lines = [line.strip() for line in result.stderr.splitlines() if line.strip()]
        for prefix in ("fatal:", "error:"):
            for line in lines:
                if line.startswith(prefix):
                    return redact(line[len(prefix) :].strip())
        return redact(lines[-1]) if lines else f"exit status {result.returncode}"

    def config(self, key: str) -> str:
        return self.call("config", "--get", key).stdout.strip()

    def remote_heads(self, *branches: str) -> dict[str, str]:
        out = self.run("ls-remote", "--heads", self.url, *(f"refs/heads/{b}" for b in branches), network=True)
        heads = {}
        for line in out.splitlines():
            sha, _, ref = line.partition("\t")
            heads[ref.removeprefix("refs/heads/")] = sha
        return heads

    def fetch(self, *refspecs: str) -> None:
        self.run("fetch", "--quiet", "--no-tags", self.url, *refspecs, network=True)

    def is_ancestor(self, ancestor: str, descendant: str) -> bool:
        return self.call("merge-base", "--is-ancestor", ancestor, descendant).returncode == 0

    def push(self, refspec: str, *, lease: str | None = None) -> _Pushed:
        options = [f"--force-with-lease={lease}"] if lease else []
        result = self.call("push", "--porcelain", *options, self.url, refspec, network=True)
        for line in result.stdout.splitlines():
            flag, _, rest = line.partition("\t")
            if flag not in ("!", " ", "-", "+", "*", "="):
                continue
            summary = rest.partition("\t")[2].strip()
            if flag != "!":
                return _Pushed(True, False, summary)
            # [rejected]: the branch moved (non-fast-forward, a stale lease); a remote's "failed to
            # update ref" is another writer holding the ref at that instant: both mean "try again".
            moved = summary.startswith("[rejected]") or "failed to update ref" in summary
            return _Pushed(False, moved, redact(summary))
        raise GitError(f"git push {self.shown_url}: {self.reason(result)}")
