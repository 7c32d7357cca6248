"""The execution engine: tasks, channels, operators, TaskManagers."""
