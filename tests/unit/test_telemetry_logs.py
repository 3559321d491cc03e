"""Log lines of both formats: one per record, extra fields carried, secrets never written."""

from __future__ import annotations

import io
import json
import logging
import re
from collections.abc import Iterator

import pytest

from reconciler.domain.errors import UserError
from reconciler.telemetry.logs import configure_logging, secret_values

SECRET = "ghp_0123456789abcdefSECRET"
AWS_SECRET = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"
ENV = {
    "GITHUB_TOKEN": SECRET,
    "AWS_SECRET_ACCESS_KEY": AWS_SECRET,
    "AWS_REGION": "us-east-1",  # not a secret: stays
    "FEATURE_KEY": "true",  # too plain to hide
}


@pytest.fixture(autouse=True)
def restore_logging() -> Iterator[None]:
    """configure_logging changes the root logger: put it back for the other tests."""
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    noisy = {name: logging.getLogger(name).level for name in ("urllib3", "botocore", "kubernetes", "git")}
    yield
    for handler in list(root.handlers):
        if handler not in handlers:
            root.removeHandler(handler)
    root.setLevel(level)
    for name, was in noisy.items():
        logging.getLogger(name).setLevel(was)


def lines(stream: io.StringIO) -> list[str]:
    return stream.getvalue().splitlines()


def log_everything(log: logging.Logger) -> None:
    log.info(
        "pushing to https://bot:%s@github.com/org/capacity.git",
        SECRET,
        extra={"stage": "plan", "token_seen": SECRET, "groups": ["general", AWS_SECRET]},
    )
    try:
        raise RuntimeError(f"AWS said no to {AWS_SECRET}")
    except RuntimeError:
        log.exception("apply failed", extra={"stage": "apply"})


def test_json_lines_parse_and_carry_extra_fields() -> None:
    out = io.StringIO()
    configure_logging("json", "info", stream=out, environ=ENV)
    logging.getLogger("reconciler.runtime.run_loop").info(
        "cycle done in %.1fs", 1.25, extra={"stage": "plan", "groups": 3}
    )
    (line,) = lines(out)
    record = json.loads(line)
    assert record["message"] == "cycle done in 1.2s"
    assert record["level"] == "INFO"
    assert record["logger"] == "reconciler.runtime.run_loop"
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", record["timestamp"])
    assert record["stage"] == "plan" and record["groups"] == 3


def test_text_is_one_line_per_record() -> None:
    out = io.StringIO()
    configure_logging("text", "info", stream=out, environ=ENV)
    log = logging.getLogger("reconciler.runtime.plan_stage")
    log.info("planned %d groups", 3, extra={"stage": "plan"})
    try:
        raise ValueError("two\nlines")
    except ValueError:
        log.exception("failed")
    first, second = lines(out)
    assert re.fullmatch(
        r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z INFO runtime\.plan_stage: planned 3 groups stage=plan", first
    )
    assert " ERROR runtime.plan_stage: failed | Traceback" in second
    assert "ValueError: two\\nlines" in second


@pytest.mark.parametrize("fmt", ["text", "json"])
def test_secrets_from_the_environment_are_redacted(fmt: str) -> None:
    out = io.StringIO()
    configure_logging(fmt, "info", stream=out, environ=ENV)
    log_everything(logging.getLogger("reconciler.gitops.repo"))
    text = out.getvalue()
    assert SECRET not in text and AWS_SECRET not in text
    assert "bot:" not in text
    assert "https://github.com/org/capacity.git" in text
    assert "***" in text
    assert len(lines(out)) == 2
    if fmt == "json":
        first, second = (json.loads(line) for line in lines(out))
        assert first["token_seen"] == "***" and first["groups"] == ["general", "***"]
        assert "AWS said no to ***" in second["exc_info"]


def test_the_real_environment_is_read(monkeypatch: pytest.MonkeyPatch) -> None:
    out = io.StringIO()
    configure_logging("text", "info", stream=out)
    monkeypatch.setenv("ASG_RECONCILER_FORGE_TOKEN", SECRET)  # set after configuring: still covered
    logging.getLogger("reconciler").warning("token is %s", SECRET)
    assert SECRET not in out.getvalue() and "token is ***" in out.getvalue()


def test_library_loggers_redacted_too() -> None:
    out = io.StringIO()
    configure_logging("text", "debug", stream=out, environ=ENV)
    logging.getLogger("botocore").warning("retrying https://u:%s@api.github.com", SECRET)
    assert len(lines(out)) == 1
    assert SECRET not in out.getvalue() and "https://api.github.com" in out.getvalue()


def test_idempotent() -> None:
    out = io.StringIO()
    configure_logging("text", "info", stream=out, environ=ENV)
    configure_logging("text", "info", stream=out, environ=ENV)
    logging.getLogger("reconciler").info("once")
    assert len(lines(out)) == 1


def test_levels_and_noisy_libraries() -> None:
    out = io.StringIO()
    configure_logging("text", "warning", stream=out, environ=ENV)
    logging.getLogger("reconciler").info("hidden")
    logging.getLogger("reconciler").warning("shown")
    configure_logging("text", "debug", stream=out, environ=ENV)
    logging.getLogger("botocore").info("a request")
    logging.getLogger("kubernetes").debug("a response")
    logging.getLogger("git").warning("a git warning")
    assert [line.split(": ", 1)[1] for line in lines(out)] == ["shown", "a git warning"]


def test_bad_format_or_level() -> None:
    with pytest.raises(UserError, match="text, json"):
        configure_logging("xml")
    with pytest.raises(UserError, match="debug, info"):
        configure_logging("text", "loud")


def test_secret_values() -> None:
    found = secret_values({"A_TOKEN": "abcdef", "B_KEY": "abcdefgh", "C_PASSWORD": "no", "D": "abcdefgh"})
    assert found == ("abcdefgh", "abcdef")  # longest first; too short and unnamed ones left out
