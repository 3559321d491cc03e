"""The API's error answers: metav1.Status bodies with the real server's reasons and details."""

from __future__ import annotations

from typing import Any

from reconciler.demo.kube_api.resources import Resource
from reconciler.demo.kube_api.types import Obj

# ----------------------------------------------------------------------------------- errors


class ApiError(Exception):
    """An error answered as a `Status` object with the given HTTP code and reason."""

    def __init__(
        self,
        code: int,
        reason: str,
        message: str,
        details: Obj | None = None,
        *,
        list_meta: Obj | None = None,
    ) -> None:
        super().__init__(message)
        self.code, self.reason, self.message, self.details = code, reason, message, details
        self.list_meta = list_meta

    def status(self) -> Obj:
        return status_body(self.code, self.reason, self.message, self.details, list_meta=self.list_meta)


def status_body(
    code: int, reason: str, message: str, details: Obj | None = None, *, list_meta: Obj | None = None
) -> Obj:
    """A `Status`; `list_meta` is its ListMeta (an expired list's continue token)."""
    body: Obj = {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": dict(list_meta or {}),
        "status": "Failure",
        "message": message,
        "reason": reason,
    }
    if details is not None:
        body["details"] = details
    body["code"] = code
    return body


_REASONS = {
    400: "BadRequest",
    401: "Unauthorized",
    403: "Forbidden",
    404: "NotFound",
    405: "MethodNotAllowed",
    409: "Conflict",
    410: "Expired",
    415: "UnsupportedMediaType",
    422: "Invalid",
    429: "TooManyRequests",
    500: "InternalError",
    503: "ServiceUnavailable",
    504: "Timeout",
}


# storage/etcd3's answer to a continue token whose revision was compacted (with a token that goes on
# at the latest revision in the Status's metadata.continue).
_INCONSISTENT_CONTINUE = (
    "The provided continue parameter is too old to display a consistent list result. You can start a "
    "new list without the continue parameter, or use the continue token in this response to retrieve "
    "the remainder of the results. Continuing with the provided token results in an inconsistent list "
    "- objects that were created, modified, or deleted between the time the first chunk was returned "
    "and now may show up in the list."
)


def _details(res: Resource, name: str, **extra: Any) -> Obj:
    d: Obj = {"name": name}
    if res.group:
        d["group"] = res.group
    d["kind"] = res.plural
    d.update(extra)
    return d


def _not_found(res: Resource, name: str) -> ApiError:
    return ApiError(404, "NotFound", f'{_qualified(res)} "{name}" not found', _details(res, name))


def _conflict(res: Resource, name: str) -> ApiError:
    return ApiError(
        409,
        "Conflict",
        f'Operation cannot be fulfilled on {_qualified(res)} "{name}": the object has been modified; '
        "please apply your changes to the latest version and try again",
        _details(res, name),
    )


def _qualified(res: Resource) -> str:
    return f"{res.plural}.{res.group}" if res.group else res.plural
