"""Lazy imports of the foreign libraries, each with an ImportError naming its extra."""

import importlib
import sys

__all__ = ["require", "loaded"]


def require(module, extra, what):
    """Import ``module`` now; if missing, an ImportError naming the extra to install."""
    try:
        return importlib.import_module(module)
    except ImportError as err:
        raise ImportError(
            f"{what} needs {module.split('.')[0]}, which is not installed; "
            f"install it with `pip install lodtensor[{extra}]`"
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
