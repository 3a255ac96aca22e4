"""Graph passes: each a function from :class:`~braze.graph.ir.Graph` to Graph (or, for
the last ones, to a schedule), separately testable.

Pipeline (see :mod:`braze.graph.compiler`): simplify -> fuse -> plan_memory.
"""
