"""Lazy imports of the foreign libraries, each with an ImportError naming its extra; the check that a
conversion was given a LoDTensor."""

import importlib
import importlib.util
import sys

from ..tensor import LoDTensor

__all__ = ["require", "loaded", "lod_tensor_arg"]


def lod_tensor_arg(t, what):
    """Refuse ``t`` unless it is a LoDTensor, with a TypeError naming what to call for a nested tensor (whose
    missing LoDTensor methods would otherwise surface as an AttributeError).

    >>> import numpy as np
    >>> import lodtensor.nested as ln
    >>> lod_tensor_arg(ln.nested_tensor([np.ones((2, 3))]), "to_arrow()")
    Traceback (most recent call last):
    ...
    TypeError: to_arrow(): expected a LoDTensor, got NestedTensor; a nested tensor ragged in its first ...
    """
    if not isinstance(t, LoDTensor):
        hint = ("; a nested tensor ragged in its first component dim converts with nt.to_lod_tensor()"
                if getattr(t, "is_nested", False) is True else "")
        raise TypeError(f"{what}: expected a LoDTensor, got {type(t).__name__}{hint}")


def require(module, extra, what):
    """Import ``module`` now; if missing, an ImportError naming the extra to install; if it is installed but
    its import fails (pyarrow >= 21 with NumPy 1.x: "pyarrow requires NumPy 2.0 or newer"), one with that reason.

    >>> require("lodtensor_no_such_module", "arrow", "f()")
    Traceback (most recent call last):
    ...
    ImportError: f() needs lodtensor_no_such_module, which is not installed; install it with ...
    """
    try:
        return importlib.import_module(module)
    except ImportError as err:
        top = module.split(".")[0]
        if importlib.util.find_spec(top) is not None:
            raise ImportError(
                f"{what} needs {top}, which is installed but does not import here: {err} (see "
                f"`pip install lodtensor[{extra}]`)"
            ) from err
        raise ImportError(
            f"{what} needs {top}, which is not installed; install it with `pip install lodtensor[{extra}]`"
        ) from err


def loaded(module):
    """The module if it is already imported (never imports it), else None."""
    return sys.modules.get(module)


# errors that are about reaching the file, not about what is in it: passed through as they are
_ACCESS_ERRORS = (FileNotFoundError, PermissionError, IsADirectoryError, NotADirectoryError)


def bad_file(where, path, err, what):
    """The ValueError for a file whose contents cannot be read (``err`` re-raised if it is an access error)."""
    if isinstance(err, _ACCESS_ERRORS):
        return err
    return ValueError(f"{where}: {path!s} is not a valid {what} file: {err}")
