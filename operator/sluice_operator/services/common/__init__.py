"""What the reconcile steps hand each other: the decision's context (`context`), what was observed
(`observed`), the plan decided (`plan`), what acting did (`acted`), and what a reconcile reports to the
handlers (`outcome`)."""
