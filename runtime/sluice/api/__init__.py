"""The pipeline API: a StreamEnvironment (`environment`) and the streams a pipeline builds from it.

Every kind of stream a pipeline passes through is in `datastream`: DataStream, KeyedStream,
WindowedStream, ConnectedStreams and the steps of the two joins. They share one module because they
name one another: a DataStream's methods return the other kinds, and each of those ends in a DataStream
again. In modules of their own, those modules would import one another, and none could be read or
tested without the rest. Other ways around such a cycle (a registry that builds streams by name, or
protocols standing in for the classes) would make mypy see something other than the class a step
returns, and users annotate their pipelines with these classes.

So `datastream` is the surface a user calls, each method a check and a call; what a step adds to the
graph is in private modules below it, which know graph nodes and never the stream classes:

- `_graph`: the graph being built (a StreamEnvironment owns one and every stream made from it adds to it)
- `_windowing`: the window operator for an assigner, its allowed lateness and late data
- `_two_input`: the operator of `connect(...).process(fn)` for the kind of function given
- `_joining`: window joins and interval joins
- `_own_tag` and `_callsite`: a check on user functions, and the user's line for error messages

An import contract in pyproject.toml keeps these layers, and `tests/unit/runtime/test_import_cycles.py`
fails on any import cycle.
"""
