"""The run loop's HTTP endpoint over real sockets: /metrics, /healthz, /readyz, and bad addresses."""

from __future__ import annotations

import socket
import urllib.error
import urllib.request
from collections.abc import Iterator

import pytest
from prometheus_client.openmetrics.parser import text_string_to_metric_families as openmetrics_families
from prometheus_client.parser import text_string_to_metric_families

from reconciler.domain.errors import UserError
from reconciler.telemetry.metrics import Metrics
from reconciler.telemetry.server import Health, TelemetryServer, parse_address


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def health(clock: FakeClock) -> Health:
    return Health(["plan", "apply"], lambda stage: 90.0 if stage == "plan" else 15.0, clock=clock)


@pytest.fixture
def server(health: Health) -> Iterator[TelemetryServer]:
    metrics = Metrics()
    metrics.cycle("plan", 1.5, None)
    served = TelemetryServer("127.0.0.1:0", metrics, health)
    served.start()
    yield served
    served.stop()


def get(server: TelemetryServer, path: str, accept: str = "") -> tuple[int, str, str]:
    request = urllib.request.Request(f"http://127.0.0.1:{server.port}{path}")
    if accept:
        request.add_header("Accept", accept)
    try:
        with urllib.request.urlopen(request, timeout=10) as reply:
            return reply.status, reply.headers["Content-Type"], reply.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.headers["Content-Type"], exc.read().decode()


def test_metrics_parse(server: TelemetryServer) -> None:
    status, content_type, body = get(server, "/metrics")
    assert status == 200
    assert content_type.startswith("text/plain")
    values = {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(body)
        for s in family.samples
    }
    assert values[("asg_reconciler_cycles_total", (("stage", "plan"),))] == 1


def test_metrics_speak_openmetrics_when_asked(server: TelemetryServer) -> None:
    status, content_type, body = get(server, "/metrics", accept="application/openmetrics-text; version=1.0.0")
    assert status == 200
    assert content_type.startswith("application/openmetrics-text")
    names = {family.name for family in openmetrics_families(body)}
    assert "asg_reconciler_cycles" in names  # OpenMetrics names a counter without its _total


def test_healthz_goes_red_after_a_stall_and_green_again(
    server: TelemetryServer, health: Health, clock: FakeClock
) -> None:
    assert get(server, "/healthz")[0] == 200
    for _ in range(5):  # apply beats every 10s: within its 15s, for longer than 15s in all
        clock.now += 10
        health.progress("apply")
        health.progress("plan")
        status, _, body = get(server, "/healthz")
        assert (status, body.strip()) == (200, "ok")
    clock.now += 16  # apply quiet for 16s, plan too (but plan may be quiet for 90s)
    status, _, body = get(server, "/healthz")
    assert status == 503
    assert "apply" in body and "plan" not in body
    health.progress("apply")
    assert get(server, "/healthz")[0] == 200


def test_a_stage_that_never_reports_stalls(server: TelemetryServer, clock: FakeClock) -> None:
    clock.now += 91
    status, _, body = get(server, "/healthz")
    assert status == 503
    assert "stage apply" in body and "stage plan" in body


def test_readyz_waits_for_every_stage(server: TelemetryServer, health: Health) -> None:
    status, _, body = get(server, "/readyz")
    assert status == 503
    assert "apply" in body and "plan" in body
    health.ready("plan")
    status, _, body = get(server, "/readyz")
    assert status == 503
    assert "apply" in body and "plan" not in body
    health.ready("apply")
    assert get(server, "/readyz")[:1] == (200,)


def test_readyz_also_waits_for_what_the_loop_names(clock: FakeClock) -> None:
    waiting = ["the cluster cache's first list of Pods (HTTP 500 Internal Server Error)"]
    health = Health(["plan"], lambda stage: 30.0, clock, waiting=lambda: waiting[0])
    health.ready("plan")
    assert health.is_ready() == (
        False,
        "not ready: waiting for the cluster cache's first list of Pods (HTTP 500 Internal Server Error)",
    )
    waiting[0] = ""
    assert health.is_ready() == (True, "ok")


def test_unknown_path(server: TelemetryServer) -> None:
    assert get(server, "/nope")[0] == 404


def test_port_in_use_is_a_user_error(health: Health) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        server = TelemetryServer(f"127.0.0.1:{port}", Metrics(), health)
        with pytest.raises(UserError, match=r"run\.metricsAddress.*in use"):
            server.start()


@pytest.mark.parametrize("address", ["8085", "localhost", "host:port", ":99999", "::1:8085"])
def test_unparsable_addresses(address: str) -> None:
    with pytest.raises(UserError, match=r"run\.metricsAddress"):
        parse_address(address)


def test_addresses() -> None:
    assert parse_address(":8085") == ("", 8085)
    assert parse_address("0.0.0.0:0") == ("0.0.0.0", 0)
    assert parse_address("[::1]:8085") == ("::1", 8085)


def test_a_host_not_of_this_machine(health: Health) -> None:
    server = TelemetryServer("192.0.2.1:0", Metrics(), health)  # TEST-NET-1: never local
    with pytest.raises(UserError, match=r"run\.metricsAddress.*not an address of this machine"):
        server.start()


def test_empty_address_serves_nothing(health: Health) -> None:
    server = TelemetryServer("", Metrics(), health)
    server.start()
    assert not server.enabled and server.port == 0
    server.stop()


def test_stop_frees_the_port(health: Health) -> None:
    server = TelemetryServer("127.0.0.1:0", Metrics(), health)
    server.start()
    port = server.port
    server.stop()
    again = TelemetryServer(f"127.0.0.1:{port}", Metrics(), health)
    again.start()
    again.stop()
