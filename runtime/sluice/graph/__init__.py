"""The job's logical graph (transformations) and its physical form (chained job vertices)."""
