"""boto3 clients for the AWS edge, and the one place AWS failures become our errors.

Endpoints, profiles and credentials come only from boto3's own settings (`AWS_ENDPOINT_URL`,
`AWS_ENDPOINT_URL_AUTOSCALING`, `AWS_PROFILE`, IRSA, instance roles): a config key of ours would be one
more way to point plan and apply at different accounts. Throttling is botocore's job: the retry
config below is our whole retry logic, so every call (and every page of a paginator) gets it.

Timeouts: botocore retries a timed-out try like any transient failure, so a hung endpoint would hold
one call for all its attempts (10 x READ_TIMEOUT plus backoff). A try that times out after the
first is final instead: a hung endpoint fails a call within 2 x READ_TIMEOUT plus a second (about
a minute), and a command with it.
"""

from __future__ import annotations

import difflib
import logging
import re
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from functools import cache
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

import boto3
import botocore
import botocore.loaders
import botocore.session
from botocore.config import Config as BotoConfig
from botocore.exceptions import (
    BotoCoreError,
    ClientError,
    ConnectTimeoutError,
    NoCredentialsError,
    NoRegionError,
    PartialCredentialsError,
    ProfileNotFound,
    ReadTimeoutError,
)
from botocore.exceptions import (
    ConnectionError as BotoConnectionError,
)
from botocore.parsers import ResponseParserError

from reconciler.aws.errors import AwsError
from reconciler.config.settings import Config
from reconciler.domain.errors import UserError

if TYPE_CHECKING:
    from mypy_boto3_autoscaling import AutoScalingClient
    from mypy_boto3_ec2 import EC2Client

DEFAULT_MAX_ATTEMPTS = 10
TIMEOUT_ATTEMPTS = 2  # tries of one call that may time out
CONNECT_TIMEOUT = 10  # seconds
READ_TIMEOUT = 30  # seconds for each read; AWS's control-plane calls answer within a few
CREDENTIALS_FIX = (
    "set AWS_PROFILE or AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY, or run with an instance role/IRSA"
)
_USERINFO = re.compile(r"//[^/@\s]+@")  # credentials embedded in an endpoint URL never reach a message
_AUTH_CODES = frozenset(
    {
        "AuthFailure",
        "ExpiredToken",
        "ExpiredTokenException",
        "InvalidClientTokenId",
        "SignatureDoesNotMatch",
        "UnrecognizedClientException",
    }
)


_LOADER = botocore.loaders.create_loader()
_log = logging.getLogger(__name__)


def core_session() -> botocore.session.Session:
    """A fresh botocore session (credentials and settings read anew) sharing one model loader per
    process: re-reading botocore's service JSON costs about half a second per session."""
    core = botocore.session.get_session()
    core.register_component("data_loader", _LOADER)
    return core


def new_session(region: str | None = None) -> boto3.Session:
    return boto3.Session(botocore_session=core_session(), region_name=region)


@dataclass(frozen=True)
class AwsClients:
    autoscaling: AutoScalingClient
    ec2: EC2Client
    region: str
    eks: Any = None  # DescribeNodegroup for EKS managed node groups (aws/managed_nodegroups.py)


def retry_config(core: botocore.session.Session) -> BotoConfig:
    """Standard (or the user's adaptive) retries with enough attempts to ride out throttling.

    `AWS_RETRY_MODE` / `AWS_MAX_ATTEMPTS` (or the profile's settings) still win, so an operator can
    tune retries without a release; the legacy mode is never used because it retries too little.
    """
    mode = core.get_config_variable("retry_mode")
    attempts = core.get_config_variable("max_attempts")
    return BotoConfig(
        retries={
            "mode": mode if mode in ("standard", "adaptive") else "standard",
            "total_max_attempts": int(attempts) if attempts else DEFAULT_MAX_ATTEMPTS,
        },
        connect_timeout=CONNECT_TIMEOUT,
        read_timeout=READ_TIMEOUT,
    )


def _timeouts_end_retries(attempts: int, caught_exception: Exception | None = None, **_: Any) -> bool | None:
    """`needs-retry`, ahead of botocore's retry handler: False (no retry) once a try after the first
    timed out; None leaves the decision to botocore."""
    if attempts >= TIMEOUT_ATTEMPTS and isinstance(caught_exception, (ConnectTimeoutError, ReadTimeoutError)):
        return False
    return None


def _bounded(client: Any) -> None:
    service = client.meta.service_model.service_id.hyphenize()
    client.meta.events.register_first(f"needs-retry.{service}", _timeouts_end_retries)


def make_clients(config: Config) -> AwsClients:
    """Clients for `config.region` (else the standard chain), failing early on missing credentials
    or region so the user sees the fix before any work is done."""
    with aws_errors():
        core = core_session()
        session = boto3.Session(botocore_session=core, region_name=config.region or None)
        region = session.region_name
    if not region:
        raise UserError(
            f"{config.source or 'config'}: region: not set, and no AWS region in the environment "
            "(set `region:` in the config, or AWS_REGION / AWS_DEFAULT_REGION)"
        )
    with aws_errors():
        if session.get_credentials() is None:
            raise NoCredentialsError()
        options = retry_config(core)
        autoscaling = session.client("autoscaling", config=options)
        ec2 = session.client("ec2", config=options)
        eks = session.client("eks", config=options)
        for client in (autoscaling, ec2, eks):
            _bounded(client)
    _check_region(region, config, (autoscaling, ec2))
    return AwsClients(autoscaling=autoscaling, ec2=ec2, region=region, eks=eks)


@cache
def known_regions() -> frozenset[str]:
    """Every region of every partition in botocore's endpoint data (shipped with it, read offline)."""
    data = _LOADER.load_data("endpoints")
    found: set[str] = set()
    for partition in data.get("partitions", ()):
        found.update(partition.get("regions", {}))
        for service in ("autoscaling", "ec2"):
            endpoints = partition.get("services", {}).get(service, {}).get("endpoints", {})
            found.update(name for name in endpoints if not name.startswith("fips-") and "fips" not in name)
    return frozenset(found)


def _check_region(region: str, config: Config, clients: tuple[Any, ...]) -> None:
    """A region botocore does not know, on AWS's own endpoints, is refused before any call: a typo
    (`us-eest-1`) would otherwise surface as "cannot reach the AWS endpoint" after every retry of a
    DNS lookup. With an endpoint of one's own (`AWS_ENDPOINT_URL`, moto, a VPC endpoint) any name
    goes, with a warning; a region newer than the installed botocore has the same way through."""
    if region in known_regions():
        return
    where = (
        f"{config.source or 'config'}: region"
        if config.region
        else "region (from AWS_REGION / AWS_DEFAULT_REGION / the profile)"
    )
    close = difflib.get_close_matches(region, sorted(known_regions()), n=2, cutoff=0.75)
    guess = f" (did you mean {' or '.join(close)}?)" if close else ""
    if not any(is_aws_endpoint(client) for client in clients):
        _log.warning(
            "%s: %r is not an AWS region botocore %s knows%s; going on, as the AWS endpoints are set "
            "to others",
            where,
            region,
            botocore.__version__,
            guess,
        )
        return
    raise UserError(
        f"{where}: {region!r} is not an AWS region botocore {botocore.__version__} knows{guess}; "
        "correct it (`aws ec2 describe-regions` lists them), or, for a region newer than this botocore, "
        "upgrade botocore or set AWS_ENDPOINT_URL_AUTOSCALING and AWS_ENDPOINT_URL_EC2 to its endpoints"
    )


def aws_clients(config: Config) -> tuple[AutoScalingClient, EC2Client]:
    """The pair discovery takes, for callers that do not need the region."""
    clients = make_clients(config)
    return clients.autoscaling, clients.ec2


@contextmanager
def aws_errors(doing: str = "") -> Iterator[None]:
    """Turn botocore failures into one-line UserError / OperationError (no traceback, no secrets)."""
    context = f" while {doing}" if doing else ""
    try:
        yield
    except ProfileNotFound as exc:
        raise UserError(f"{_one_line(exc)}: fix AWS_PROFILE or add the profile to ~/.aws/config") from None
    except (NoCredentialsError, PartialCredentialsError):
        raise UserError(f"no usable AWS credentials{context}: {CREDENTIALS_FIX}") from None
    except NoRegionError:
        raise UserError(
            "region: not set, and no AWS region in the environment "
            "(set `region:` in the config, or AWS_REGION / AWS_DEFAULT_REGION)"
        ) from None
    except ClientError as exc:
        raise AwsError(_client_error_message(exc, context)) from None
    except BotoConnectionError as exc:
        raise AwsError(f"cannot reach the AWS endpoint{context}: {_one_line(exc)}") from None
    except (BotoCoreError, ResponseParserError) as exc:
        raise AwsError(f"AWS call failed{context}: {_one_line(exc)}") from None


def error_code(exc: ClientError) -> str:
    return str(exc.response.get("Error", {}).get("Code", ""))


def is_aws_endpoint(client: Any) -> bool:
    """True for AWS's own endpoints; False for an `AWS_ENDPOINT_URL` override such as moto."""
    host = urlsplit(str(client.meta.endpoint_url)).hostname or ""
    return host.endswith((".amazonaws.com", ".amazonaws.com.cn", ".api.aws"))


def _client_error_message(exc: ClientError, context: str) -> str:
    code = error_code(exc) or "error"
    message = _one_line(str(exc.response.get("Error", {}).get("Message", "")))
    text = f"AWS {exc.operation_name} failed{context}: {code}" + (f": {message}" if message else "")
    if code in _AUTH_CODES:
        text += f" (check the AWS credentials: {CREDENTIALS_FIX})"
    elif code in ("AccessDenied", "AccessDeniedException", "UnauthorizedOperation"):
        text += f" (grant {exc.operation_name} to the role asg-reconciler runs as)"
    return text


def _one_line(value: object) -> str:
    text = _USERINFO.sub("//", " ".join(str(value).split()))
    return text if len(text) <= 300 else text[:297] + "..."
