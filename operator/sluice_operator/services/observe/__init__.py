"""Observe: reading the world a decision starts from: the StreamJob and Savepoint objects (parsed and
validated), the job's pods, the coordinator's REST API and storage."""
