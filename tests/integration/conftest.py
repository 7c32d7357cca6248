"""Fixtures of the real external services used by the integration tests."""

from testkit.postgres import postgres_db, postgres_server  # noqa: F401
from testkit.s3 import s3_bucket, s3_server  # noqa: F401
