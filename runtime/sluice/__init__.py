"""Sluice: streaming jobs with Flink finishing semantics, on Spark."""
