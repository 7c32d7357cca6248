"""The job's coordinator: schedules subtasks on TaskManagers, restarts them, serves the REST API."""
