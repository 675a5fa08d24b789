"""fissile: an optimizing compiler and runtime for ONNX models, from Python.

    import fissile
    sess = fissile.InferenceSession("model.onnx", strategy="optimal", threads=2)
    outputs = sess.run(None, {"x": x})
    print(sess.plan["n_kernels"], sess.plan["predicted_s"])
    print(fissile.compare("model.onnx"))     # every strategy (and ONNX Runtime), measured

The API follows onnxruntime's (InferenceSession, get_inputs/get_outputs,
run), so that switching is a one-line change.  Errors are FissileError
subclasses, one per libfissile status, carrying libfissile's message.
See docs/python.md.
"""
from ._fissile import (  # noqa: F401
    ExecutionError,
    FileError,
    FissileError,
    InvalidArgument,
    InvalidModel,
    OutOfMemory,
    ParseError,
    ShapeError,
    UnsupportedError,
)
from .compare import Table, compare  # noqa: F401
from .session import InferenceSession, NodeArg, backends, default_backend  # noqa: F401

STRATEGIES = ("unfused", "opfuse", "greedy", "optimal")

__version__ = "0.1.0"

__all__ = [
    "InferenceSession", "NodeArg", "compare", "Table", "backends", "default_backend", "STRATEGIES",
    "FissileError", "InvalidArgument", "FileError", "ParseError", "InvalidModel", "UnsupportedError",
    "ShapeError", "OutOfMemory", "ExecutionError",
]
