"""The pipeline API."""
