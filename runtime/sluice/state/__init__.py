"""State that operators and user functions keep, and how it is split and merged across subtasks."""
