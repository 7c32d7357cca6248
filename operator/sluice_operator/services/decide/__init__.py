"""Decide: pure functions from what was observed to a plan.

They get the context and the observations as arguments and return (or fill in) a `Plan`: the status to
write, the actions, the events. Nothing here does I/O, reads a clock or draws a random number (the
caller draws the time and a new run's id into the context); the import contracts (pyproject.toml) keep
it from importing observe, act, the clients or any Kubernetes, HTTP or storage library.
"""
