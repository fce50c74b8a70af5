"""Exception types raised by lodtensor.

Every error subclasses the builtin that fits, so ``except ValueError`` keeps
working for callers that do not know about lodtensor.
"""

__all__ = ["LoDError", "BackendMismatchError", "ShapeError", "DTypeError", "ArgumentError", "UnsupportedOpError"]


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
    result written into integers, a complex one into floats): a nested tensor's ``add_``..., a LoDTensor's
    ``+=``... or ufunc ``out=`` (by its data's library's casting rule), raised before anything is written.

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


class ArgumentError(ValueError, RuntimeError):
    """An argument's value is one the operation refuses (an activation's ``min_val > max_val``, CELU's
    ``alpha=0``, softshrink's negative ``lambd``, gelu's unknown ``approximate``, rrelu's ``lower > upper``,
    a probability outside ``[0, 1]``, ...).

    torch raises ``RuntimeError`` for most of these calls (its C++ argument checks) and ``ValueError`` for
    the few its Python layer checks (``F.hardtanh``, ``F.dropout``), so code written for torch catches it
    unchanged, and so does code that catches ``ValueError``.

    Attributes
    ----------
    argument : str or None
        The name of the refused argument.
    value : object
        The value it was given.

    >>> import numpy as np
    >>> import lodtensor.nested as ln
    >>> nt = ln.nested_tensor([np.array([1.0, -2.0]), np.array([3.0])])
    >>> try:
    ...     ln.celu(nt, alpha=0.0)
    ... except RuntimeError as err:  # also caught by ``except ValueError`` and ``except ArgumentError``
    ...     print(type(err).__name__, err.argument, err.value, "|", err)
    ArgumentError alpha 0.0 | celu(): alpha cannot be 0 for CELU, got alpha=0.0
    """

    def __init__(self, message, *, argument=None, value=None):
        super().__init__(message)
        self.argument = argument
        self.value = value


class UnsupportedOpError(TypeError, NotImplementedError):
    """A torch callable that lodtensor's NestedTensor has no implementation for (``torch.cumsum(nt, 1)``,
    ``F.conv1d(nt, w)``...).

    torch raises ``NotImplementedError`` (a ``RuntimeError``) for an op its nested layouts lack, so code
    written for torch that falls back on ``except NotImplementedError`` works unchanged; it stays a
    ``TypeError`` too, as it was.

    >>> import numpy as np
    >>> import torch
    >>> import lodtensor.nested as ln
    >>> try:
    ...     torch.cumsum(ln.nested_tensor([np.array([1.0, 2.0]), np.array([3.0])]), 1)
    ... except NotImplementedError as err:  # also caught by ``except TypeError`` and ``except RuntimeError``
    ...     print(type(err).__name__, str(err).split(" is not")[0], isinstance(err, TypeError))
    UnsupportedOpError torch.cumsum True
    """
