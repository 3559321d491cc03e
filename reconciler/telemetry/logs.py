"""Log lines: one per record, for people (text) or collectors (json), never carrying a secret.

Text: `2026-12-03T11:00:00.123Z INFO runtime.plan_stage: message key=value` (UTC; newlines escaped,
so a traceback stays one line for `kubectl logs | grep`). JSON: python-json-logger's JsonFormatter
with `timestamp`, `level`, `logger`, `message` and every `extra=` field.

Secrets: the token the forge and git use, AWS keys and the like reach the process as environment
variables, and an error message can echo them (a URL with credentials, a request dump). A filter on
our handler replaces the value of every variable whose name ends in TOKEN, SECRET, PASSWORD or KEY
with `***` in the message, the extra fields and the traceback, and drops `user:password@` from
URLs; the formatted line is scrubbed once more, so nothing the filter could not see slips through.
"""

from __future__ import annotations

import json
import logging
import os
import re
import sys
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from typing import Any, TextIO

from pythonjsonlogger.json import JsonFormatter

from reconciler.domain.durations import standing
from reconciler.domain.errors import UserError

FORMATS = ("text", "json")
LEVELS = {"debug": logging.DEBUG, "info": logging.INFO, "warning": logging.WARNING, "error": logging.ERROR}
# Libraries that log every request or retry at INFO/DEBUG: only their warnings are worth a line.
NOISY = ("urllib3", "botocore", "boto3", "s3transfer", "kubernetes", "git")

SECRET_SUFFIXES = ("TOKEN", "SECRET", "PASSWORD", "KEY")
SECRET_NAMES = ("AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN")
MASK = "***"
# Values this short (or these words) are not secrets worth hiding, and would mangle every line.
_MIN_SECRET = 4
_NOT_SECRETS = frozenset({"true", "false", "yes", "no", "none", "null"})
# scheme://userinfo@ -> scheme:// (the host and path stay readable)
_URL_USERINFO = re.compile(r"(?P<scheme>\b[a-z][a-z0-9+.-]*://)[^/?#@\s]+@", re.IGNORECASE)

_OURS = "_asg_reconciler_handler"
_STANDARD = frozenset(logging.makeLogRecord({}).__dict__) | {"message", "asctime", "taskName"}


def secret_values(environ: Mapping[str, str]) -> tuple[str, ...]:
    """The values of secret-looking variables, longest first (so a secret inside another goes too)."""
    found = {
        value
        for name, value in environ.items()
        if (name.upper().endswith(SECRET_SUFFIXES) or name.upper() in SECRET_NAMES)
        and len(value) >= _MIN_SECRET
        and value.lower() not in _NOT_SECRETS
    }
    return tuple(sorted(found, key=len, reverse=True))


def redact(text: str, secrets: tuple[str, ...]) -> str:
    """`text` without URL userinfo and without any of `secrets`."""
    text = _URL_USERINFO.sub(lambda m: m["scheme"], text)
    for secret in secrets:
        text = text.replace(secret, MASK)
    return text


def _redact_value(value: Any, secrets: tuple[str, ...]) -> Any:
    if isinstance(value, str):
        return redact(value, secrets)
    if isinstance(value, Mapping):
        return {k: _redact_value(v, secrets) for k, v in value.items()}
    if isinstance(value, list | tuple | set | frozenset):
        return [_redact_value(v, secrets) for v in value]
    return value


class RedactSecrets(logging.Filter):
    """Scrub a record before any formatter sees it: message (args merged in), extra fields,
    traceback and stack. The environment is read at each record, so a token set later is covered."""

    def __init__(self, environ: Mapping[str, str] | None = None) -> None:
        super().__init__()
        self._environ = environ

    def secrets(self) -> tuple[str, ...]:
        return secret_values(self._environ if self._environ is not None else os.environ)

    def filter(self, record: logging.LogRecord) -> bool:
        secrets = self.secrets()
        try:
            message = record.getMessage()
        except Exception:  # a bad %-format: still one line, still scrubbed
            message = f"{record.msg} {record.args!r}"
        record.msg, record.args = redact(message, secrets), None
        for key, value in list(record.__dict__.items()):
            if key not in _STANDARD:
                setattr(record, key, _redact_value(value, secrets))
        if record.exc_info:
            record.exc_text = logging.Formatter().formatException(record.exc_info)
            record.exc_info = None
        if record.exc_text:
            record.exc_text = redact(record.exc_text, secrets)
        if record.stack_info:
            record.stack_info = redact(record.stack_info, secrets)
        return True


def _utc_time(record: logging.LogRecord) -> str:
    moment = datetime.fromtimestamp(record.created, UTC)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z"


def _logger_name(name: str) -> str:
    return name.removeprefix("reconciler.")


class TextFormatter(logging.Formatter):
    """`<UTC time> <LEVEL> <logger>: <message> key=value ...`, always one line."""

    def __init__(self, scrub: RedactSecrets) -> None:
        super().__init__()
        self._scrub = scrub

    def format(self, record: logging.LogRecord) -> str:
        line = f"{_utc_time(record)} {record.levelname} {_logger_name(record.name)}: {record.getMessage()}"
        extras = {k: v for k, v in record.__dict__.items() if k not in _STANDARD}
        for key, value in extras.items():
            line += f" {key}={_logfmt(value)}"
        if record.exc_info and not record.exc_text:
            record.exc_text = self.formatException(record.exc_info)
        if record.exc_text:
            line += " | " + record.exc_text
        if record.stack_info:
            line += " | " + record.stack_info
        return redact(line, self._scrub.secrets()).replace("\r", "\\r").replace("\n", "\\n")


def _logfmt(value: Any) -> str:
    text = value if isinstance(value, str) else json.dumps(value, default=str)
    if text == "" or any(c in text for c in ' "=\n'):
        return json.dumps(text)
    return text


class JsonLineFormatter(JsonFormatter):
    """python-json-logger with our field names, UTC timestamps and a last scrub of the line."""

    def __init__(self, scrub: RedactSecrets) -> None:
        super().__init__(
            "%(asctime)s %(levelname)s %(name)s %(message)s",
            rename_fields={"asctime": "timestamp", "levelname": "level", "name": "logger"},
        )
        self._scrub = scrub

    def formatTime(self, record: logging.LogRecord, datefmt: str | None = None) -> str:
        return _utc_time(record)

    def format(self, record: logging.LogRecord) -> str:
        return redact(super().format(record), self._scrub.secrets())


class _StderrHandler(logging.Handler):
    """Writes to `stream`, or to whatever sys.stderr is at the time (CliRunner and pytest swap it)."""

    def __init__(self, stream: TextIO | None) -> None:
        super().__init__()
        self._stream = stream

    def emit(self, record: logging.LogRecord) -> None:
        try:
            stream = self._stream if self._stream is not None else sys.stderr
            stream.write(self.format(record) + "\n")
            stream.flush()
        except Exception:
            self.handleError(record)


def configure_logging(
    fmt: str = "text",
    level: str = "info",
    stream: TextIO | None = None,
    environ: Mapping[str, str] | None = None,
) -> None:
    """Route every log record through one handler of ours on the root logger (replacing the one an
    earlier call installed, so calling twice never doubles lines). `stream` defaults to stderr;
    `environ` (for tests) to os.environ."""
    if fmt not in FORMATS:
        raise UserError(f"log format {fmt!r} is not one of {', '.join(FORMATS)}")
    number = LEVELS.get(level.lower())
    if number is None:
        raise UserError(f"log level {level!r} is not one of {', '.join(LEVELS)}")
    scrub = RedactSecrets(environ)
    handler = _StderrHandler(stream)
    handler.addFilter(scrub)
    handler.setFormatter(JsonLineFormatter(scrub) if fmt == "json" else TextFormatter(scrub))
    setattr(handler, _OURS, True)
    root = logging.getLogger()
    for old in [h for h in root.handlers if getattr(h, _OURS, False)]:
        root.removeHandler(old)
        old.close()
    handler.setLevel(number)  # a library logger set lower (werkzeug's INFO) still stops here
    root.addHandler(handler)
    root.setLevel(number)
    for name in NOISY:
        logging.getLogger(name).setLevel(max(logging.WARNING, number))
    # urllib3's "Retrying (...)" warnings repeat what our own errors and retries already say
    logging.getLogger("urllib3").setLevel(max(logging.ERROR, number))


class SaidOnce:
    """Which lines a loop logs: a standing warning or decision is said once, not every cycle (and
    again if it goes away and comes back). A line whose words only move with time (`empty for 2s`,
    then `1h5m`; a utilisation percentage) is the same line (domain.durations.standing): else an
    open proposal would be said again every minute of its wait. One set per key, the last cycle's."""

    def __init__(self) -> None:
        self._said: dict[str, frozenset[str]] = {}

    def new(self, key: str, lines: Iterable[str]) -> list[str]:
        """The lines of this cycle not said under `key` by the previous one."""
        lines = list(lines)
        before = self._said.get(key, frozenset())
        self._said[key] = frozenset(standing(line) for line in lines)
        return [line for line in lines if standing(line) not in before]
