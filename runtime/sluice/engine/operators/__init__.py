"""Stream operators: the runtime's building blocks that user functions are wrapped in."""
