"""`check --comment PR`: keep check's one comment on the pull request true to the head it judged.

Apart from `check_stage` (the judging) and `check_render` (the Markdown), so neither imports the
other. The comment is found by a hidden marker per cluster and its author (the forge's
`upsert_comment`); any failure replaces it with a short "failed" one, and a comment is cut to what
GitHub accepts, so an earlier "ok" never stands for a head that was not judged (docs/ci.md).
"""

from __future__ import annotations

import copy
from datetime import datetime

from reconciler.config.settings import Config
from reconciler.domain.errors import ReconcilerError, UserError
from reconciler.domain.markdown import BODY_BUDGET
from reconciler.gitops.forge import make_forge
from reconciler.gitops.forge.base import Forge
from reconciler.runtime.check_stage import LEGACY_MARKER, MARKER_PREFIX, check_once
from reconciler.views.check import render_check_markdown, render_failed_markdown


def comment_marker(cluster: str) -> str:
    """The hidden first line of check's comment for `cluster` (config schema: letters, digits,
    `-`, `_`, `.`): one comment per cluster on a pull request that several clusters check."""
    return f"{MARKER_PREFIX} cluster={cluster} -->"


def check_and_comment(
    config: Config, ref: str, now: datetime, pull_request: int | None, forge: Forge | None
) -> tuple[str, int, str]:
    """`check`, and with a pull request its comment: (the whole Markdown, exit code, one line on
    what was done to the comment).

    Any failure replaces the standing comment with a short "failed" one before it is raised (a
    user mistake, an operation that failed, a bug, Ctrl-C), so an earlier "ok" never stands for a
    head that could not be judged. The comment is cut to what GitHub accepts (the printed report is
    whole); when the forge still refuses it, the short "failed" one replaces it and the exit is 1."""
    marker = comment_marker(config.cluster)
    if pull_request is None:
        report = check_once(config, ref, now)
        return render_check_markdown(report, marker), report.exit_code, ""
    forge = forge or make_forge(config.forge, git_url=config.git.url)
    try:
        report = check_once(config, ref, now, pull_request=pull_request)
        body = render_check_markdown(report, marker)
        comment = render_check_markdown(report, marker, budget=BODY_BUDGET)
    except (Exception, KeyboardInterrupt) as exc:
        _replace_with_failed(config, pull_request, forge, marker, ref, exc)
        raise
    code = report.exit_code
    try:
        said = comment_on(config, pull_request, comment, forge)
    except ReconcilerError as refused:
        return (
            body,
            2 if code == 2 else 1,
            _fall_back(config, pull_request, forge, marker, ref, code, refused),
        )
    return body, code, said


def _replace_with_failed(
    config: Config, number: int, forge: Forge, marker: str, ref: str, exc: BaseException
) -> None:
    """Put a "failed" comment in place of the standing one; when even that cannot be written, the
    error being raised says so (the earlier verdict still stands)."""
    interrupted = isinstance(exc, KeyboardInterrupt)
    if isinstance(exc, ReconcilerError):
        why = str(exc)
    elif interrupted:
        why = "interrupted (SIGINT, SIGTERM or Ctrl-C)"
    else:  # a bug: its message may hold anything, so only its kind; the traceback is in the log
        why = f"an unexpected error ({type(exc).__name__}) stopped the check"
    try:
        failed = render_failed_markdown(marker, ref, why, interrupted=interrupted)
        comment_on(config, number, failed, forge, every=True)
    except ReconcilerError as again:
        note = (
            f'; the comment on pull request #{number} could not be replaced with "failed" either '
            f"({again}): its earlier verdict still stands"
        )
        if isinstance(exc, ReconcilerError):
            raise _same_kind(exc, f"{exc}{note}") from None
        exc.add_note(note.lstrip("; "))


def _fall_back(
    config: Config, number: int, forge: Forge, marker: str, ref: str, code: int, refused: ReconcilerError
) -> str:
    """The forge refused the verdict's comment (too long for it, a 4xx on the edit, ...): a short
    "failed" one replaces it, so the earlier verdict does not stand. One line for stderr."""
    why = f"its verdict (exit {code}) could not be posted here ({refused}); the CI job's log has it in full"
    try:
        comment_on(config, number, render_failed_markdown(marker, ref, why), forge, every=True)
    except ReconcilerError as again:
        return (
            f"error: could not post the verdict on pull request #{number} ({refused}), nor replace "
            f'the comment with "failed" ({again}): an earlier verdict may still stand'
        )
    return (
        f"error: could not post the verdict on pull request #{number} ({refused}); the comment there "
        'now says "failed"'
    )


def _same_kind(exc: ReconcilerError, message: str) -> ReconcilerError:
    """`exc` saying `message` instead: its type, so its exit code and what metrics and logs label it
    by (an edge's `edge`, a refusal's `kind`), stay."""
    again = copy.copy(exc)
    again.args = (message,)
    return again


def comment_on(
    config: Config,
    pull_request: int,
    body: str,
    forge: Forge | None = None,
    marker: str | None = None,
    *,
    every: bool = False,
) -> str:
    """Create or update one comment on the pull request (check's, or with `marker` another's, e.g.
    what-if's); one line saying which. A comment of ours with check's marker of earlier versions (one
    for every cluster) is taken over by check's, never by another's."""
    forge = forge or make_forge(config.forge, git_url=config.git.url)
    if marker is not None:
        return forge.upsert_comment(pull_request, marker, body, every=every)
    marker = comment_marker(config.cluster)
    return forge.upsert_comment(pull_request, marker, body, legacy=(LEGACY_MARKER,), every=every)


def forge_for_comments(config: Config) -> Forge:
    """The forge `--comment` writes through; a UserError at once when it keeps no pull requests."""
    forge = make_forge(config.forge, git_url=config.git.url)
    if not forge.opens_pull_requests:
        raise UserError(
            f"--comment: forge.type is {config.forge.type}, which keeps no pull requests to comment on; "
            "set forge.type github (with forge.repo), or drop --comment and post the printed Markdown"
        )
    return forge
