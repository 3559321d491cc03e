"""Approval gates and `approve` against real git (SSH signing, local bare repos) and the fake GitHub.

Keys are throwaway ed25519 keys made with ssh-keygen in temporary directories; the approver's git
configuration is a file passed through GIT_CONFIG_GLOBAL, so nothing under $HOME is read or written.
"""

from __future__ import annotations

import logging
import os
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from reconciler.apply.approval import make_gate
from reconciler.apply.approval.base import ApprovalGate
from reconciler.apply.approval.signed import SignedGate
from reconciler.config.settings import ApprovalConfig, Config, ForgeConfig, GitConfig
from reconciler.domain.errors import OperationError, RefusedError, UserError
from reconciler.domain.verdict import Verdict
from reconciler.gitops.approve import approve
from reconciler.gitops.forge.github import GitHubForge
from reconciler.gitops.manifest import parse_manifest
from reconciler.gitops.repo import Identity, WorkingCopy
from reconciler.runtime.apply_stage import GateAt
from tests.support.git import (
    ALICE,
    BOB,
    BOT,
    CLUSTER,
    MANIFEST_PATH,
    SEED_MANIFEST,
    Person,
    git,
    needs_ssh_keygen,
    show,
)
from tests.support.github_api import BOT as BOT_LOGIN
from tests.support.github_api import FakeGitHub

pytestmark = needs_ssh_keygen

PROPOSAL = "asg-reconciler/test-cluster/scale-down"
PROPOSED = SEED_MANIFEST.replace("    removeInstances: []\n", "    removeInstances: [i-0abc]\n", 1)
MALLORY = Person("Mallory", "mallory@example.com")


@dataclass(frozen=True)
class Key:
    person: Person
    private: Path

    @property
    def public(self) -> str:
        return Path(f"{self.private}.pub").read_text().strip()

    @property
    def fingerprint(self) -> str:
        out = subprocess.run(
            ["ssh-keygen", "-l", "-f", f"{self.private}.pub"], capture_output=True, text=True, check=True
        ).stdout
        return out.split()[1]

    def environ(self, home: Path) -> dict[str, str]:
        """The approver's environment: their git config signs with this key (SSH format)."""
        home.mkdir(parents=True, exist_ok=True)
        config = home / "gitconfig"
        config.write_text(
            f"[user]\n\tname = {self.person.name}\n\temail = {self.person.email}\n"
            f"\tsigningKey = {self.private}\n[gpg]\n\tformat = ssh\n"
        )
        return {**os.environ, "HOME": str(home), "GIT_CONFIG_GLOBAL": str(config), "GIT_CONFIG_NOSYSTEM": "1"}


@dataclass(frozen=True)
class Keys:
    alice: Key
    mallory: Key
    bot: Key
    allowed: Path  # lists alice only


@pytest.fixture(scope="module")
def keys(tmp_path_factory: pytest.TempPathFactory) -> Keys:
    root = tmp_path_factory.mktemp("keys")
    made = {}
    for name, person in (("alice", ALICE), ("mallory", MALLORY), ("bot", BOT)):
        path = root / name
        subprocess.run(
            ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", name, "-f", str(path)], check=True
        )
        made[name] = Key(person, path)
    allowed = root / "allowed_signers"
    allowed.write_text(f"# approvers\n{ALICE.email} {made['alice'].public}\n")
    return Keys(made["alice"], made["mallory"], made["bot"], allowed)


def sign(repo: Path, sha: str, key: Key, branch: str = "main") -> str:
    """`sha` again, signed with `key` (same tree, parents, author, message), and `branch` moved to it."""
    fields = git("log", "-1", "--format=%T %P", sha, cwd=repo).split()
    message = git("log", "-1", "--format=%B", sha, cwd=repo)
    parents = [arg for parent in fields[1:] for arg in ("-p", parent)]
    env = {**key.environ(repo.parent / f"home-{key.person.name.split()[0].lower()}"), **key.person.env()}
    signed = git("commit-tree", "-S", fields[0], *parents, cwd=repo, env=env, input=message).strip()
    git("update-ref", f"refs/heads/{branch}", signed, cwd=repo)
    return signed


def scale_down(repo: Path, person: Person = BOT) -> str:
    return person.commit(repo, "main", {MANIFEST_PATH: PROPOSED}, "capacity(test-cluster): remove i-0abc")


def gate(keys: Keys) -> SignedGate:
    return SignedGate(keys.allowed)


# ------------------------------------------------------------------------------------ signed gate


def test_a_commit_signed_by_an_allowed_key_is_approved(seeded_remote: Path, keys: Keys) -> None:
    sha = sign(seeded_remote, scale_down(seeded_remote, ALICE), keys.alice)
    verdict = gate(keys).check(sha, seeded_remote)
    assert verdict == Verdict(
        True, ALICE.email, f"{sha[:12]} is signed by {ALICE.email} ({keys.alice.fingerprint}), "
        "listed in approval.allowedSigners",
    )  # fmt: skip


def test_the_bots_unsigned_commit_is_refused_with_the_fix(seeded_remote: Path, keys: Keys) -> None:
    verdict = gate(keys).check(scale_down(seeded_remote, BOT), seeded_remote)
    assert not verdict.approved and verdict.by == ""
    assert "is not signed" in verdict.reason and "asg-reconciler approve" in verdict.reason


def test_a_signature_by_a_key_not_listed_is_refused(seeded_remote: Path, keys: Keys) -> None:
    for key in (keys.mallory, keys.bot):  # the bot's key passes only if someone lists it
        sha = sign(seeded_remote, scale_down(seeded_remote, key.person), key)
        verdict = gate(keys).check(sha, seeded_remote)
        assert not verdict.approved
        assert f"signed by key {key.fingerprint}, which approval.allowedSigners" in verdict.reason


def test_the_bots_key_passes_once_someone_lists_it(seeded_remote: Path, keys: Keys, tmp_path: Path) -> None:
    sha = sign(seeded_remote, scale_down(seeded_remote, BOT), keys.bot)
    listed = tmp_path / "with-bot"
    listed.write_text(f"{BOT.email} {keys.bot.public}\n")
    assert SignedGate(listed).check(sha, seeded_remote) == Verdict(
        True, BOT.email, f"{sha[:12]} is signed by {BOT.email} ({keys.bot.fingerprint}), "
        "listed in approval.allowedSigners",
    )  # fmt: skip


def test_a_commit_changed_after_signing_is_refused(seeded_remote: Path, keys: Keys) -> None:
    sha = sign(seeded_remote, scale_down(seeded_remote, ALICE), keys.alice)
    raw = git("cat-file", "commit", sha, cwd=seeded_remote)
    assert "remove i-0abc" in raw
    forged = raw.replace("remove i-0abc", "remove i-0abc and i-0def")
    tampered = git("hash-object", "-t", "commit", "-w", "--stdin", cwd=seeded_remote, input=forged).strip()
    assert "BEGIN SSH SIGNATURE" in git("cat-file", "commit", tampered, cwd=seeded_remote)
    verdict = gate(keys).check(tampered, seeded_remote)
    assert not verdict.approved and "does not match its content" in verdict.reason


def test_a_non_ssh_signature_is_refused_before_git_is_asked(seeded_remote: Path, keys: Keys) -> None:
    raw = git("cat-file", "commit", scale_down(seeded_remote, ALICE), cwd=seeded_remote)
    header, _, message = raw.partition("\n\n")
    pgp = "gpgsig -----BEGIN PGP SIGNATURE-----\n \n iQEz\n -----END PGP SIGNATURE-----"
    sha = git(
        "hash-object",
        "-t",
        "commit",
        "-w",
        "--stdin",
        cwd=seeded_remote,
        input=f"{header}\n{pgp}\n\n{message}",
    ).strip()
    verdict = gate(keys).check(sha, seeded_remote)
    assert not verdict.approved and "OpenPGP signature" in verdict.reason and "SSH" in verdict.reason


def test_a_signers_file_gone_at_check_time_is_a_user_error(
    seeded_remote: Path, keys: Keys, tmp_path: Path
) -> None:
    path = tmp_path / "allowed_signers"
    path.write_text(keys.allowed.read_text())
    signed_gate = make_gate(Config(cluster="c", approval=ApprovalConfig(allowed_signers=str(path))))
    sha = sign(seeded_remote, scale_down(seeded_remote, ALICE), keys.alice)
    assert signed_gate.check(sha, seeded_remote).approved
    path.unlink()
    with pytest.raises(UserError, match=r"^approval.allowedSigners: .* does not exist"):
        signed_gate.check(sha, seeded_remote)


def test_an_unknown_commit_is_an_operation_error(seeded_remote: Path, keys: Keys) -> None:
    with pytest.raises(OperationError, match="git cat-file 000000000000"):
        gate(keys).check("0" * 40, seeded_remote)


# ------------------------------------------------------------------------------------ github-reviews

REPO, TOKEN, ENV = "org/capacity", "ghs_apply-read-token", "CAPACITY_READ_TOKEN"
ABC, EVIL, OLD = "i-0abcabcabcabcabc0", "i-0eeeeeeeeeeeeeee0", "i-0d1d1d1d1d1d1d1d0"
REVIEWED = SEED_MANIFEST.replace("    removeInstances: []\n", f"    removeInstances: [{ABC}]\n", 1)
WITH_EXTRA = SEED_MANIFEST.replace("    removeInstances: []\n", f"    removeInstances: [{ABC}, {EVIL}]\n", 1)


@pytest.fixture(scope="module")
def server() -> Iterator[FakeGitHub]:
    with FakeGitHub(repo=REPO, token=TOKEN) as fake:
        yield fake


@pytest.fixture
def github(server: FakeGitHub) -> FakeGitHub:
    server.reset()
    for login in ("alice", "bob"):
        server.grant(login, "write")
    return server


def reviews_gate(github: FakeGitHub, min_approvals: int = 1, ignore: tuple[str, ...] = ()) -> ApprovalGate:
    forge_config = ForgeConfig("github", REPO, ENV, github.url)
    config = Config(
        cluster=CLUSTER,
        forge=forge_config,
        approval=ApprovalConfig("github-reviews", min_approvals=min_approvals, ignore_reviewers=ignore),
    )
    return make_gate(config, forge=GitHubForge(forge_config, {ENV: TOKEN}, timeout=5, backoff=0))


def opened(github: FakeGitHub, remote: Path, *, author: str | None = None, manifest: str = REVIEWED) -> int:
    """The bot's proposal commit on its branch of `remote`, pushed, and its pull request: opened by the
    bot through the forge, or by `author` (someone else)."""
    github.push(PROPOSAL, propose(remote, manifest))
    if author is not None:
        return github.open_pull(PROPOSAL, author=author)
    forge = GitHubForge(ForgeConfig("github", REPO, ENV, github.url), {ENV: TOKEN}, timeout=5)
    return forge.open(title="scale down", body="| group |", head=PROPOSAL, base="main").number


def merged(
    github: FakeGitHub, remote: Path, number: int, *, login: str = "bob", manifest: str | None = None
) -> str:
    """Merge pull request `number` with a merge commit on main (its head as second parent), as the
    button or a plain `git merge --no-ff` + push does; `manifest` makes the merge's tree differ from
    the head's (an "evil merge" pushed by hand). GitHub keeps `refs/pull/N/head` either way."""
    head = github.pull(number).head_sha
    main = git("rev-parse", "refs/heads/main", cwd=remote).strip()
    files = {MANIFEST_PATH: manifest if manifest is not None else show(remote, f"{head}:{MANIFEST_PATH}")}
    sha = BOB.commit(remote, "main", files, f"Merge pull request #{number}", parents=[main, head])
    git("update-ref", f"refs/pull/{number}/head", head, cwd=remote)
    return github.merge(number, login, sha=sha)


def test_github_reviews_approves_the_merge_of_an_approved_pull_request(
    github: FakeGitHub, seeded_remote: Path
) -> None:
    number = opened(github, seeded_remote)
    github.review(number, "alice", "APPROVED")
    merge = merged(github, seeded_remote, number)
    verdict = reviews_gate(github).check(merge, seeded_remote)
    assert verdict.approved and verdict.by == "alice" and f"#{number}" in verdict.reason, verdict
    paths = [r.path for r in github.requests if r.method == "GET"]
    assert f"/repos/{REPO}/commits/{merge}/pulls" in paths
    assert f"/repos/{REPO}/pulls/{number}/reviews" in paths
    assert f"/repos/{REPO}/collaborators/alice/permission" in paths


def test_github_reviews_ignores_an_approval_of_an_older_head(github: FakeGitHub, seeded_remote: Path) -> None:
    number = opened(github, seeded_remote)
    github.review(number, "alice", "APPROVED")
    github.push(PROPOSAL, propose(seeded_remote))  # a commit nobody reviewed
    merge = merged(github, seeded_remote, number)
    verdict = reviews_gate(github).check(merge, seeded_remote)
    assert not verdict.approved and "has 0 of the 1 approvals" in verdict.reason
    assert "alice (approved an older head" in verdict.reason


def test_github_reviews_refuses_the_head_commit_and_unknown_commits(
    github: FakeGitHub, seeded_remote: Path
) -> None:
    number = opened(github, seeded_remote)
    github.review(number, "alice", "APPROVED")
    head = github.pull(number).head_sha
    merged(github, seeded_remote, number)
    gate = reviews_gate(github)
    for commit in (head, "1234567" * 5 + "12345"):  # listed for the commit, but not merged as it
        verdict = gate.check(commit, seeded_remote)
        assert not verdict.approved and "not the merge commit of a pull request" in verdict.reason


def test_github_reviews_counts_distinct_users_and_pages_reviews(
    github: FakeGitHub, seeded_remote: Path
) -> None:
    number = opened(github, seeded_remote)
    for _ in range(120):  # more than one page of reviews
        github.review(number, "alice", "COMMENTED")
    github.review(number, "alice", "APPROVED")
    github.review(number, "alice", "APPROVED")
    merge = merged(github, seeded_remote, number)
    verdict = reviews_gate(github, min_approvals=2).check(merge, seeded_remote)
    assert not verdict.approved and "has 1 (alice) of the 2 approvals" in verdict.reason


def test_github_reviews_never_counts_the_tokens_own_login(github: FakeGitHub, seeded_remote: Path) -> None:
    """The plan bot's token can submit reviews (Pull requests: write) and its account can write (it
    pushes scale-ups): its approval of a pull request someone else opened is still no person's."""
    github.grant("mallory", "read")
    number = opened(github, seeded_remote, author="mallory")
    github.review(number, BOT_LOGIN, "APPROVED")
    merge = merged(github, seeded_remote, number, login=BOT_LOGIN)
    verdict = reviews_gate(github).check(merge, seeded_remote)
    assert not verdict.approved, verdict
    assert f"{BOT_LOGIN} (the token's own account)" in verdict.reason


def test_github_reviews_never_counts_the_configured_plan_bot(github: FakeGitHub, seeded_remote: Path) -> None:
    """Apply reads with its own token, so the plan bot's machine account is named in the config."""
    github.grant("capacity-bot", "write")
    github.grant("mallory", "read")
    number = opened(github, seeded_remote, author="mallory")
    github.review(number, "capacity-bot", "APPROVED")
    merge = merged(github, seeded_remote, number, login="capacity-bot")
    assert reviews_gate(github).check(merge, seeded_remote).approved  # unknown to the gate: counted
    verdict = reviews_gate(github, ignore=("Capacity-Bot",)).check(merge, seeded_remote)
    assert not verdict.approved and "capacity-bot (listed in approval.ignoreReviewers)" in verdict.reason


def test_github_reviews_never_counts_outsiders_or_bots(github: FakeGitHub, seeded_remote: Path) -> None:
    """On a public repository anyone can approve; an app's `[bot]` account may even have write."""
    github.public = True
    github.grant("renovate[bot]", "write")
    number = opened(github, seeded_remote)
    github.review(number, "outsider", "APPROVED")
    github.review(number, "renovate[bot]", "APPROVED")
    github.grant("triager", "triage")
    github.review(number, "triager", "APPROVED")
    merge = merged(github, seeded_remote, number)
    verdict = reviews_gate(github, min_approvals=2).check(merge, seeded_remote)
    assert not verdict.approved, verdict
    assert "has 0 of the 2 approvals" in verdict.reason
    for why in ("outsider (permission read)", "renovate[bot] (a bot)", "triager (permission read)"):
        assert why in verdict.reason
    asked = {r.path.split("/")[-2] for r in github.requests if r.path.endswith("/permission")}
    assert asked == {"outsider", "triager"}, "a bot is refused before its permission is asked"


def test_github_reviews_approves_with_two_maintainers(github: FakeGitHub, seeded_remote: Path) -> None:
    github.grant("carol", "maintain")
    github.grant("dave", "admin")
    number = opened(github, seeded_remote)
    github.review(number, "carol", "APPROVED")
    github.review(number, "dave", "APPROVED")
    merge = merged(github, seeded_remote, number, login="carol")
    verdict = reviews_gate(github, min_approvals=2).check(merge, seeded_remote)
    assert verdict.approved and verdict.by == "carol, dave", verdict


def test_github_reviews_a_later_request_for_changes_or_a_dismissal_withdraws_an_approval(
    github: FakeGitHub, seeded_remote: Path
) -> None:
    number = opened(github, seeded_remote)
    github.review(number, "alice", "APPROVED")
    github.review(number, "alice", "CHANGES_REQUESTED")
    approval = github.review(number, "bob", "APPROVED")
    merge = merged(github, seeded_remote, number)
    verdict = reviews_gate(github).check(merge, seeded_remote)
    assert not verdict.approved and "changes requested by alice" in verdict.reason

    github.review(number, "alice", "COMMENTED")  # still her latest deciding word: changes requested
    assert not reviews_gate(github).check(merge, seeded_remote).approved
    github.dismiss(number, github.pull(number).reviews[1]["id"])  # her request is dismissed
    assert reviews_gate(github).check(merge, seeded_remote).by == "bob"
    github.dismiss(number, approval["id"])
    verdict = reviews_gate(github).check(merge, seeded_remote)
    assert not verdict.approved and "has 0 of the 1 approvals" in verdict.reason


def test_github_reviews_fails_closed_when_github_cannot_say_who_may_write(
    github: FakeGitHub, seeded_remote: Path
) -> None:
    number = opened(github, seeded_remote)
    github.review(number, "alice", "APPROVED")
    merge = merged(github, seeded_remote, number)
    github.fault = lambda method, path: (502, None) if path.endswith("/permission") else None
    verdict = reviews_gate(github).check(merge, seeded_remote)
    assert not verdict.approved, verdict
    assert "alice (permission unknown: GitHub at" in verdict.reason and "502" in verdict.reason
    assert sum(r.path.endswith("/permission") for r in github.requests) == 3  # retried twice


def test_github_reviews_refuses_a_merge_that_adds_more_than_the_approved_head(
    github: FakeGitHub, seeded_remote: Path
) -> None:
    """A merge commit pushed with plain git marks the pull request merged (merge_commit_sha names it)
    whatever its own tree holds: it may add only the removals the approved head proposes."""
    number = opened(github, seeded_remote)
    github.review(number, "alice", "APPROVED")
    merge = merged(github, seeded_remote, number, login=BOT_LOGIN, manifest=WITH_EXTRA)
    verdict = reviews_gate(github).check(merge, seeded_remote)
    assert not verdict.approved, verdict
    assert f"asg-a/{EVIL}" in verdict.reason and f"asg-a/{ABC}" not in verdict.reason
    assert f"#{number}" in verdict.reason


def test_github_reviews_refuses_a_merge_bringing_back_a_removal_withdrawn_on_main(
    github: FakeGitHub, seeded_remote: Path
) -> None:
    """The head lists a removal its base had, withdrawn on main since: a clean merge drops it, so a
    merge that keeps it adds something the pull request never proposed."""
    listed = SEED_MANIFEST.replace("    removeInstances: []\n", f"    removeInstances: [{OLD}]\n", 1)
    ALICE.commit(seeded_remote, "main", {MANIFEST_PATH: listed}, f"remove {OLD}")
    both = listed.replace(f"[{OLD}]", f"[{OLD}, {ABC}]")
    number = opened(github, seeded_remote, manifest=both)
    github.review(number, "alice", "APPROVED")
    ALICE.commit(seeded_remote, "main", {MANIFEST_PATH: SEED_MANIFEST}, f"keep {OLD} after all")
    verdict = reviews_gate(github).check(merged(github, seeded_remote, number, manifest=both), seeded_remote)
    assert not verdict.approved and f"asg-a/{OLD}" in verdict.reason, verdict


def test_github_reviews_reads_a_squashed_pull_requests_head_from_its_pull_ref(
    github: FakeGitHub, seeded_remote: Path, tmp_path: Path
) -> None:
    """A squash merge's head is on no branch once the branch is deleted, and apply's clone may never
    have fetched it: the gate fetches `refs/pull/N/head`, which GitHub keeps."""
    number = opened(github, seeded_remote)
    github.review(number, "alice", "APPROVED")
    head, main = github.pull(number).head_sha, git("rev-parse", "main", cwd=seeded_remote).strip()
    git("update-ref", f"refs/pull/{number}/head", head, cwd=seeded_remote)
    git("update-ref", "-d", f"refs/heads/{PROPOSAL}", cwd=seeded_remote)
    forge_config = ForgeConfig("github", REPO, ENV, github.url)
    config = Config(
        cluster=CLUSTER, forge=forge_config, approval=ApprovalConfig("github-reviews"), git=GitConfig(url="x")
    )
    for manifest, approved in ((REVIEWED, True), (WITH_EXTRA, False)):
        squash = BOB.commit(
            seeded_remote, "main", {MANIFEST_PATH: manifest}, f"scale down (#{number})", parents=[main]
        )
        github.merge(number, "bob", sha=squash)
        copy = WorkingCopy(
            f"file://{seeded_remote}", tmp_path / f"work-{approved}", Identity(BOT.name, BOT.email)
        )
        copy.sync()
        assert copy.read_file(MANIFEST_PATH, head) is None, "the clone has never seen the head"
        forge = GitHubForge(forge_config, {ENV: TOKEN}, timeout=5, backoff=0)
        gate = GateAt(config, copy, parse_manifest(manifest, "main"), forge=forge)
        verdict = gate.approves(squash)
        assert verdict[0] is approved, verdict
        assert copy.read_file(MANIFEST_PATH, head) == REVIEWED
    assert f"asg-a/{EVIL}" in verdict[1]


# ------------------------------------------------------------------------------------ approve


def propose(remote: Path, manifest: str = PROPOSED) -> str:
    """The bot's proposal branch: one commit on main changing `removeInstances`."""
    parent = git("rev-parse", "refs/heads/main", cwd=remote).strip()
    return BOT.commit(
        remote, PROPOSAL, {MANIFEST_PATH: manifest}, "capacity(test-cluster): remove i-0abc", parents=[parent]
    )


def head(remote: Path, branch: str) -> str | None:
    result = subprocess.run(
        ["git", "rev-parse", "--verify", "--quiet", f"refs/heads/{branch}"],
        cwd=remote,
        capture_output=True,
        text=True,
        check=False,
    )
    return result.stdout.strip() or None


def test_approve_makes_a_signed_no_ff_merge_apply_accepts_and_deletes_the_proposal(
    seeded_remote: Path, keys: Keys, tmp_path: Path
) -> None:
    main, tip = head(seeded_remote, "main"), propose(seeded_remote)
    bots_copy = WorkingCopy(
        f"file://{seeded_remote}",
        tmp_path / "work",
        Identity(BOT.name, BOT.email),
        environ={"GIT_TOKEN": "x"},
    )
    sha = approve(bots_copy, PROPOSAL, "main", environ=keys.alice.environ(tmp_path / "alice"))

    assert head(seeded_remote, "main") == sha and head(seeded_remote, PROPOSAL) is None
    assert git("log", "-1", "--format=%P", sha, cwd=seeded_remote).split() == [main, tip]  # no fast-forward
    assert git("log", "-1", "--format=%an <%ae>|%s", sha, cwd=seeded_remote).strip() == (
        f"{ALICE.name} <{ALICE.email}>|Merge branch '{PROPOSAL}' into main"
    )
    assert show(seeded_remote, f"main:{MANIFEST_PATH}") == PROPOSED
    assert gate(keys).check(sha, seeded_remote) == Verdict(
        True, ALICE.email, f"{sha[:12]} is signed by {ALICE.email} ({keys.alice.fingerprint}), "
        "listed in approval.allowedSigners",
    )  # fmt: skip
    assert not (tmp_path / "work").exists(), "the bot's work dir is never used"


def test_approve_merges_again_on_the_new_main_when_its_push_is_rejected(
    seeded_remote: Path, keys: Keys, tmp_path: Path
) -> None:
    tip = propose(seeded_remote)
    calls: list[str] = []

    def race(sha: str, scratch: Path) -> Verdict:
        calls.append(sha)
        if len(calls) == 1:  # someone lands on main between our fetch and our push
            BOB.commit(seeded_remote, "main", {"README.md": "capacity\n"}, "Add a README")
        return SignedGate(keys.allowed).check(sha, scratch)

    sha = approve(
        str(seeded_remote), PROPOSAL, environ=keys.alice.environ(tmp_path / "alice"), verify=race, wait=0
    )
    bobs = git("log", "-1", "--format=%H", "--author=Bob", "main", cwd=seeded_remote).strip()
    assert len(calls) == 2 and calls[1] == sha != calls[0]
    assert git("log", "-1", "--format=%P", sha, cwd=seeded_remote).split() == [bobs, tip]
    assert show(seeded_remote, "main:README.md") == "capacity\n"
    assert show(seeded_remote, f"main:{MANIFEST_PATH}") == PROPOSED
    assert gate(keys).check(sha, seeded_remote).approved and head(seeded_remote, PROPOSAL) is None


def test_approve_refuses_a_proposal_that_no_longer_merges_cleanly(
    seeded_remote: Path, keys: Keys, tmp_path: Path
) -> None:
    tip = propose(seeded_remote)
    edited = SEED_MANIFEST.replace("    removeInstances: []\n", "    removeInstances: [i-0fff]\n", 1)
    main = BOB.commit(seeded_remote, "main", {MANIFEST_PATH: edited}, "Remove i-0fff by hand")
    with pytest.raises(
        RefusedError, match=rf"no longer merges cleanly into main \(conflict in {MANIFEST_PATH}\)"
    ):
        approve(str(seeded_remote), PROPOSAL, environ=keys.alice.environ(tmp_path / "alice"))
    assert head(seeded_remote, "main") == main and head(seeded_remote, PROPOSAL) == tip


def test_approve_refuses_a_missing_proposal(seeded_remote: Path, keys: Keys, tmp_path: Path) -> None:
    main = head(seeded_remote, "main")
    with pytest.raises(UserError, match=rf"proposal branch '{PROPOSAL}' does not exist on"):
        approve(str(seeded_remote), PROPOSAL, environ=keys.alice.environ(tmp_path / "alice"))
    assert head(seeded_remote, "main") == main


def test_approve_refuses_an_already_merged_or_moved_proposal(
    seeded_remote: Path, keys: Keys, tmp_path: Path
) -> None:
    tip = propose(seeded_remote)
    environ = keys.alice.environ(tmp_path / "alice")
    with pytest.raises(RefusedError, match=r"not the reviewed 0123456789ab: review it again"):
        approve(str(seeded_remote), PROPOSAL, expected_head="0123456789abcdef", environ=environ)
    git("update-ref", "refs/heads/main", tip, cwd=seeded_remote)  # merged some other way
    with pytest.raises(UserError, match=r"already merged into main"):
        approve(str(seeded_remote), PROPOSAL, expected_head=tip[:10], environ=environ)
    assert head(seeded_remote, "main") == tip


def test_approve_needs_the_callers_ssh_signing_key(seeded_remote: Path, keys: Keys, tmp_path: Path) -> None:
    propose(seeded_remote)
    main = head(seeded_remote, "main")
    environ = keys.alice.environ(tmp_path / "alice")
    Path(environ["GIT_CONFIG_GLOBAL"]).write_text(f"[user]\n\tname = A\n\temail = {ALICE.email}\n")
    with pytest.raises(UserError, match=r"gpg.format is 'openpgp'.*user.signingKey"):
        approve(str(seeded_remote), PROPOSAL, environ=environ)
    Path(environ["GIT_CONFIG_GLOBAL"]).write_text(
        f"[user]\n\tname = A\n\temail = {ALICE.email}\n[gpg]\n\tformat = ssh\n"
    )
    with pytest.raises(UserError, match=r"user.signingKey is not set"):
        approve(str(seeded_remote), PROPOSAL, environ=environ)
    assert head(seeded_remote, "main") == main


def test_approve_pushes_nothing_that_apply_would_refuse(
    seeded_remote: Path, keys: Keys, tmp_path: Path
) -> None:
    tip, main = propose(seeded_remote), head(seeded_remote, "main")
    with pytest.raises(
        RefusedError, match=r"nothing was pushed: .*which approval.allowedSigners .* does not list"
    ):
        approve(
            str(seeded_remote),
            PROPOSAL,
            environ=keys.mallory.environ(tmp_path / "mallory"),
            verify=SignedGate(keys.allowed).check,
        )
    assert head(seeded_remote, "main") == main and head(seeded_remote, PROPOSAL) == tip


def test_approve_merges_the_tip_it_fetched_and_keeps_a_branch_that_moved_since(
    seeded_remote: Path, keys: Keys, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    tip = propose(seeded_remote)
    rewritten = SEED_MANIFEST.replace(
        "    removeInstances: []\n", "    removeInstances: [i-0abc, i-0new]\n", 1
    )

    calls: list[str] = []

    def bot_rewrites(sha: str, scratch: Path) -> Verdict:
        calls.append(sha)
        if len(calls) == 1:  # the bot rebuilds its proposal meanwhile, and main moves: a retry
            propose(seeded_remote, rewritten)
            BOB.commit(seeded_remote, "main", {"README.md": "capacity\n"}, "Add a README")
        return Verdict(True, "test", "")

    with caplog.at_level(logging.WARNING, logger="reconciler.gitops.approve"):
        sha = approve(
            str(seeded_remote),
            PROPOSAL,
            environ=keys.alice.environ(tmp_path / "alice"),
            verify=bot_rewrites,
            wait=0,
        )
    assert len(calls) == 2, "the push was rejected once and merged again"
    assert git("log", "-1", "--format=%P", sha, cwd=seeded_remote).split()[1] == tip
    assert show(seeded_remote, f"main:{MANIFEST_PATH}") == PROPOSED, "only what was approved lands"
    assert head(seeded_remote, PROPOSAL) not in (None, tip)
    assert f"kept {PROPOSAL}: it moved after it was merged" in caplog.text


def test_approve_gives_up_after_repeated_rejections(seeded_remote: Path, keys: Keys, tmp_path: Path) -> None:
    propose(seeded_remote)
    environ = keys.alice.environ(tmp_path / "alice")
    calls: list[str] = []

    def always_racing(sha: str, scratch: Path) -> Verdict:
        calls.append(sha)
        BOB.commit(seeded_remote, "main", {"README.md": f"{len(calls)}\n"}, "Another edit")
        return Verdict(True, "test", "")

    with pytest.raises(OperationError, match=r"was rejected 2 times: another writer keeps moving it"):
        approve(str(seeded_remote), PROPOSAL, environ=environ, verify=always_racing, attempts=2, wait=0)
    assert len(calls) == 2


def test_approve_reports_a_remote_that_refuses_the_push(
    seeded_remote: Path, keys: Keys, tmp_path: Path
) -> None:
    propose(seeded_remote)
    environ = keys.alice.environ(tmp_path / "alice")
    hook = seeded_remote / "hooks" / "pre-receive"
    hook.write_text("#!/bin/sh\necho 'main is protected' >&2\nexit 1\n")
    hook.chmod(0o755)
    main = head(seeded_remote, "main")
    with pytest.raises(OperationError, match=r"git push to main of .* was refused: \[remote rejected\]"):
        approve(str(seeded_remote), PROPOSAL, environ=environ, wait=0)
    assert head(seeded_remote, "main") == main and head(seeded_remote, PROPOSAL) is not None
