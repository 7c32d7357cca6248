"""Fixtures shared by every test tier: the real services tests run against (see DESIGN.md section 6)."""

from testkit.kube import kube_env, kube_namespace, process_kubelet  # noqa: F401
from testkit.postgres import postgres_db, postgres_server  # noqa: F401
from testkit.s3 import s3_bucket, s3_server  # noqa: F401
