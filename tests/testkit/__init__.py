"""Test support: real services (S3 server, PostgreSQL, Kubernetes control plane) started as fixtures."""
