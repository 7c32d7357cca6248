"""Decide: functions from what was observed to a plan: the status to write, the actions, the events."""
