"""This edge's typed failure: what metrics and logs label it by (DESIGN §4: never from message text)."""

from __future__ import annotations

from reconciler.domain.errors import OperationError, UncertainError


class AwsError(OperationError):
    """An AWS API failed or could not be reached (after botocore's own retries)."""

    edge = "aws"


class AwsUncertainError(UncertainError, AwsError):
    """An AWS change whose answer was lost: it may have happened (callers must assume it did)."""
