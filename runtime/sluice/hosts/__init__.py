"""Where TaskManagers run: local processes, or Spark barrier tasks."""
