"""`import iris_ops`, the Iris drop-in's name, installed: it is the package streamk_pgas.iris_ops itself, and
`iris_ops.X` its module streamk_pgas.iris_ops.X (the same objects, nothing loaded twice)."""

from streamk_pgas.namespace import alias_toplevel

alias_toplevel(__name__)
