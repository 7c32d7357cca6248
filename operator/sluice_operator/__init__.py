"""Kopf controller for Sluice StreamJob and Savepoint resources."""
