"""An instance refresh under way, as AWS answers DescribeInstanceRefreshes while one runs."""

from __future__ import annotations

from typing import Any

import pytest
from botocore.awsrequest import AWSResponse

from tests.support.aws import _Body, on_every_session
from tests.support.aws_answers import REFRESH_IN_PROGRESS


def refresh_under_way(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """AWS answers every DescribeInstanceRefreshes with a refresh in progress; returns the log of asks."""
    asked: list[str] = []

    def refresh(request: Any, **_: Any) -> Any:
        asked.append("DescribeInstanceRefreshes")
        return AWSResponse(request.url, 200, {"Content-Type": "text/xml"}, _Body(REFRESH_IN_PROGRESS))

    on_every_session(monkeypatch, "before-send.auto-scaling.DescribeInstanceRefreshes", refresh)
    return asked
