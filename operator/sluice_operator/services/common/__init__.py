"""What the reconcile steps hand each other: plain data and the status vocabulary they share, no I/O.

The context a decision is made in (`context`), what was observed (`observed`), the plan decided (`plan`:
actions, events, the status to write), what acting did (`acted`), what a reconcile reports to the
handlers (`outcome`), and what deciding and recording both say: conditions (`conditions`) and the events
of an ended savepoint (`savepoint_events`). Every role may import it; it imports none of them.
"""
