# The Kubernetes fixtures (session control plane, per-test namespace) and a running operator.
from testkit.kube import kube_env, kube_namespace  # noqa: F401

from ._operator import operator  # noqa: F401
