"""The contract between the Sluice runtime and its Kubernetes operator, imported by both.

What one side writes and the other reads lives here once: the states and stop modes, the REST
documents, the control messages between a coordinator and its TaskManagers (all on one declarative
codec), and the storage layout's readers (which checkpoint a job restores from, and what makes one
damaged). It depends on the standard library only,
so the operator can import it without the runtime's dependencies (Spark, Arrow, the servers), and the
import contracts in pyproject.toml allow the operator nothing else of the runtime.
"""
