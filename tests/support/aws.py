"""Fixtures for the aws test component (DESIGN §6): one moto server per test process, over HTTP.

The server starts once per session (per xdist worker) and is reset before each test with
`POST /moto-api/reset`, which takes milliseconds once moto skips loading its default AMIs. Each test
gets an environment pointing boto3 at it through `AWS_ENDPOINT_URL` — the same setting users have — and
isolated from the developer's own ~/.aws files and instance metadata.
"""

from __future__ import annotations

import urllib.request
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import pytest
from botocore.awsrequest import AWSResponse
from moto.server import ThreadedMotoServer

from reconciler.aws import clients as aws_clients_module
from reconciler.aws import instance_types
from reconciler.aws.clients import new_session
from reconciler.config.settings import Config, NodeGroupsConfig, NodeTemplatesConfig

REGION = "us-east-1"
ZONES = ("us-east-1a", "us-east-1b")
IMAGE_ID = "ami-12345678"  # any id: moto runs without its default AMI catalogue

# Variables that would leak the developer's AWS setup (or a CI's) into a test.
_AWS_VARIABLES = (
    "AWS_PROFILE",
    "AWS_DEFAULT_PROFILE",
    "AWS_SESSION_TOKEN",
    "AWS_SECURITY_TOKEN",
    "AWS_ROLE_ARN",
    "AWS_WEB_IDENTITY_TOKEN_FILE",
    "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI",
    "AWS_CONTAINER_CREDENTIALS_FULL_URI",
    "AWS_ENDPOINT_URL_AUTO_SCALING",
    "AWS_ENDPOINT_URL_EC2",
    "AWS_RETRY_MODE",
    "AWS_MAX_ATTEMPTS",
    "AWS_REGION",
)


@pytest.fixture(scope="session")
def moto_server() -> Iterator[str]:
    """The base URL of a moto server private to this test process."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("MOTO_EC2_LOAD_DEFAULT_AMIS", "false")  # read whenever moto builds an EC2 backend
        server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
        server.start()
        host, port = server.get_host_and_port()
        try:
            yield f"http://{host}:{port}"
        finally:
            server.stop()


def isolate_aws_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Any) -> None:
    """No credentials, region or endpoint from outside the test; no instance-metadata probing."""
    for name in (*_AWS_VARIABLES, "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_DEFAULT_REGION"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.delenv("AWS_ENDPOINT_URL", raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "no-aws-config"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "no-aws-credentials"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")


@dataclass
class MotoAws:
    """A reset moto account plus helpers that create what the tests describe."""

    endpoint: str
    autoscaling: Any
    ec2: Any
    region: str = REGION
    _templates: dict[str, str] = field(default_factory=dict)

    def config(
        self,
        auto_discovery: Sequence[str] = (),
        explicit: Sequence[str] = (),
        node_templates: NodeTemplatesConfig | None = None,
    ) -> Config:
        return Config(
            cluster="test",
            region=self.region,
            node_groups=NodeGroupsConfig(tuple(auto_discovery), tuple(explicit)),
            node_templates=node_templates or NodeTemplatesConfig(),
            source="test.yaml",
        )

    def launch_template(self, name: str, *instance_types: str, default_version: int | None = None) -> str:
        """A template with one version per instance type (version 1 = the first); returns its id."""
        first, *rest = instance_types or ("t3.small",)
        created = self.ec2.create_launch_template(
            LaunchTemplateName=name, LaunchTemplateData={"InstanceType": first, "ImageId": IMAGE_ID}
        )
        template_id: str = created["LaunchTemplate"]["LaunchTemplateId"]
        for instance_type in rest:
            self.ec2.create_launch_template_version(
                LaunchTemplateId=template_id,
                LaunchTemplateData={"InstanceType": instance_type, "ImageId": IMAGE_ID},
            )
        if default_version is not None:
            self.ec2.modify_launch_template(LaunchTemplateId=template_id, DefaultVersion=str(default_version))
        self._templates[name] = template_id
        return template_id

    def launch_configuration(self, name: str, instance_type: str) -> None:
        self.autoscaling.create_launch_configuration(
            LaunchConfigurationName=name, ImageId=IMAGE_ID, InstanceType=instance_type
        )

    def asg(
        self,
        name: str,
        *,
        min_size: int = 0,
        max_size: int = 10,
        desired: int = 0,
        tags: Mapping[str, str] | None = None,
        launch_template: str | None = None,
        version: str | None = None,
        launch_configuration: str | None = None,
        overrides: Sequence[tuple[str, str | None]] | None = None,
        zones: Sequence[str] = ZONES,
    ) -> None:
        """An ASG launching from a template (made on demand), a configuration, or mixed instances
        (`overrides` as (instance type, weight) pairs over `launch_template`)."""
        params: dict[str, Any] = {
            "AutoScalingGroupName": name,
            "MinSize": min_size,
            "MaxSize": max_size,
            "DesiredCapacity": desired,
            "AvailabilityZones": list(zones),
            "Tags": [
                {
                    "ResourceId": name,
                    "ResourceType": "auto-scaling-group",
                    "Key": key,
                    "Value": value,
                    "PropagateAtLaunch": True,
                }
                for key, value in (tags or {}).items()
            ],
        }
        if launch_configuration is not None:
            params["LaunchConfigurationName"] = launch_configuration
        else:
            template = launch_template or "default-template"
            if template not in self._templates:
                self.launch_template(template, "t3.small")
            spec: dict[str, str] = {"LaunchTemplateId": self._templates[template]}
            if version is not None:
                spec["Version"] = version
            if overrides is None:
                params["LaunchTemplate"] = spec
            else:
                params["MixedInstancesPolicy"] = {
                    "LaunchTemplate": {
                        "LaunchTemplateSpecification": spec,
                        "Overrides": [
                            {"InstanceType": t, **({"WeightedCapacity": w} if w else {})}
                            for t, w in overrides
                        ],
                    }
                }
        self.autoscaling.create_auto_scaling_group(**params)


@pytest.fixture
def aws(moto_server: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Any) -> MotoAws:
    """A freshly reset moto account, with boto3's environment pointing at it."""
    urllib.request.urlopen(urllib.request.Request(f"{moto_server}/moto-api/reset", method="POST")).close()
    instance_types.clear_cache()  # cached per endpoint, and every test here shares one
    isolate_aws_env(monkeypatch, tmp_path)
    monkeypatch.setenv("AWS_ENDPOINT_URL", moto_server)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    monkeypatch.setenv("AWS_DEFAULT_REGION", REGION)
    session = new_session(REGION)
    return MotoAws(moto_server, session.client("autoscaling"), session.client("ec2"))


# ------------------------------------------------------------------------------ fault injection
# moto has none, so faults go in through botocore's `before-send` event: a handler that returns a
# response stops botocore from sending the request, and everything after it — parsing, the retry
# decision, backoff — is botocore's real code.


class _Body:
    def __init__(self, body: bytes) -> None:
        self._body = body

    def stream(self, **_: Any) -> Iterator[bytes]:
        yield self._body


def query_error(code: str, message: str, sender: bool = True) -> bytes:
    """An error body as AWS's query-protocol APIs (Auto Scaling, EC2-compatible) send it."""
    kind = "Sender" if sender else "Receiver"
    return (
        f'<ErrorResponse xmlns="https://autoscaling.amazonaws.com/doc/2011-01-01/"><Error><Type>{kind}'
        f"</Type><Code>{code}</Code><Message>{message}</Message></Error><RequestId>test-request</RequestId>"
        "</ErrorResponse>"
    ).encode()


@dataclass
class Injected:
    """Requests a before-send hook saw; `answered` of them got the canned response."""

    seen: list[Any] = field(default_factory=list)
    answered: int = 0


def inject(client: Any, operation: str, status: int, body: bytes, times: int | None = None) -> Injected:
    """Answer the next `times` calls (every call when None) of `operation` with `status` and `body`."""
    record = Injected()
    service = client.meta.service_model.service_id.hyphenize()

    def before_send(request: Any, **_: Any) -> Any:
        record.seen.append(request)
        if times is not None and record.answered >= times:
            return None
        record.answered += 1
        return AWSResponse(request.url, status, {"Content-Type": "text/xml"}, _Body(body))

    client.meta.events.register(f"before-send.{service}.{operation}", before_send)
    return record


def on_every_session(monkeypatch: pytest.MonkeyPatch, event: str, handler: Callable[..., Any]) -> None:
    """Register `handler` for botocore's `event` on every session the code under test makes (they all
    come from reconciler.aws.clients.core_session), e.g. to count or answer requests in-process."""
    real_session = aws_clients_module.core_session

    def session() -> Any:
        core = real_session()
        core.register(event, handler)
        return core

    monkeypatch.setattr(aws_clients_module, "core_session", session)


def throttle(client: Any, operation: str, times: int | None = 2) -> Injected:
    return inject(client, operation, 400, query_error("Throttling", "Rate exceeded"), times)


@pytest.fixture
def no_retry_delay(monkeypatch: pytest.MonkeyPatch) -> None:
    """Keep botocore's retry decisions but skip its backoff sleeps, so retry tests take milliseconds."""
    from botocore.retries import standard

    monkeypatch.setattr(standard.ExponentialBackoff, "delay_amount", lambda self, context: 0.0)
