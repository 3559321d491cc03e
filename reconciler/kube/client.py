"""An ApiClient for the cluster: the configured kubeconfig, in-cluster credentials, or the default
kubeconfig chain ($KUBECONFIG, ~/.kube/config), in that order."""

from __future__ import annotations

import os

from kubernetes import client as k8s
from kubernetes import config as k8s_config
from kubernetes.config.config_exception import ConfigException

from reconciler.config import KubernetesConfig
from reconciler.errors import UserError


def api_client(settings: KubernetesConfig) -> k8s.ApiClient:
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
    except (ConfigException, FileNotFoundError) as exc:
        where = settings.kubeconfig or os.environ.get("KUBECONFIG") or "~/.kube/config"
        reason = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise UserError(
            f"kubernetes.kubeconfig: cannot load {where}: {reason} "
            "(set KUBECONFIG or kubernetes.kubeconfig, or read a dump with --snapshot FILE)"
        ) from None
    configuration.retries = 3
    return k8s.ApiClient(configuration)
