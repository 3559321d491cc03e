"""A fake GitHub REST API over real HTTP: exactly the endpoints reconciler/gitops/forge/github.py calls.

No forge runs here (DESIGN §6), so the client is tested against this. It keeps what our code relies
on faithful to GitHub: pulls with head/base/sha, the owner-qualified `head` filter, 422 "A pull
request already exists", list items without `merged`/`merged_by` (only the single GET has them),
reviews as GitHub lists them (`user.login`, `user.type` — `Bot` for `name[bot]` accounts —,
`author_association`, `commit_id`, `state`; a dismissed review turns DISMISSED in place), who may
review at all (on a private repository only people with read access; the author never approves their
own pull request), the permission of a user (`/collaborators/{user}/permission`: `permission` with
maintain mapped to write and triage to read, `role_name`; `none` for a user without access, 404 for
a login that is no user), the pull requests of a commit (`/commits/{sha}/pulls`), issue comments
(listed, added, and edited in place by id),
`Link: rel="next"` paging, 401 "Bad credentials" for a wrong token, 403
for a token without write access, 404 for an unknown repository. An optional path prefix serves
it as GitHub Enterprise does (`/api/v3`).

GitHub's limits too: a comment or pull-request body over 65,536 characters is refused (422, with
GitHub's words); every answer carries the `X-RateLimit-*` headers; `throttle` queues rate-limit
answers as GitHub gives them (403 with `X-RateLimit-Remaining: 0` and `X-RateLimit-Reset`, a
secondary limit's 403 with or without `Retry-After`, a 429 with `Retry-After`); a GitHub App
installation token (`app_tokens`, a workflow's GITHUB_TOKEN is one) may not read `GET /user` (403
"Resource not accessible by integration") and writes as `<slug>[bot]`, `user.type` Bot.

Tests drive the world through the Python API (`push`, `grant`, `open_pull`, `review`, `dismiss`,
`merge`), inject faults with
`fault`, and assert on `requests` (e.g. that an unchanged proposal sent no PATCH).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import re
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlencode, urlsplit

Obj = dict[str, Any]
FaultResult = None | str | tuple[int, Obj | None]
Fault = Callable[[str, str], FaultResult]
"""`fault(method, path)` (path without prefix or query): None to serve normally, `(status, body)` to
answer with that (body None: {"message": ...}), or `DROP` to close the connection without answering."""

DROP = "drop"
BOT = "asg-reconciler-bot"
BODY_LIMIT = 65_536  # characters GitHub accepts in a comment or pull-request body
RATE_LIMIT = 5_000  # requests per hour of a personal access token

PRIMARY = "primary"  # 403, X-RateLimit-Remaining: 0, X-RateLimit-Reset
SECONDARY = "secondary"  # 403 "You have exceeded a secondary rate limit", Retry-After when given
TOO_MANY = "429"  # 429 with Retry-After

# A role as `GET .../collaborators/{user}/permission` names it: `permission` is the legacy base role
# (maintain reads as write, triage as read), `role_name` the role itself.
ROLES = {"admin": "admin", "maintain": "write", "write": "write", "triage": "read", "read": "read"}


@dataclass(frozen=True)
class RecordedRequest:
    method: str
    path: str  # without the prefix and the query
    query: dict[str, str]
    body: Any
    authorization: str  # as sent, so a test can check the scheme (never printed by the fake)


@dataclass
class _Pull:
    number: int
    repo: str
    title: str
    body: str
    head: str
    base: str
    head_sha: str
    user: str = BOT
    state: str = "open"
    merged_by: str | None = None
    merge_commit_sha: str | None = None
    merged_at: str | None = None
    comments: list[Obj] = field(default_factory=list)
    reviews: list[Obj] = field(default_factory=list)


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _sha(text: str) -> str:
    return hashlib.sha1(text.encode()).hexdigest()


class FakeGitHub:
    """The fake server and its state; thread-safe, one lock around every read and write."""

    def __init__(
        self,
        *,
        repo: str = "org/capacity",
        token: str = "fake-token",
        prefix: str = "",
        host: str = "127.0.0.1",
        public: bool = False,
    ) -> None:
        self.repos: set[str] = {repo}
        self.public = public  # a public repository: anyone can see it and review its pull requests
        # login (lower case) -> role on every repository of the fake; the plan bot pushes, so it writes
        self.collaborators: dict[str, str] = {BOT.lower(): "write"}
        self.users: set[str] = set()  # other accounts that exist (lower case): permission "none"
        self.token = token
        self.read_only_tokens: set[str] = set()  # accepted for reads, 403 on writes
        self.body_limit = BODY_LIMIT  # a test may lower it (GitHub counting more strictly than we cut)
        self.app_tokens: dict[str, str] = {}  # GitHub App installation token -> its bot's login
        self.throttled: list[tuple[str, int | None]] = []  # (kind, seconds) answered to the next requests
        self.rate_used = 0
        self._actor: tuple[str, str] = (BOT, "User")  # who the request being served writes as
        self.prefix = prefix.rstrip("/")
        self._host = host
        self._lock = threading.RLock()
        self.pulls: dict[tuple[str, int], _Pull] = {}
        self.branches: dict[tuple[str, str], str] = {}
        self._next_id = 1
        self.fault: Fault | None = None
        self.requests: list[RecordedRequest] = []
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # ------------------------------------------------------------------ lifecycle

    def start(self) -> FakeGitHub:
        server = ThreadingHTTPServer((self._host, 0), _Handler)
        server.daemon_threads = True
        server.fake = self  # type: ignore[attr-defined]
        self._server = server
        self._thread = threading.Thread(
            target=server.serve_forever, kwargs={"poll_interval": 0.05}, name="fake-github", daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None

    def __enter__(self) -> FakeGitHub:
        return self.start() if self._server is None else self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def root(self) -> str:
        if self._server is None:
            raise RuntimeError("FakeGitHub is not started")
        return f"http://{self._host}:{self._server.server_address[1]}"

    @property
    def url(self) -> str:
        """The API base URL a client is configured with (`forge.baseUrl`)."""
        return self.root + self.prefix

    # ------------------------------------------------------------------ Python API for tests

    def reset(self) -> None:
        with self._lock:
            self.pulls.clear()
            self.branches.clear()
            self.requests.clear()
            self.read_only_tokens.clear()
            self.app_tokens.clear()
            self.throttled.clear()
            self.rate_used = 0
            self.body_limit = BODY_LIMIT
            self.fault = None
            self.collaborators = {BOT.lower(): "write"}
            self.users.clear()
            self.public = False

    def writes(self) -> list[RecordedRequest]:
        """Every request that could change something (what "low noise" is about)."""
        with self._lock:
            return [r for r in self.requests if r.method != "GET"]

    def push(self, branch: str, sha: str | None = None, *, repo: str | None = None) -> str:
        """Move a branch (as a git push would); open pull requests from it get the new head."""
        repo = repo or self._default_repo
        with self._lock:
            sha = sha or _sha(f"{branch}:{len(self.branches)}:{self._next_id}")
            self._next_id += 1
            self.branches[(repo, branch)] = sha
            for pull in self.pulls.values():
                if pull.repo == repo and pull.head == branch and pull.state == "open":
                    pull.head_sha = sha
        return sha

    def pull(self, number: int, *, repo: str | None = None) -> _Pull:
        with self._lock:
            return self.pulls[(repo or self._default_repo, number)]

    def grant(self, login: str, role: str) -> None:
        """Give `login` a role on the repository (admin, maintain, write, triage, read; "none" takes
        it away): what an owner does in the repository's settings."""
        with self._lock:
            self.users.add(login.lower())
            if role == "none":
                self.collaborators.pop(login.lower(), None)
            elif role in ROLES:
                self.collaborators[login.lower()] = role
            else:
                raise ValueError(f"unknown role {role!r}")

    def permission(self, login: str) -> str:
        """The base role GitHub reports for `login`: admin, write, read or none."""
        with self._lock:
            role = self.collaborators.get(login.lower())
            if role is not None:
                return ROLES[role]
            return "read" if self.public else "none"

    def open_pull(
        self, head: str, *, author: str, base: str = "main", title: str = "t", repo: str | None = None
    ) -> int:
        """A pull request opened by `author` (someone other than the token's bot); its number."""
        repo = repo or self._default_repo
        with self._lock:
            self.users.add(author.lower())
            sha = self.branches.get((repo, head)) or self.push(head, repo=repo)
            number = 1 + max((n for r, n in self.pulls if r == repo), default=0)
            self.pulls[(repo, number)] = _Pull(number, repo, title, "", head, base, sha, user=author)
            return number

    def review(
        self, number: int, login: str, state: str, *, commit_id: str | None = None, repo: str | None = None
    ) -> Obj:
        """Submit a review as `login` on `commit_id` (default: the pull request's current head).

        As GitHub: on a private repository only people with read access can review (an installed
        app, `name[bot]`, can too), and the author can comment on their own pull request but not
        approve it or request changes (422)."""
        with self._lock:
            pull = self.pull(number, repo=repo)
            bot = login.lower().endswith("[bot]")
            self.users.add(login.lower())
            if not bot and self.permission(login) == "none":
                raise PermissionError(f"{login} cannot see the private repository {pull.repo}")
            if login.lower() == pull.user.lower() and state in ("APPROVED", "CHANGES_REQUESTED"):
                verb = "approve" if state == "APPROVED" else "request changes on"
                raise ValueError(f"422 Unprocessable Entity: Can not {verb} your own pull request")
            review = {
                "id": self._take_id(),
                "user": {"login": login, "id": int(_sha(login)[:8], 16), "type": "Bot" if bot else "User"},
                "body": "",
                "state": state,
                "author_association": self._association(login, pull),
                "commit_id": commit_id or pull.head_sha,
                "submitted_at": _now(),
                "html_url": f"{pull_url(pull)}#pullrequestreview-{self._next_id}",
            }
            pull.reviews.append(review)
            return review

    def dismiss(self, number: int, review_id: int, *, repo: str | None = None) -> None:
        """Dismiss a review: GitHub turns that review's state into DISMISSED, in place."""
        with self._lock:
            for review in self.pull(number, repo=repo).reviews:
                if review["id"] == review_id:
                    review["state"] = "DISMISSED"
                    return
            raise KeyError(review_id)

    def _association(self, login: str, pull: _Pull) -> str:
        """`author_association` as GitHub computes it, roughly: it says how someone is related to the
        repository, not what they may do (a MEMBER may only read)."""
        if login.lower() == pull.repo.split("/")[0].lower():
            return "OWNER"
        if login.lower() in self.collaborators:
            return "COLLABORATOR"
        return "NONE"

    def merge(self, number: int, login: str, *, repo: str | None = None, sha: str | None = None) -> str:
        """Merge as `login` (what a person pressing the button does); returns the merge commit sha
        (`sha` when given, e.g. a real merge commit of a test repository)."""
        with self._lock:
            pull = self.pull(number, repo=repo)
            pull.state, pull.merged_by, pull.merged_at = "closed", login, _now()
            pull.merge_commit_sha = sha or _sha(f"merge:{pull.number}:{pull.head_sha}")
            return pull.merge_commit_sha

    def add_comment(
        self, number: int, login: str, body: str, *, repo: str | None = None, user_type: str = "User"
    ) -> int:
        """A comment by someone else (a person, or with `user_type` "Bot" an App); its id."""
        with self._lock:
            pull = self.pull(number, repo=repo)
            comment_id = self._take_id()
            pull.comments.append(
                {
                    "id": comment_id,
                    "body": body,
                    "user": {"login": login, "type": user_type},
                    "html_url": f"{pull_url(pull)}#c{comment_id}",
                }
            )
            return comment_id

    def throttle(self, kind: str, seconds: int | None = None, *, times: int = 1) -> None:
        """The next `times` authenticated requests are refused as GitHub refuses over a rate limit
        (`kind` PRIMARY, SECONDARY or TOO_MANY; `seconds` until the reset, or the Retry-After;
        SECONDARY with None names no time, as GitHub sometimes does)."""
        with self._lock:
            self.throttled += [(kind, seconds)] * times

    def comments(self, number: int, *, repo: str | None = None) -> list[str]:
        with self._lock:
            return [c["body"] for c in self.pull(number, repo=repo).comments]

    @property
    def _default_repo(self) -> str:
        return sorted(self.repos)[0]

    def _take_id(self) -> int:
        self._next_id += 1
        return self._next_id

    # ------------------------------------------------------------------ the API

    def handle(
        self, method: str, raw_path: str, authorization: str, body: Any
    ) -> tuple[int, Any, dict[str, str]]:
        """Route one request; returns (status, JSON body, extra headers)."""
        parts = urlsplit(raw_path)
        if not parts.path.startswith(self.prefix + "/"):
            return 404, {"message": "Not Found"}, {}
        path = parts.path[len(self.prefix) :]
        query = {k: v[-1] for k, v in parse_qs(parts.query).items()}
        with self._lock:
            self.requests.append(RecordedRequest(method, path, query, body, authorization))
            fault = self.fault
        if fault is not None:
            result = fault(method, path)
            if result == DROP:
                raise ConnectionAbortedError("fault: drop")
            if isinstance(result, tuple):
                status, payload = result
                return status, payload or {"message": f"fault {status}"}, {}
        scheme, _, token = authorization.partition(" ")
        if scheme.lower() not in ("bearer", "token") or token not in {
            self.token,
            *self.read_only_tokens,
            *self.app_tokens,
        }:
            return (
                401,
                {"message": "Bad credentials", "documentation_url": "https://docs.github.com/rest"},
                {},
            )
        with self._lock:
            limited = self._rate_limited()
            if limited is not None:
                return limited
            headers = self._rate_headers()
        if method != "GET" and token in self.read_only_tokens:
            return 403, {"message": "Resource not accessible by personal access token"}, headers
        with self._lock:
            app = self.app_tokens.get(token)
            self._actor = (app, "Bot") if app else (BOT, "User")
            if app and path == "/user":
                return (
                    403,
                    {
                        "message": "Resource not accessible by integration",
                        "documentation_url": "https://docs.github.com/rest/users/users#get-the-authenticated-user",
                        "status": "403",
                    },
                    headers,
                )
            status, payload, extra = self._route(method, path, query, body)
            return status, payload, {**headers, **extra}

    def _rate_headers(self, remaining: int | None = None) -> dict[str, str]:
        self.rate_used += 1
        left = max(0, RATE_LIMIT - self.rate_used) if remaining is None else remaining
        return {
            "X-RateLimit-Limit": str(RATE_LIMIT),
            "X-RateLimit-Remaining": str(left),
            "X-RateLimit-Reset": str(int(datetime.now(UTC).timestamp()) + 3600),
            "X-RateLimit-Used": str(self.rate_used),
            "X-RateLimit-Resource": "core",
        }

    def _rate_limited(self) -> tuple[int, Any, dict[str, str]] | None:
        """The next queued rate-limit answer, as GitHub words it (docs: "Rate limits for the REST API")."""
        if not self.throttled:
            return None
        kind, seconds = self.throttled.pop(0)
        docs = "https://docs.github.com/rest/using-the-rest-api/rate-limits-for-the-rest-api"
        if kind == PRIMARY:
            headers = self._rate_headers(remaining=0)
            headers["X-RateLimit-Reset"] = str(int(datetime.now(UTC).timestamp()) + (seconds or 0))
            return (
                403,
                {"message": "API rate limit exceeded for user ID 1.", "documentation_url": docs},
                headers,
            )
        headers = self._rate_headers()
        if seconds is not None:
            headers["Retry-After"] = str(seconds)
        if kind == TOO_MANY:
            return 429, {"message": "Too Many Requests", "documentation_url": docs}, headers
        message = (
            "You have exceeded a secondary rate limit. Please wait a few minutes before you try again. "
            "If you reach out to GitHub Support for help, please include the request ID 0000:0000."
        )
        return 403, {"message": message, "documentation_url": docs}, headers

    def _route(
        self, method: str, path: str, query: dict[str, str], body: Any
    ) -> tuple[int, Any, dict[str, str]]:
        if path == "/user" and method == "GET":  # the token's own identity
            return 200, {"login": BOT, "type": "User"}, {}
        match = re.fullmatch(r"/repos/([^/]+/[^/]+)(/.*)?", path)
        if not match or match.group(1) not in self.repos:
            return 404, {"message": "Not Found"}, {}
        repo, rest = match.group(1), match.group(2) or ""
        if rest == "" and method == "GET":
            return 200, {"full_name": repo, "name": repo.split("/")[1], "private": not self.public}, {}
        if rest == "/pulls" and method == "GET":
            return self._list_pulls(repo, path, query)
        if rest == "/pulls" and method == "POST":
            return self._create_pull(repo, body)
        permission_match = re.fullmatch(r"/collaborators/([^/]+)/permission", rest)
        if permission_match and method == "GET":
            return self._permission_of(permission_match.group(1))
        commit_match = re.fullmatch(r"/commits/([0-9a-f]{7,64})/pulls", rest)
        if commit_match and method == "GET":
            return self._pulls_for_commit(repo, path, query, commit_match.group(1))
        comment_match = re.fullmatch(r"/issues/comments/(\d+)", rest)
        if comment_match and method == "PATCH":
            return self._edit_comment(repo, int(comment_match.group(1)), body)
        number_match = re.fullmatch(r"/(pulls|issues)/(\d+)(/[a-z]+)?", rest)
        if not number_match:
            return 404, {"message": "Not Found"}, {}
        kind, number, sub = number_match.group(1), int(number_match.group(2)), number_match.group(3) or ""
        pull = self.pulls.get((repo, number))
        if pull is None:
            return 404, {"message": "Not Found"}, {}
        if (kind, sub, method) == ("pulls", "", "GET"):
            return 200, pull_json(pull, full=True), {}
        if (kind, sub, method) == ("pulls", "", "PATCH"):
            return self._edit_pull(pull, body)
        if (kind, sub, method) == ("pulls", "/reviews", "GET"):
            return self._page(path, query, pull.reviews)
        if (kind, sub, method) == ("issues", "/comments", "POST"):
            if not isinstance(body, dict) or not body.get("body"):
                return _invalid("IssueComment", "body", "missing_field")
            if len(str(body["body"])) > self.body_limit:
                return _too_long("IssueComment", "data", "unprocessable", "Body", self.body_limit)
            comment_id = self._take_id()
            login, user_type = self._actor
            comment = {
                "id": comment_id,
                "body": body["body"],
                "user": {"login": login, "type": user_type},
                "html_url": f"{pull_url(pull)}#issuecomment-{comment_id}",
            }
            pull.comments.append(comment)
            return 201, comment, {}
        if (kind, sub, method) == ("issues", "/comments", "GET"):
            return self._page(path, query, list(pull.comments))
        return 404, {"message": "Not Found"}, {}

    def _permission_of(self, login: str) -> tuple[int, Any, dict[str, str]]:
        """GET /repos/{repo}/collaborators/{username}/permission: 404 for a login that is no user,
        else the base role (`none` without access) and the role's own name."""
        known = login.lower() in self.users or login.lower() in self.collaborators
        if not known:
            return (
                404,
                {"message": f"{login} is not a user", "documentation_url": "https://docs.github.com/rest"},
                {},
            )
        permission = self.permission(login)
        role = self.collaborators.get(login.lower(), permission)
        user = {"login": login, "type": "Bot" if login.lower().endswith("[bot]") else "User"}
        return 200, {"permission": permission, "role_name": role, "user": user}, {}

    def _edit_comment(self, repo: str, comment_id: int, body: Any) -> tuple[int, Any, dict[str, str]]:
        """PATCH /repos/{repo}/issues/comments/{id}: edit a comment's body in place."""
        if not isinstance(body, dict) or not body.get("body"):
            return _invalid("IssueComment", "body", "missing_field")
        if len(str(body["body"])) > self.body_limit:
            return _too_long("IssueComment", "data", "unprocessable", "Body", self.body_limit)
        for pull in self.pulls.values():
            for comment in pull.comments:
                if pull.repo == repo and comment["id"] == comment_id:
                    comment["body"] = body["body"]
                    return 200, comment, {}
        return 404, {"message": "Not Found"}, {}

    def _list_pulls(self, repo: str, path: str, query: dict[str, str]) -> tuple[int, Any, dict[str, str]]:
        state = query.get("state", "open")
        owner = repo.split("/")[0]
        items = []
        for pull in sorted(self.pulls.values(), key=lambda p: -p.number):  # GitHub: newest first
            if pull.repo != repo or (state != "all" and pull.state != state):
                continue
            if "head" in query and query["head"] != f"{owner}:{pull.head}":
                continue
            if "base" in query and query["base"] != pull.base:
                continue
            items.append(pull_json(pull, full=False))
        return self._page(path, query, items)

    def _pulls_for_commit(
        self, repo: str, path: str, query: dict[str, str], sha: str
    ) -> tuple[int, Any, dict[str, str]]:
        """GET /repos/{repo}/commits/{sha}/pulls: pull requests merged as `sha` or whose head it is
        (GitHub also lists those containing it; the fake keeps no commit graph)."""
        items = [
            pull_json(pull, full=False)
            for pull in sorted(self.pulls.values(), key=lambda p: -p.number)
            if pull.repo == repo and sha in (pull.merge_commit_sha, pull.head_sha)
        ]
        return self._page(path, query, items)

    def _page(self, path: str, query: dict[str, str], items: list[Obj]) -> tuple[int, Any, dict[str, str]]:
        per_page = min(int(query.get("per_page", "30")), 100)
        page = int(query.get("page", "1"))
        chunk = items[(page - 1) * per_page : page * per_page]
        headers = {}
        if page * per_page < len(items):
            next_query = urlencode({**query, "page": str(page + 1)})
            headers["Link"] = f'<{self.url}{path}?{next_query}>; rel="next"'
        return 200, chunk, headers

    def _create_pull(self, repo: str, body: Any) -> tuple[int, Any, dict[str, str]]:
        if not isinstance(body, dict):
            return 400, {"message": "Problems parsing JSON"}, {}
        for key in ("title", "head", "base"):
            if not body.get(key):
                return _invalid("PullRequest", key, "missing_field")
        if len(str(body.get("body") or "")) > self.body_limit:
            return _too_long("PullRequest", "body", "custom", "body", self.body_limit)
        head, base = str(body["head"]).split(":")[-1], str(body["base"])
        if head == base:
            return _invalid("PullRequest", "base", "invalid")
        for pull in self.pulls.values():
            if pull.repo == repo and pull.head == head and pull.base == base and pull.state == "open":
                return (
                    422,
                    {
                        "message": "Validation Failed",
                        "errors": [
                            {
                                "resource": "PullRequest",
                                "code": "custom",
                                "message": f"A pull request already exists for {repo.split('/')[0]}:{head}.",
                            }
                        ],
                    },
                    {},
                )
        sha = self.branches.get((repo, head)) or self.push(head, repo=repo)
        number = 1 + max((n for r, n in self.pulls if r == repo), default=0)
        pull = _Pull(
            number, repo, str(body["title"]), str(body.get("body") or ""), head, base, sha, self._actor[0]
        )
        self.pulls[(repo, number)] = pull
        return 201, pull_json(pull, full=True), {}

    def _edit_pull(self, pull: _Pull, body: Any) -> tuple[int, Any, dict[str, str]]:
        if not isinstance(body, dict):
            return 400, {"message": "Problems parsing JSON"}, {}
        if len(str(body.get("body") or "")) > self.body_limit:
            return _too_long("PullRequest", "body", "custom", "body", self.body_limit)
        if "state" in body:
            if body["state"] not in ("open", "closed"):
                return _invalid("PullRequest", "state", "invalid")
            if pull.merged_by is not None:
                return _invalid(
                    "PullRequest", "state", "custom", "cannot change the state of a merged pull request"
                )
            pull.state = body["state"]
        if "title" in body:
            pull.title = str(body["title"])
        if "body" in body:
            pull.body = str(body["body"] or "")
        return 200, pull_json(pull, full=True), {}


def _invalid(resource: str, field_name: str, code: str, message: str = "") -> tuple[int, Any, dict[str, str]]:
    error: Obj = {"resource": resource, "field": field_name, "code": code}
    if message:
        error["message"] = message
    return 422, {"message": "Validation Failed", "errors": [error]}, {}


def _too_long(
    resource: str, field_name: str, code: str, word: str, limit: int
) -> tuple[int, Any, dict[str, str]]:
    """GitHub's 422 for a body over the limit (its words differ a little per resource)."""
    return _invalid(resource, field_name, code, f"{word} is too long (maximum is {limit} characters)")


def pull_url(pull: _Pull) -> str:
    return f"https://github.example/{pull.repo}/pull/{pull.number}"


def pull_json(pull: _Pull, *, full: bool) -> Obj:
    """A pull request as GitHub prints it; list items (`full=False`) lack `merged` and `merged_by`."""
    data: Obj = {
        "number": pull.number,
        "html_url": pull_url(pull),
        "state": pull.state,
        "title": pull.title,
        "body": pull.body or None,
        "user": {"login": pull.user, "type": "Bot" if pull.user.lower().endswith("[bot]") else "User"},
        "head": {"ref": pull.head, "sha": pull.head_sha, "repo": {"full_name": pull.repo}},
        "base": {"ref": pull.base, "repo": {"full_name": pull.repo}},
        "merged_at": pull.merged_at,
        "merge_commit_sha": pull.merge_commit_sha,
    }
    if full:
        data["merged"] = pull.merged_by is not None
        data["merged_by"] = {"login": pull.merged_by} if pull.merged_by else None
    return data


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True  # else every keep-alive exchange waits ~40 ms for delayed ACKs

    def log_message(self, format: str, *args: Any) -> None:
        return None

    def _serve(self) -> None:
        fake: FakeGitHub = self.server.fake  # type: ignore[attr-defined]
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        try:
            body = json.loads(raw) if raw else None
        except ValueError:
            body = "<invalid json>"
        try:
            status, payload, headers = fake.handle(
                self.command, self.path, self.headers.get("Authorization", ""), body
            )
        except ConnectionAbortedError:
            self.close_connection = True
            with contextlib.suppress(OSError):
                self.connection.shutdown(2)
            return
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json; charset=utf-8")
        self.send_header("Content-Length", str(len(data)))
        for name, value in headers.items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(data)

    do_GET = do_POST = do_PATCH = do_PUT = do_DELETE = _serve
