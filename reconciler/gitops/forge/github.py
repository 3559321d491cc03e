"""`forge.type: github`: pull requests through the GitHub REST API (github.com or GitHub Enterprise).

A thin stdlib client rather than PyGithub: PyGithub would work (custom base URL, plain http) but adds
PyNaCl, PyJWT and cryptography to the plan image for seven endpoints, sleeps between requests by
default and fills lazy objects with extra GETs, while here every call is visible and faked exactly.

Endpoints (and nothing else; tests/fakes/github_api.py serves exactly these):
`GET /repos/{repo}` (only to explain a 404), `GET|POST /repos/{repo}/pulls`,
`GET|PATCH /repos/{repo}/pulls/{n}`, `GET /repos/{repo}/pulls/{n}/reviews`,
`POST /repos/{repo}/issues/{n}/comments`, for `check --comment` `GET /repos/{repo}/issues/{n}/comments`,
`PATCH /repos/{repo}/issues/comments/{id}` and `GET /user` (who the token is, unless `forge.botLogin`
says), for the `github-reviews` approval gate `GET /repos/{repo}/commits/{sha}/pulls`, and to count an
approval `GET /repos/{repo}/collaborators/{user}/permission` (only people who may write count, as in
branch protection) and `GET /user` (the token's own account never counts).

The token is read at every request, from the file `forge.tokenFile` when set (a GitHub App
installation token expires after an hour; whatever refreshes the file, `run` uses the new one) else
from the environment variable `forge.tokenEnv`; it is sent only to `forge.baseUrl` (redirects are
not followed, so it never travels elsewhere), and never appears in a message: errors name the file
or the variable instead.

Rate limits are waited out as GitHub asks (`Retry-After`; `X-RateLimit-Remaining: 0` until
`X-RateLimit-Reset`; a secondary limit without either: a minute, then longer), within `max_wait`
seconds in all per call; a longer wait is an error saying when to try again.
"""

from __future__ import annotations

import http.client
import json
import os
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, field, replace
from email.message import Message
from pathlib import Path
from typing import Any

import tenacity

from reconciler.config.settings import ForgeConfig
from reconciler.domain.backoff import Backoff
from reconciler.domain.errors import OperationError, ReconcilerError, UserError
from reconciler.gitops.errors import ForgeError
from reconciler.gitops.forge.base import (
    CLOSED,
    OPEN,
    PullRequest,
    Review,
    Reviews,
    count_reviews,
    latest_decisions,
    same_text,
)

NAME = "github"
PERMISSION = "pull requests: write"
API_VERSION = "2022-11-28"
PAGE_SIZE = 100
USER_AGENT = "asg-reconciler"
SECONDARY_WAIT = 60.0  # a secondary rate limit that names no time: GitHub asks for a minute at least
_SECONDARY = Backoff(SECONDARY_WAIT, SECONDARY_WAIT * 2**6)  # then longer (the call's max_wait ends it first)
_READ_REPO = "read the repository"


class _Ambiguous(UserError):
    """Comments with check's marker by two bots, and this token cannot say which it is."""


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    """A redirect would carry the token to another URL; a moved repository is reported instead."""

    def redirect_request(self, *args: Any, **kwargs: Any) -> None:
        return None


@dataclass(frozen=True)
class _Response:
    status: int
    data: Any
    headers: Message


@dataclass(frozen=True)
class GitHubForge:
    """The GitHub implementation of `Forge`; `environ` is injectable for tests."""

    config: ForgeConfig
    environ: Mapping[str, str] = field(default_factory=lambda: os.environ, repr=False)
    timeout: float = 15.0
    retries: int = 2  # extra attempts for reads that hit a network error or a 5xx
    backoff: float = 0.5  # seconds, doubled per attempt
    # seconds one call may wait for rate limits, in all: one secondary-limit minute, and below the
    # three `run.interval`s after which `run`'s /healthz calls a stage stalled
    max_wait: float = 60.0
    sleep: Callable[[float], None] = field(default=time.sleep, repr=False, compare=False)
    _login: dict[str, str | None] = field(default_factory=dict, repr=False, compare=False)

    name = NAME
    opens_pull_requests = True

    # ------------------------------------------------------------------ the Forge interface

    def ready(self) -> None:
        self._token()

    def find_open(self, head: str) -> PullRequest | None:
        owner = self.config.repo.split("/", 1)[0]
        query = {"state": "open", "head": f"{owner}:{head}", "per_page": str(PAGE_SIZE)}
        pulls = self._get_all(f"{self._repo_path}/pulls", query, "list pull requests")
        mine = sorted((p for p in pulls if self._ours(p, head)), key=lambda p: int(p["number"]))
        if not mine:
            return None
        pr = _pull(mine[0])
        return replace(pr, message=f"pull request #{pr.number}: {pr.url}")

    def _ours(self, pull: dict[str, Any], head: str) -> bool:
        """Filter again: `head` is owner-qualified, and a fork's branch of that name is not ours."""
        repo = _get(pull, "head", "repo", "full_name")
        same_repo = repo is None or str(repo).lower() == self.config.repo.lower()
        return bool(_get(pull, "head", "ref") == head and same_repo)

    def get(self, number: int) -> PullRequest:
        response = self._call("GET", f"{self._repo_path}/pulls/{number}", what=f"read pull request #{number}")
        return _pull(response.data)

    def open(self, *, title: str, body: str, head: str, base: str) -> PullRequest:
        payload = {"title": title, "body": body, "head": head, "base": base}
        try:
            response = self._call(
                "POST", f"{self._repo_path}/pulls", payload, what="open a pull request", unprocessable=True
            )
        except _Unprocessable as exc:
            if "already exists" not in exc.detail:
                raise exc.error from None
            existing = self.find_open(head)  # another planner opened it first: adopt theirs
            if existing is None:
                raise exc.error from None
            return self.update(existing, title=title, body=body)
        pr = _pull(response.data)
        return replace(pr, message=f"opened pull request #{pr.number}: {pr.url}")

    def update(self, pr: PullRequest, *, title: str, body: str) -> PullRequest:
        changes: dict[str, str] = {}
        if not same_text(pr.title, title):
            changes["title"] = title
        if not same_text(pr.body, body):
            changes["body"] = body
        if not changes:
            return replace(pr, message=f"pull request #{pr.number} unchanged: {pr.url}")
        response = self._call(
            "PATCH", f"{self._repo_path}/pulls/{pr.number}", changes, what=f"update pull request #{pr.number}"
        )
        updated = _pull(response.data)
        return replace(updated, message=f"updated pull request #{updated.number}: {updated.url}")

    def comment(self, pr: PullRequest, body: str) -> None:
        self._call(
            "POST",
            f"{self._repo_path}/issues/{pr.number}/comments",
            {"body": body},
            what=f"comment on pull request #{pr.number}",
        )

    def upsert_comment(
        self, number: int, marker: str, body: str, *, legacy: tuple[str, ...] = (), every: bool = False
    ) -> str:
        if not body.startswith(marker + "\n"):
            raise ValueError("the comment body must start with its marker line")
        comments = self._get_all(
            f"{self._repo_path}/issues/{number}/comments",
            {"per_page": str(PAGE_SIZE)},
            f"list the comments of pull request #{number}",
        )
        # Ours: the marker as its first line and written by this token's identity. Anyone can paste
        # the marker into a comment of their own; editing theirs would leave our old verdict standing.
        marked = [c for c in comments if _first_line(c) in (marker, *legacy) and c.get("id")]
        try:
            mine = self._mine(marked, number)
        except _Ambiguous:
            if not every:
                raise
            return self._edit_every(number, [c for c in marked if _get(c, "user", "type") == "Bot"], body)
        ours = [c for c in mine if _first_line(c) == marker] or mine
        if not ours:
            response = self._call(
                "POST",
                f"{self._repo_path}/issues/{number}/comments",
                {"body": body},
                what=f"comment on pull request #{number}",
            )
            login = _get(response.data, "user", "login")
            if login:
                self._login.setdefault("login", str(login))  # a later upsert edits this one
            return f"commented on pull request #{number}: {_get(response.data, 'html_url') or ''}".rstrip(
                ": "
            )
        latest = ours[-1]
        url = str(latest.get("html_url") or "")
        if same_text(str(latest.get("body") or ""), body):
            return f"comment on pull request #{number} unchanged: {url}".rstrip(": ")
        self._call(
            "PATCH",
            f"{self._repo_path}/issues/comments/{int(latest['id'])}",
            {"body": body},
            what=f"update the comment on pull request #{number}",
        )
        return f"updated the comment on pull request #{number}: {url}".rstrip(": ")

    def _mine(self, comments: list[dict[str, Any]], number: int) -> list[dict[str, Any]]:
        """The comments this token wrote. Its login is `forge.botLogin`, else `GET /user`'s. A GitHub
        App installation token (a workflow's GITHUB_TOKEN is one) may not read `/user` (403): then
        ours are those by a bot (`user.type` Bot; a person's account never is one), as long as they
        are all by one bot; comments with the marker by two bots are ambiguous: name ours."""
        if not comments:
            return []
        me = self._own_login()
        if me is not None:
            return [c for c in comments if str(_get(c, "user", "login") or "").lower() == me.lower()]
        bots = [c for c in comments if _get(c, "user", "type") == "Bot"]
        logins = sorted({str(_get(c, "user", "login") or "") for c in bots})
        if len(logins) > 1:
            raise _Ambiguous(
                f"forge.botLogin: comments on pull request #{number} with check's marker are by "
                f"{', '.join(logins)}, and this token (a GitHub App's) cannot tell which is itself; set "
                "forge.botLogin to the login it comments as (the App's slug plus [bot], e.g. my-app[bot])"
            )
        return bots

    def _edit_every(self, number: int, comments: list[dict[str, Any]], body: str) -> str:
        """`body` on each of `comments` (ours is among them, and which one GitHub will not say);
        one GitHub refuses to let us edit (403) is left: it is not ours."""
        edited = 0
        for comment in comments:
            if same_text(str(comment.get("body") or ""), body):
                edited += 1
                continue
            try:
                self._call(
                    "PATCH",
                    f"{self._repo_path}/issues/comments/{int(comment['id'])}",
                    {"body": body},
                    what=f"update a comment on pull request #{number}",
                    forbidden_ok=True,
                )
            except _Forbidden:
                continue
            edited += 1
        return (
            f"wrote on {edited} bot comment(s) with check's marker on pull request #{number}: ours cannot be "
            "told from another bot's (set forge.botLogin)"
        )

    def _own_login(self) -> str | None:
        """Who this token comments as: `forge.botLogin`, else `GET /user`; None when GitHub will
        not say (403: an App installation token, a workflow's GITHUB_TOKEN)."""
        if self.config.bot_login:
            return self.config.bot_login
        if "login" not in self._login:
            try:
                response = self._call("GET", "/user", what="read the token's own user", forbidden_ok=True)
            except _Forbidden:
                return None
            self._login["login"] = str(_get(response.data, "login") or "") or None
        return self._login["login"]

    def close(self, pr: PullRequest, reason: str) -> PullRequest:
        if pr.state == CLOSED:
            return pr
        # close first: if a person merged it meanwhile, this fails and no misleading comment is left
        response = self._call(
            "PATCH",
            f"{self._repo_path}/pulls/{pr.number}",
            {"state": "closed"},
            what=f"close pull request #{pr.number}",
        )
        closed = _pull(response.data)
        self.comment(closed, reason)
        return replace(closed, message=f"closed pull request #{closed.number}: {closed.url}")

    def reviews(self, pr: PullRequest, head_sha: str, *, ignore: Collection[str] = ()) -> Reviews:
        items = self._get_all(
            f"{self._repo_path}/pulls/{pr.number}/reviews",
            {"per_page": str(PAGE_SIZE)},
            f"list reviews of pull request #{pr.number}",
        )
        reviews = [
            Review(
                login=str(_get(item, "user", "login") or ""),
                state=str(item.get("state") or ""),
                commit_id=str(item.get("commit_id") or ""),
                id=int(item.get("id") or 0),
                user_type=str(_get(item, "user", "type") or "User"),
                author_association=str(item.get("author_association") or ""),
            )
            for item in items
        ]
        never = {login: "listed in approval.ignoreReviewers" for login in ignore}
        if any(r.state.upper() == "APPROVED" for r in latest_decisions(reviews).values()):
            own = self._token_login()  # asked only when someone's approval is to be judged
            if own:
                never[own] = "the token's own account"
        if pr.author:
            never[pr.author] = "the pull request's author"
        return count_reviews(reviews, head_sha, permission=self._permission, never=never)

    def _permission(self, login: str) -> str:
        """`login`'s base role on the repository (admin, write, read, none; GitHub reports maintain
        as write), from `GET .../collaborators/{login}/permission` (Metadata: read). A login GitHub
        does not know (404) may do nothing."""
        response = self._call(
            "GET",
            f"{self._repo_path}/collaborators/{urllib.parse.quote(login, safe='')}/permission",
            what=f"read the permission of {login} on {self.config.repo}",
            accept=frozenset({404}),
        )
        if response.status == 404:
            return "none"
        level = _get(response.data, "permission")
        if not isinstance(level, str) or not level:
            raise ForgeError(f"GitHub at {self._shown_base} answered the permission of {login} without one")
        return level

    def _token_login(self) -> str:
        """Who this token reviews as, so its approvals never count; "" when GitHub does not say
        (`GET /user` is refused to an app's installation token, whose reviews are a bot's and never
        count anyway). Any other failure raises: an identity we could not learn must not count."""
        response = self._call("GET", "/user", what="read the token's own user", accept=frozenset({403, 404}))
        if response.status == 403 and response.headers.get("X-RateLimit-Remaining") == "0":
            raise ForgeError(
                f"GitHub at {self._shown_base} rate limit reached while trying to read the token's own user"
            )
        if response.status != 200:
            return ""
        return str(_get(response.data, "login") or "")

    def pull_for_commit(self, sha: str) -> PullRequest | None:
        # GitHub lists the pull requests associated with a commit: on the default branch the ones
        # that brought it there, elsewhere the open ones containing it. Only a merge as `sha` counts.
        items = self._get_all(
            f"{self._repo_path}/commits/{urllib.parse.quote(sha, safe='')}/pulls",
            {"per_page": str(PAGE_SIZE)},
            f"find the pull request merged as {sha[:12]}",
        )
        for item in items:
            pr = _pull(item)
            if pr.merged and pr.merge_commit_sha == sha:
                return pr
        return None

    # ------------------------------------------------------------------ HTTP

    @property
    def _repo_path(self) -> str:
        return "/repos/" + "/".join(urllib.parse.quote(part, safe="") for part in self.config.repo.split("/"))

    @property
    def _base(self) -> str:
        return self.config.base_url.rstrip("/")

    @property
    def _shown_base(self) -> str:
        """The base URL for messages, without any user:password@ someone may have put in it."""
        parts = urllib.parse.urlsplit(self._base)
        netloc = parts.netloc.rpartition("@")[2]
        return parts._replace(netloc=netloc).geturl()

    def _token(self) -> str:
        """The token as of now: the file `forge.tokenFile` when set, read again at every request
        (whatever refreshes it, a sidecar or GitHub's token tools, the next request uses the new
        one), else the environment variable `forge.tokenEnv`."""
        if self.config.token_file:
            path = self.config.token_file
            try:
                token = Path(path).read_text(encoding="utf-8").strip()
            except (OSError, UnicodeDecodeError) as exc:
                reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else type(exc).__name__
                raise UserError(
                    f"forge.tokenFile: {path} cannot be read ({reason}); write a GitHub token with "
                    f"{PERMISSION} on {self.config.repo} there, or unset forge.tokenFile for forge.tokenEnv"
                ) from None
            source = f"forge.tokenFile: {path}"
        else:
            env = self.config.token_env
            token = self.environ.get(env, "").strip()
            if not token:
                raise UserError(
                    f"forge.tokenEnv: the environment variable {env} is not set; set it to a GitHub token "
                    f"with {PERMISSION} on {self.config.repo} (forge.type github)"
                )
            source = f"forge.tokenEnv: the value of {env}"
        if not token:
            raise UserError(f"{source} is empty; it must hold a GitHub token with {PERMISSION}")
        if not all(" " < ch < "\x7f" for ch in token):  # http.client would echo it in its error
            raise UserError(f"{source} is not a token (it has spaces or control characters)")
        return token

    @property
    def _token_named(self) -> str:
        """Where the token comes from, for messages (never the token)."""
        if self.config.token_file:
            return f"the token in {self.config.token_file} (forge.tokenFile)"
        return f"the token in ${self.config.token_env}"

    def _get_all(self, path: str, query: Mapping[str, str], what: str) -> list[dict[str, Any]]:
        """Every page of a list endpoint, following `Link: rel="next"` only within the base URL."""
        items: list[dict[str, Any]] = []
        url: str | None = self._url(path, query)
        while url is not None:
            response = self._call("GET", url, what=what)
            if not isinstance(response.data, list):
                raise ForgeError(f"GitHub at {self._shown_base} answered {what} with something not a list")
            items.extend(i for i in response.data if isinstance(i, dict))
            url = _next_link(response.headers.get("Link", ""))
            if url is not None and not url.startswith(self._base + "/"):
                raise ForgeError(f"GitHub at {self._shown_base} paged {what} to another host; not following")
        return items

    def _url(self, path: str, query: Mapping[str, str] | None = None) -> str:
        url = path if path.startswith(("http://", "https://")) else self._base + path
        return f"{url}?{urllib.parse.urlencode(query)}" if query else url

    def _call(
        self,
        method: str,
        path: str,
        payload: Any = None,
        *,
        what: str,
        unprocessable: bool = False,
        forbidden_ok: bool = False,
        accept: frozenset[int] = frozenset(),
    ) -> _Response:
        """One request, tried again (tenacity) when GitHub or the network asks for it: a rate limit
        for any method (GitHub did not act on the request), a network error or 5xx for reads, a 401
        once when `forge.tokenFile` has meanwhile been refreshed. Every failure becomes a one-line
        error; a 422 stays `_Unprocessable` when the caller asked to look at it, a 403 that is no
        rate limit `_Forbidden` likewise; a status in `accept` is returned as an answer for the caller
        to read."""
        url = self._url(path)
        retrying = tenacity.Retrying(
            retry=tenacity.retry_if_exception(lambda exc: self._again(exc, method)),
            wait=self._wait,
            stop=self._stop,
            sleep=self.sleep,
            reraise=True,
        )
        try:
            return retrying(self._send, method, url, payload, what, accept)
        except _Unprocessable as exc:
            if unprocessable:
                raise
            raise exc.error from None
        except _Forbidden as exc:
            if forbidden_ok:
                raise
            raise exc.error from None
        except _RateLimited as exc:
            raise exc.final(self.max_wait) from None
        except (_Retryable, _Rejected) as exc:
            raise exc.error from None

    def _again(self, exc: BaseException, method: str) -> bool:
        if isinstance(exc, _RateLimited):
            return True
        if isinstance(exc, _Retryable):
            return method == "GET"
        if isinstance(exc, _Rejected) and self.config.token_file:
            try:
                return self._token() != exc.token  # refreshed since: the new one gets its chance
            except UserError:
                return False
        return False

    def _wait(self, state: tenacity.RetryCallState) -> float:
        exc = state.outcome.exception() if state.outcome else None
        if isinstance(exc, _RateLimited):
            if exc.wait is not None:
                return float(exc.wait)
            limited = state.attempt_number  # secondary limit, no time named: a minute, then longer
            return _SECONDARY.delay(limited - 1)
        if isinstance(exc, _Retryable):
            return Backoff(self.backoff, max(self.backoff, self.max_wait)).delay(state.attempt_number - 1)
        return 0.0

    def _stop(self, state: tenacity.RetryCallState) -> bool:
        exc = state.outcome.exception() if state.outcome else None
        if isinstance(exc, _RateLimited):
            waited = state.idle_for + state.upcoming_sleep
            exc.needed = state.upcoming_sleep
            return waited > self.max_wait
        if isinstance(exc, _Rejected):
            return state.attempt_number > 1
        return state.attempt_number > self.retries

    def _send(
        self, method: str, url: str, payload: Any, what: str, accept: frozenset[int] = frozenset()
    ) -> _Response:
        data = None if payload is None else json.dumps(payload).encode()
        request = urllib.request.Request(url, data=data, method=method)
        request.add_header("Accept", "application/vnd.github+json")
        request.add_header("X-GitHub-Api-Version", API_VERSION)
        request.add_header("User-Agent", USER_AGENT)
        if data is not None:
            request.add_header("Content-Type", "application/json")
        token = self._token()
        request.add_unredirected_header("Authorization", f"Bearer {token}")
        opener = urllib.request.build_opener(_NoRedirect)
        try:
            with opener.open(request, timeout=self.timeout) as reply:
                status, headers, raw = reply.status, reply.headers, reply.read()
        except urllib.error.HTTPError as exc:
            with exc:
                raw = exc.read()
            error = self._http_error(exc.code, raw, exc.headers, what)
            if exc.code in accept and not isinstance(error, _RateLimited):
                return _Response(exc.code, None, exc.headers)  # a rate limit is waited out instead
            if isinstance(error, _Rejected):
                error.token = token
            raise error from None
        except (OSError, http.client.HTTPException) as exc:
            reason = (
                exc.reason if isinstance(exc, urllib.error.URLError) else (str(exc) or type(exc).__name__)
            )
            raise _Retryable(
                OperationError(f"cannot reach GitHub at {self._shown_base} to {what}: {reason}")
            ) from None
        try:
            return _Response(status, json.loads(raw) if raw.strip() else None, headers)
        except ValueError:
            raise ForgeError(
                f"GitHub at {self._shown_base} answered {what} with something that is not JSON "
                "(is forge.baseUrl the API root, e.g. https://HOST/api/v3?)"
            ) from None

    def _http_error(self, status: int, raw: bytes, headers: Message, what: str) -> Exception:
        message = _error_message(raw)
        token, repo, base = self._token_named, self.config.repo, self._shown_base
        if status == 401:
            return _Rejected(
                OperationError(
                    f"GitHub at {base} rejected {token} ({status}: {message}); set it to a valid token "
                    f"with {PERMISSION} on {repo}"
                )
            )
        if status in (403, 429):
            limited = _rate_limited(
                status, headers, message, f"GitHub at {base} rate limit reached while trying to {what}"
            )
            if limited is not None:
                return limited
            return _Forbidden(
                OperationError(
                    f"GitHub at {base} refused to {what} with {token} ({status}: {message}); "
                    f"the token needs {PERMISSION} on {repo}"
                )
            )
        if status == 404:
            return self._not_found(what)
        if 300 <= status < 400:
            return UserError(
                f"forge.repo: GitHub at {base} answered {status} for {repo!r}: the repository was renamed "
                "or transferred; set forge.repo to its new owner/name"
            )
        if status == 422:
            return _Unprocessable(
                OperationError(f"GitHub at {base} would not {what} on {repo} ({status}: {message})"), message
            )
        if status >= 500:
            return _Retryable(OperationError(f"GitHub at {base} failed to {what} ({status}: {message})"))
        return ForgeError(f"GitHub at {base} failed to {what} ({status}: {message})")

    def _not_found(self, what: str) -> ReconcilerError:
        """GitHub says 404 both for a missing repository and one the token cannot see; tell them apart
        from a missing pull request with one extra read, only on this error path."""
        repo, base = self.config.repo, self._shown_base
        repo_missing = UserError(
            f"forge.repo: {repo!r} not found at {base} (check owner/name and forge.baseUrl, and that "
            f"{self._token_named} can read it)"
        )
        if what.startswith((_READ_REPO, "list pull requests", "open a pull request")):
            return repo_missing
        try:
            self._send("GET", self._url(self._repo_path), None, _READ_REPO)
        except ReconcilerError as exc:
            return repo_missing if isinstance(exc, UserError) else exc
        except (_Retryable, _Unprocessable, _Forbidden, _Rejected) as exc:
            return exc.error
        except _RateLimited as exc:
            return ForgeError(f"{exc.said}: {exc.message}")
        return UserError(f"GitHub at {base}: could not {what}: not found in {repo}")


def _rate_limited(status: int, headers: Message, message: str, said: str) -> _RateLimited | None:
    """A 403 or 429 that is a rate limit, and how long GitHub asks to wait (None: a secondary limit
    that names no time); None when it is a refusal (the token lacks a permission)."""
    retry_after = (headers.get("Retry-After") or "").strip()
    if retry_after.isdigit():
        return _RateLimited(said, message, float(retry_after))
    if headers.get("X-RateLimit-Remaining") == "0":
        reset = (headers.get("X-RateLimit-Reset") or "").strip()
        if reset.isdigit():
            return _RateLimited(said, message, max(0.0, int(reset) - time.time()) + 1.0, reset_at=int(reset))
        return _RateLimited(said, message, None)
    if status == 429 or "rate limit" in message.lower():
        return _RateLimited(said, message, None)
    return None


class _RateLimited(Exception):
    """GitHub asks to wait `wait` seconds (None: at least a minute) before asking again."""

    def __init__(self, said: str, message: str, wait: float | None, *, reset_at: int | None = None) -> None:
        super().__init__(said)
        self.said, self.message, self.wait, self.reset_at = said, message, wait, reset_at
        self.needed = wait or SECONDARY_WAIT

    def final(self, max_wait: float) -> ForgeError:
        """The error once waiting would take longer than `max_wait` seconds in all."""
        if self.reset_at is not None:
            when = f"it resets at {time.strftime('%H:%M:%S UTC', time.gmtime(self.reset_at))}"
        elif self.wait is not None:
            when = f"GitHub asks to wait {self.wait:.0f} s"
        else:
            when = f"GitHub names no time, and the next wait would be {self.needed:.0f} s"
        return ForgeError(
            f"{self.said}: {self.message}; {when}, beyond the {max_wait:.0f} s asg-reconciler waits "
            "for one call: the next run tries again"
        )


class _Forbidden(Exception):
    """A 403 that is no rate limit: the token may not do this."""

    def __init__(self, error: OperationError) -> None:
        super().__init__(str(error))
        self.error = error


class _Rejected(Exception):
    """A 401, with the token sent (a refreshed `forge.tokenFile` gets one more try)."""

    def __init__(self, error: OperationError, token: str = "") -> None:
        super().__init__(str(error))
        self.error = error
        self.token = token


class _Retryable(Exception):
    """Carries the error to raise if retries run out."""

    def __init__(self, error: OperationError) -> None:
        super().__init__(str(error))
        self.error = error


class _Unprocessable(Exception):
    """A 422, with GitHub's detail so `open` can recognise "a pull request already exists"."""

    def __init__(self, error: OperationError, detail: str) -> None:
        super().__init__(str(error))
        self.error = error
        self.detail = detail


def create(config: ForgeConfig, git_url: str = "", environ: Mapping[str, str] | None = None) -> GitHubForge:
    del git_url  # the API knows the repository; the git remote is not needed
    return GitHubForge(config) if environ is None else GitHubForge(config, environ)


# ---------------------------------------------------------------------- JSON helpers


def _get(data: Any, *keys: str) -> Any:
    for key in keys:
        if not isinstance(data, dict):
            return None
        data = data.get(key)
    return data


def _pull(data: Any) -> PullRequest:
    if not isinstance(data, dict) or "number" not in data:
        raise ForgeError("GitHub answered with something that is not a pull request")
    merged = bool(data.get("merged") or data.get("merged_at"))
    return PullRequest(
        number=int(data["number"]),
        url=str(data.get("html_url") or ""),
        state=OPEN if data.get("state") == "open" else CLOSED,
        head=str(_get(data, "head", "ref") or ""),
        base=str(_get(data, "base", "ref") or ""),
        title=str(data.get("title") or ""),
        body=str(data.get("body") or ""),
        head_sha=str(_get(data, "head", "sha") or ""),
        merged=merged,
        merged_by=_get(data, "merged_by", "login"),
        merge_commit_sha=data.get("merge_commit_sha") if merged else None,
        author=str(_get(data, "user", "login") or ""),
    )


def _first_line(comment: dict[str, Any]) -> str:
    return str(comment.get("body") or "").split("\n", 1)[0].strip()


def _error_message(raw: bytes) -> str:
    """GitHub's `message` plus any field errors, on one line; the body never holds the token."""
    try:
        data = json.loads(raw)
    except ValueError:
        return raw.decode(errors="replace").strip().splitlines()[0][:200] if raw.strip() else "no details"
    if not isinstance(data, dict):
        return "no details"
    parts = [str(data.get("message") or "no details")]
    for error in data.get("errors") or []:
        if isinstance(error, dict):
            parts.append(str(error.get("message") or error.get("code") or ""))
        elif isinstance(error, str):
            parts.append(error)
    return "; ".join(p for p in parts if p)


def _next_link(header: str) -> str | None:
    for part in header.split(","):
        section = part.split(";")
        if len(section) > 1 and any(s.strip() == 'rel="next"' for s in section[1:]):
            return section[0].strip().strip("<>")
    return None
