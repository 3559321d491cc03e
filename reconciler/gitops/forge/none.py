"""`forge.type: none` (the default): push the proposal branch and say where a person opens the PR.

Nothing is opened, edited or read, so no token is needed; the `signed` approval gate works without
any forge. The pull-request page is derived from the git remote when it is a GitHub one (github.com,
or the GitHub Enterprise host of `forge.baseUrl`), because a wrong guess for another host is worse
than the plain message.
"""

from __future__ import annotations

import urllib.parse
from collections.abc import Collection, Mapping
from dataclasses import dataclass, replace

from reconciler.config.settings import ForgeConfig
from reconciler.domain.errors import UserError
from reconciler.gitops.forge.base import CLOSED, UNOPENED, PullRequest, Reviews

NAME = "none"
GITHUB_WEB_HOST = "github.com"
DEFAULT_API = "https://api.github.com"


@dataclass(frozen=True)
class NoForge:
    """The `Forge` that only knows where the pull request would go."""

    git_url: str = ""
    web_hosts: tuple[str, ...] = (GITHUB_WEB_HOST,)

    name = NAME
    opens_pull_requests = False

    def ready(self) -> None:
        """Nothing to be ready: the branch is pushed and a person opens the pull request."""

    def find_open(self, head: str) -> PullRequest | None:
        return None  # nothing was opened, so nothing is open

    def get(self, number: int) -> PullRequest:
        raise UserError(
            f"forge.type: none keeps no pull requests, so #{number} cannot be read; "
            "set forge.type github (with forge.repo) to track pull requests"
        )

    def open(self, *, title: str, body: str, head: str, base: str) -> PullRequest:
        url = compare_url(self.git_url, base, head, title=title, web_hosts=self.web_hosts)
        if url:
            message = f"pushed {head}; open the pull request at {url}"
        else:
            message = (
                f"pushed {head}; open a pull request from {head} into {base} by hand "
                "(forge.type is none, so none was opened)"
            )
        return PullRequest(0, url, UNOPENED, head, base, title, body, message=message)

    def update(self, pr: PullRequest, *, title: str, body: str) -> PullRequest:
        return pr.with_text(title, body)  # nothing to send: the next `open` prints the new link

    def comment(self, pr: PullRequest, body: str) -> None:
        return None  # no conversation to write to; the reason is in the plan output and git log

    def upsert_comment(
        self, number: int, marker: str, body: str, *, legacy: tuple[str, ...] = (), every: bool = False
    ) -> str:
        raise UserError(
            f"forge.type: none keeps no pull requests, so nothing can be written on #{number}; "
            "set forge.type github (with forge.repo), or drop --comment and print the result"
        )

    def close(self, pr: PullRequest, reason: str) -> PullRequest:
        return replace(pr, state=CLOSED, message=f"no pull request to close for {pr.head}: {reason}")

    def reviews(self, pr: PullRequest, head_sha: str, *, ignore: Collection[str] = ()) -> Reviews:
        raise UserError(
            "approval.mode: github-reviews needs forge.type github (forge.type is none); "
            "use approval.mode signed, which needs no forge"
        )

    def pull_for_commit(self, sha: str) -> PullRequest | None:
        raise UserError(
            "approval.mode: github-reviews needs forge.type github (forge.type is none); "
            "use approval.mode signed, which needs no forge"
        )


def create(config: ForgeConfig, git_url: str = "", environ: Mapping[str, str] | None = None) -> NoForge:
    """`git_url` is the capacity repo's remote; a GitHub Enterprise `forge.baseUrl` adds its host."""
    del environ  # no token: nothing is sent anywhere
    hosts = [GITHUB_WEB_HOST]
    api_host = urllib.parse.urlsplit(config.base_url).hostname
    if config.base_url.rstrip("/") != DEFAULT_API and api_host and api_host not in hosts:
        hosts.append(api_host)
    return NoForge(git_url, tuple(hosts))


def repo_web_url(git_url: str, web_hosts: tuple[str, ...] = (GITHUB_WEB_HOST,)) -> str | None:
    """`https://HOST/owner/name` for a GitHub remote in any git URL form, else None.

    Accepts `https://[user[:token]@]HOST/owner/name[.git]`, `ssh://git@HOST[:port]/owner/name.git`,
    `git@HOST:owner/name.git` and `git://HOST/owner/name`; credentials are dropped, never echoed.
    """
    url = git_url.strip()
    if not url:
        return None
    scheme = "https"
    if "://" in url:
        parts = urllib.parse.urlsplit(url)
        if parts.scheme not in ("https", "http", "ssh", "git", "git+ssh", "ssh+git"):
            return None
        if parts.scheme == "http":
            scheme = "http"
        host, path = parts.hostname or "", parts.path
    else:
        userhost, colon, path = url.partition(":")
        if not colon or "/" in userhost:  # a local path, not scp-like user@host:path
            return None
        host = userhost.rpartition("@")[2].lower()
    if host.lower() not in {h.lower() for h in web_hosts}:
        return None
    path = path.strip("/")
    path = path.removesuffix(".git")
    segments = path.split("/")
    if len(segments) != 2 or not all(segments):
        return None
    return f"{scheme}://{host.lower()}/{segments[0]}/{segments[1]}"


def compare_url(
    git_url: str, base: str, head: str, *, title: str = "", web_hosts: tuple[str, ...] = (GITHUB_WEB_HOST,)
) -> str:
    """GitHub's "open a pull request" page for `head` into `base`, title filled in; "" if unknown."""
    repo = repo_web_url(git_url, web_hosts)
    if repo is None:
        return ""
    query = {"expand": "1"}
    if title:
        query["title"] = title
    branches = f"{urllib.parse.quote(base, safe='/')}...{urllib.parse.quote(head, safe='/')}"
    return f"{repo}/compare/{branches}?{urllib.parse.urlencode(query, quote_via=urllib.parse.quote)}"
