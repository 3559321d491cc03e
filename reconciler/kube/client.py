"""An ApiClient for the cluster: the configured kubeconfig, in-cluster credentials, or the default
kubeconfig chain ($KUBECONFIG, ~/.kube/config), in that order."""

from __future__ import annotations

import os

import yaml
from kubernetes import client as k8s
from kubernetes import config as k8s_config
from kubernetes.config.config_exception import ConfigException

from reconciler.config import Config, KubernetesConfig
from reconciler.errors import UserError


def api_client(settings: KubernetesConfig, *, parallel: int = 1) -> k8s.ApiClient:
    """`parallel`: how many threads share the client (apply's drains, plus the Lease renewal and a
    margin), so the urllib3 pool never has to drop connections ("Connection pool is full")."""
    configuration = k8s.Configuration()
    try:
        if not settings.kubeconfig and "KUBERNETES_SERVICE_HOST" in os.environ:
            k8s_config.load_incluster_config(client_configuration=configuration)
        else:
            k8s_config.load_kube_config(
                config_file=settings.kubeconfig or None,
                context=settings.context or None,
                client_configuration=configuration,
            )
    except (ConfigException, FileNotFoundError, yaml.YAMLError) as exc:
        where = settings.kubeconfig or os.environ.get("KUBECONFIG") or "~/.kube/config"
        reason = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        if isinstance(exc, yaml.YAMLError):
            mark = getattr(exc, "problem_mark", None)
            line = f" at line {mark.line + 1}" if mark is not None else ""
            reason = f"not valid YAML{line}: {getattr(exc, 'problem', None) or reason}"
        raise UserError(
            f"kubernetes.kubeconfig: cannot load {where}: {reason} "
            "(set KUBECONFIG or kubernetes.kubeconfig, or read a dump with --snapshot FILE)"
        ) from None
    configuration.retries = 3
    configuration.connection_pool_maxsize = max(configuration.connection_pool_maxsize, parallel + 4)
    return k8s.ApiClient(configuration)


_SERVICE_ACCOUNT_NAMESPACE = "/var/run/secrets/kubernetes.io/serviceaccount/namespace"


def run_namespace(config: Config, service_account: str = _SERVICE_ACCOUNT_NAMESPACE) -> str:
    """`run.namespace`, else the namespace of the pod we run in, else kube-system."""
    if config.run.namespace:
        return config.run.namespace
    try:
        return open(service_account, encoding="utf-8").read().strip() or "kube-system"
    except OSError:
        return "kube-system"
