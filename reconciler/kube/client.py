"""An ApiClient for the cluster: the configured kubeconfig, in-cluster credentials, or the default
kubeconfig chain ($KUBECONFIG, ~/.kube/config), in that order.

Every call made through it has a timeout: `kubernetes.requestTimeout` to connect and for each read,
unless the caller passes its own `_request_timeout` (a watch, whose server-side timeoutSeconds needs
a longer read). urllib3 retries a refused or dropped connection as before, never a timeout: the one
retry policy for those is `kube.retry` (one more try), so a hung server fails a call within about
2 x the timeout.
"""

from __future__ import annotations

import contextlib
import difflib
import logging
import os
import shutil
import stat
from collections.abc import Iterator
from types import TracebackType
from typing import Any, Self

import urllib3
import yaml
from kubernetes import client as k8s
from kubernetes import config as k8s_config
from kubernetes.config.config_exception import ConfigException
from kubernetes.config.kube_config import KUBE_CONFIG_DEFAULT_LOCATION, KubeConfigMerger

from reconciler.config.documents import decode_utf8
from reconciler.config.settings import Config, KubernetesConfig
from reconciler.domain.errors import UserError
from reconciler.kube.retry import timed_out

URLLIB3_RETRIES = 3  # a refused or dropped connection, tried again at once by urllib3
_PLUGIN_PACKAGES = {"aws": "the AWS CLI", "gke-gcloud-auth-plugin": "gcloud's gke-gcloud-auth-plugin"}


class TimedApiClient(k8s.ApiClient):
    """An ApiClient whose calls without a `_request_timeout` of their own get `request_timeout`
    (seconds) to connect and to read: without one a server that accepts and never answers holds a
    call forever."""

    def __init__(self, configuration: k8s.Configuration, request_timeout: float) -> None:
        super().__init__(configuration)
        self.request_timeout = request_timeout

    def call_api(
        self,
        method: str,
        url: str,
        header_params: Any = None,
        body: Any = None,
        post_params: Any = None,
        _request_timeout: Any = None,
    ) -> Any:
        if _request_timeout is None:
            _request_timeout = (self.request_timeout, self.request_timeout)
        return super().call_api(method, url, header_params, body, post_params, _request_timeout)


class _Retry(urllib3.Retry):
    """urllib3's retries minus timeouts: a timed-out try is raised at once, for `kube.retry` to
    decide on (a hung server would otherwise cost URLLIB3_RETRIES + 1 timeouts per try)."""

    def increment(
        self,
        method: str | None = None,
        url: str | None = None,
        response: Any = None,
        error: Exception | None = None,
        _pool: Any = None,
        _stacktrace: TracebackType | None = None,
    ) -> Self:
        if error is not None and timed_out(error):
            raise error
        return super().increment(method, url, response, error, _pool, _stacktrace)


def api_client(settings: KubernetesConfig, *, parallel: int = 1) -> k8s.ApiClient:
    """`parallel`: how many threads share the client (apply's drains, plus the Lease renewal and a
    margin), so the urllib3 pool never has to drop connections ("Connection pool is full")."""
    configuration = k8s.Configuration()
    where = settings.kubeconfig or os.environ.get("KUBECONFIG") or "~/.kube/config"
    field, paths = _kubeconfig_source(settings)
    try:
        if not settings.kubeconfig and "KUBERNETES_SERVICE_HOST" in os.environ:
            k8s_config.load_incluster_config(client_configuration=configuration)
        else:
            _check_readable(settings)
            _check_context(settings, where)
            _check_exec_plugin(settings, where)
            with _plugin_failures() as failures:
                k8s_config.load_kube_config(
                    config_file=settings.kubeconfig or None,
                    context=settings.context or None,
                    client_configuration=configuration,
                )
            if failures:
                raise UserError(
                    f"kubernetes.kubeconfig: {where}: the exec plugin gave no credentials: {failures[0]}"
                )
    except (TypeError, AttributeError) as exc:  # an entry of the wrong shape, deep inside the loader
        raise UserError(
            f"kubernetes.kubeconfig: cannot load {where}: not a kubeconfig (an entry of the wrong type: "
            f"{exc}); compare it with `kubectl config view` output, or regenerate it "
            "(`aws eks update-kubeconfig`)"
        ) from None
    except (ConfigException, FileNotFoundError, yaml.YAMLError) as exc:
        reason = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        if isinstance(exc, yaml.YAMLError):
            mark = getattr(exc, "problem_mark", None)
            line = f" at line {mark.line + 1}" if mark is not None else ""
            reason = f"not valid YAML{line}: {getattr(exc, 'problem', None) or reason}"
        elif not any(os.path.exists(os.path.expanduser(p)) for p in paths):
            reason = "no such file"
        raise UserError(
            f"{field}: cannot load {where}: {reason} "
            "(set KUBECONFIG or kubernetes.kubeconfig, or read a dump with --snapshot FILE)"
        ) from None
    configuration.retries = _Retry(URLLIB3_RETRIES)
    configuration.connection_pool_maxsize = max(configuration.connection_pool_maxsize, parallel + 4)
    return TimedApiClient(configuration, settings.request_timeout.total_seconds())


def _kubeconfig_source(settings: KubernetesConfig) -> tuple[str, list[str]]:
    """Where the kubeconfig comes from, as the user set it (the name an error gives them to fix),
    and the files the loader would open."""
    if settings.kubeconfig:
        return "kubernetes.kubeconfig", [settings.kubeconfig]
    if os.environ.get("KUBECONFIG"):
        return "KUBECONFIG", [p for p in os.environ["KUBECONFIG"].split(os.pathsep) if p]
    return "kubeconfig", [KUBE_CONFIG_DEFAULT_LOCATION]


def _check_readable(settings: KubernetesConfig) -> None:
    """Each kubeconfig the loader would open is a readable regular UTF-8 file, or a UserError naming
    it and the fix: the loader itself raises IsADirectoryError, PermissionError or UnicodeDecodeError
    (a traceback), and a FIFO blocks its open() until a writer comes, for ever."""
    field, paths = _kubeconfig_source(settings)
    fix = f"point {'kubernetes.kubeconfig' if field == 'kubeconfig' else field} at the kubeconfig file"
    for given in paths:
        path = os.path.expanduser(given)
        try:
            status = os.stat(path)
        except FileNotFoundError:
            continue  # the loader says which file is missing, or moves on to the next of KUBECONFIG
        except OSError as exc:
            raise UserError(f"{field}: {given}: cannot read it ({exc.strerror}); {fix}") from None
        if stat.S_ISDIR(status.st_mode):
            raise UserError(f"{field}: {given}: is a directory, not a kubeconfig; {fix}")
        if not stat.S_ISREG(status.st_mode):
            raise UserError(f"{field}: {given}: not a regular file (a FIFO, socket or device); {fix}")
        try:
            with open(path, "rb") as file:
                data = file.read()
        except OSError as exc:
            raise UserError(
                f"{field}: {given}: cannot read it ({exc.strerror}); make it readable by this user "
                f"(uid {os.getuid()}) or {fix}"
            ) from None
        _check_shape(decode_utf8(data, f"{field}: {given}"), f"{field}: cannot load {given}", fix)


_KUBECONFIG_LISTS = ("clusters", "contexts", "users")


def _check_shape(text: str, where: str, fix: str) -> None:
    """The shape the loader indexes without checking: a mapping whose clusters, contexts and users
    are lists of mappings (else a TypeError from inside the client). Bad YAML is left to the loader,
    which names the line."""
    try:
        document = yaml.safe_load(text)
    except yaml.YAMLError:
        return
    if document is None:
        return  # the loader says the file is empty
    if not isinstance(document, dict):
        raise UserError(
            f"{where}: not a kubeconfig (a YAML {type(document).__name__} where a mapping with clusters, "
            f"contexts and users belongs); {fix}"
        )
    for key in _KUBECONFIG_LISTS:
        value = document.get(key)
        if value is not None and not (isinstance(value, list) and all(isinstance(v, dict) for v in value)):
            raise UserError(f"{where}: not a kubeconfig ({key} must be a list of named entries); {fix}")
    if not isinstance(document.get("current-context", ""), str | None):
        raise UserError(f"{where}: not a kubeconfig (current-context must be a context's name); {fix}")


_CONTEXTS_SHOWN = 20  # a kubeconfig of a whole fleet may hold hundreds


def _check_context(settings: KubernetesConfig, where: str) -> None:
    """`kubernetes.context` names a context the kubeconfig has, or a UserError listing those it has
    (the loader only says "Expected object with name ... in .../contexts list")."""
    if not settings.context:
        return
    try:
        merged = KubeConfigMerger(settings.kubeconfig or KUBE_CONFIG_DEFAULT_LOCATION).config
        # the merger wraps each entry of every file's list in a ConfigNode (its `value`: the mapping)
        entries = [getattr(c, "value", c) for c in merged.value.get("contexts") or ()]
        names = [c.get("name") for c in entries if isinstance(c, dict)]
        current = merged.value.get("current-context")
    except Exception:  # a malformed kubeconfig: the loader's own checks say what is wrong
        return
    known = [n for n in names if isinstance(n, str)]
    if settings.context in known:
        return
    shown = ", ".join(known[:_CONTEXTS_SHOWN]) + (
        f" and {len(known) - _CONTEXTS_SHOWN} more" if len(known) > _CONTEXTS_SHOWN else ""
    )
    close = difflib.get_close_matches(settings.context, known, n=1, cutoff=0.6)
    guess = f"did you mean {close[0]}? " if close else ""
    now = f" (current-context: {current})" if isinstance(current, str) and current else ""
    fix = (
        f"it has {shown}{now}; {guess}set kubernetes.context to one of them (`kubectl config "
        "get-contexts`), or remove it to use the current context"
        if known
        else "it has no context; add one (`aws eks update-kubeconfig --alias NAME`), or remove "
        "kubernetes.context"
    )
    raise UserError(f"kubernetes.context: {settings.context!r} is not a context of {where}: {fix}")


def _check_exec_plugin(settings: KubernetesConfig, where: str) -> None:
    """The client runs a user's exec plugin (`aws eks get-token`) while loading, and when its
    command is missing only logs the error and goes on without credentials, so the API server's
    refusal (or a TLS error) is all a user would see: look for the command first."""
    plugin = _exec_plugin(settings.kubeconfig or KUBE_CONFIG_DEFAULT_LOCATION, settings.context or None)
    if plugin is None:
        return
    command, cwd, path = plugin
    if os.sep in command:
        found = os.access(os.path.join(cwd, command), os.X_OK)
    else:
        found = shutil.which(command, path=path) is not None
    if not found:
        package = _PLUGIN_PACKAGES.get(command, command)
        raise UserError(
            f"kubernetes.kubeconfig: {where}: the exec plugin command `{command}` was not found on PATH "
            f"(install {package} or add it to PATH, or set kubernetes.kubeconfig to a kubeconfig "
            "that does not need it)"
        )


def _exec_plugin(config_file: str, context: str | None) -> tuple[str, str, str | None] | None:
    """The selected user's exec plugin as the client would run it: (command, working directory,
    PATH searched). None without one; a malformed kubeconfig is left to the loader to report."""
    try:
        merged = KubeConfigMerger(config_file).config
        chosen = merged["contexts"].get_with_name(context or merged["current-context"])["context"]
        user = merged["users"].get_with_name(chosen["user"], safe=True)
        plugin = user["user"].safe_get("exec") if user is not None else None
        if not isinstance(plugin, dict) or not isinstance(plugin.get("command"), str):
            return None
        cluster = merged["clusters"].get_with_name(chosen["cluster"])["cluster"]
        env = {e.get("name"): e.get("value") for e in plugin.get("env") or () if isinstance(e, dict)}
        path = env.get("PATH") or os.environ.get("PATH")
    except Exception:  # the loader's own checks say what is wrong
        return None
    cwd = os.path.abspath(os.path.dirname(cluster.path)) if cluster.path else ""
    return plugin["command"], cwd, path if isinstance(path, str) else None


@contextlib.contextmanager
def _plugin_failures() -> Iterator[list[str]]:
    """The loader reports a failed exec plugin with logging.error on the root logger (which, with no
    handler there, also sets up logging for the whole process) and carries on without credentials:
    keep those messages off the root logger and hand them back, one line each."""
    failures: list[str] = []
    root = logging.getLogger()

    def keep(record: logging.LogRecord) -> bool:
        if record.module != "kube_config":
            return True
        text = " ".join(record.getMessage().split())
        failures.append(text if len(text) <= 300 else text[:297] + "...")
        return False

    guard = logging.NullHandler() if not root.handlers else None
    root.addFilter(keep)
    if guard is not None:
        root.addHandler(guard)
    try:
        yield failures
    finally:
        root.removeFilter(keep)
        if guard is not None:
            root.removeHandler(guard)


SERVICE_ACCOUNT_NAMESPACE = "/var/run/secrets/kubernetes.io/serviceaccount/namespace"


def run_namespace(config: Config, service_account: str = SERVICE_ACCOUNT_NAMESPACE) -> str:
    """`run.namespace`, else the namespace of the pod we run in, else kube-system."""
    if config.run.namespace:
        return config.run.namespace
    try:
        return open(service_account, encoding="utf-8").read().strip() or "kube-system"
    except OSError:
        return "kube-system"
