"""Exception types raised by lodtensor.

Every error subclasses the builtin that fits, so ``except ValueError`` keeps
working for callers that do not know about lodtensor.
"""

__all__ = ["LoDError", "BackendMismatchError"]


class LoDError(ValueError):
    """A LoD (offsets or lengths) breaks one of its rules.

    Attributes
    ----------
    level : int or None
        The offending lod level (0 is the outermost), when there is one.
    index : int or None
        The offending position inside that level, when there is one.
    """

    def __init__(self, message, *, level=None, index=None):
        super().__init__(message)
        self.level = level
        self.index = index


class BackendMismatchError(TypeError):
    """Arrays of different array libraries (or devices) were combined in one call."""
