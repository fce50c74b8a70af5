"""Exception types raised by lodtensor.

Every error subclasses the builtin that fits, so ``except ValueError`` keeps
working for callers that do not know about lodtensor.
"""

__all__ = ["LoDError", "BackendMismatchError", "ShapeError", "DTypeError"]


class LoDError(ValueError):
    """A LoD (offsets or lengths) breaks one of its rules.

    Attributes
    ----------
    level : int or None
        The offending lod level (0 is the outermost), when there is one.
    index : int or None
        The offending position inside that level, when there is one.

    >>> import numpy as np
    >>> import lodtensor as lt
    >>> try:
    ...     lt.LoDTensor(np.arange(3), [[0, 2]])
    ... except LoDError as err:  # also caught by ``except ValueError``
    ...     print(err, "| level", err.level, "index", err.index)
    lod level 0 must end at len(data)=3, got offsets[-1]=2 | level 0 index 1
    """

    def __init__(self, message, *, level=None, index=None):
        super().__init__(message)
        self.level = level
        self.index = index


class BackendMismatchError(TypeError):
    """Arrays of different array libraries (or devices) were combined in one call.

    >>> import numpy as np
    >>> import torch
    >>> import lodtensor as lt
    >>> lt.backend_of(np.zeros(2), torch.zeros(2))
    Traceback (most recent call last):
    ...
    lodtensor.errors.BackendMismatchError: cannot combine 'numpy' and 'torch' arrays; convert one first ...
    >>> issubclass(BackendMismatchError, TypeError)
    True
    """


class ShapeError(ValueError, RuntimeError):
    """An operation does not fit the shape or ragged structure of its arguments.

    Raised where torch raises ``RuntimeError`` for the same call on a nested
    tensor (a ragged dim asked for its size, components of different rank,
    an op over dim 0 or a ragged dim, mismatched nested structures), so code
    written for torch that catches ``RuntimeError`` works unchanged, and so
    does code that catches ``ValueError``.

    >>> issubclass(ShapeError, ValueError) and issubclass(ShapeError, RuntimeError)
    True
    """


class DTypeError(TypeError, ValueError, RuntimeError):
    """A dtype cannot hold an op's result: an in-place op whose result is of a higher category (a float
    result written into integers, a complex one into floats).

    NumPy raises a ``TypeError`` (``UFuncTypeError``) for the same call and torch a ``RuntimeError``
    ("result type Float can't be cast to the desired output type Long"), so code written for either
    catches it unchanged, and so does code that catches ``ValueError``.

    >>> import numpy as np
    >>> import lodtensor.nested as ln
    >>> nt = ln.nested_tensor([np.array([1, 2]), np.array([3])])
    >>> try:
    ...     nt.add_(1.5)
    ... except DTypeError as err:  # also caught by ``except TypeError`` and ``except RuntimeError``
    ...     print(err)
    add_(): result type Float can't be cast to the desired output type Long
    >>> nt.to_tensor_list()[0].tolist()  # nothing written
    [1, 2]
    """
