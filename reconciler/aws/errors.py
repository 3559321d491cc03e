"""This edge's typed failure: what metrics and logs label it by (DESIGN §4: never from message text)."""

from __future__ import annotations

from reconciler.domain.errors import OperationError


class AwsError(OperationError):
    """An AWS API failed or could not be reached (after botocore's own retries)."""

    edge = "aws"
