# The Kubernetes fixtures (session control plane, per-test namespace, process kubelet).
from testkit.kube import kube_env, kube_namespace, process_kubelet  # noqa: F401
