"""Batching nested lists of tokens or ids into LoDTensors (see :mod:`lodtensor.text`)."""


import collections
import collections.abc
import numbers
import operator

import numpy as np

from .._data import to_place
from .._nested_list import flatten_lists
from ..backend import backend_name_of, get_backend
from ..factories import from_padded_all
from ..lod import LoD
from ..place import as_place
from ..tensor import LoDTensor, _wrap
from ._ids import batch_ids, first_non_id, id_array, id_dtype, ids_as, is_id

__all__ = ["Vocab", "batch", "Collate", "make_collate", "to_dense", "from_dense", "pad_batch"]


class Vocab:
    """A token <-> id mapping with optional special tokens.

    Parameters
    ----------
    tokens : iterable of str
        The tokens, in id order (after ``specials``); a repeated token keeps its first id.
    specials : sequence of str
        Tokens that come first (default ``("<pad>", "<unk>")``: pad is id 0); distinct.
    unk : str or None
        The token unknown tokens map to; None makes unknown tokens an error.

    Raises
    ------
    TypeError
        ``tokens`` or ``specials`` is a single str, or holds something that is not a str.
    ValueError
        A special given twice, a token that is not valid Unicode (a lone surrogate), or
        ``unk`` not among the tokens.

    >>> v = Vocab(["hello", "world"])
    >>> v["hello"], v["nope"], len(v)
    (2, 1, 4)
    >>> Vocab(["a"], specials=(), unk=None).lookup(["a", "b"])
    Traceback (most recent call last):
    ...
    KeyError: "token 'b' (position 1) is not in the vocabulary and it has no unknown token"
    """

    def __init__(self, tokens, specials=("<pad>", "<unk>"), unk="<unk>"):
        specials = _strings(specials, "specials")
        if len(set(specials)) != len(specials):
            dup = next(t for i, t in enumerate(specials) if t in specials[:i])
            raise ValueError(f"Vocab(): specials must be distinct (each has its own id), got {dup!r} twice")
        self.itos = list(specials)
        seen = set(self.itos)
        for token in _strings(tokens, "tokens"):  # repeated tokens keep their first id
            if token not in seen:
                seen.add(token)
                self.itos.append(token)
        self.stoi = {token: i for i, token in enumerate(self.itos)}
        if unk is not None and unk not in self.stoi:
            raise ValueError(f"Vocab(): unk={unk!r} must be one of the tokens or specials")
        self.unk = unk
        self.unk_id = None if unk is None else self.stoi[unk]

    @classmethod
    def build(cls, nested, min_freq=1, specials=("<pad>", "<unk>"), unk="<unk>", max_size=None):
        """A vocabulary of the strings in ``nested`` (any depth), most frequent first.

        ``min_freq``: the fewest occurrences a token needs. ``max_size``: the most
        tokens besides ``specials`` (as legacy torchtext's ``Vocab(max_size=)``), an
        int >= 0; a special that occurs in ``nested`` takes none of them. A leaf that
        is not a str raises TypeError naming it.

        >>> v = Vocab.build([["the", "cat"], ["the", "dog", "the"]])
        >>> v.itos  # specials first, then by frequency (ties alphabetical)
        ['<pad>', '<unk>', 'the', 'cat', 'dog']
        >>> Vocab.build([["the", "cat"], ["the", "dog", "the"]], min_freq=2).itos
        ['<pad>', '<unk>', 'the']
        """
        if isinstance(min_freq, bool) or not isinstance(min_freq, numbers.Real):
            raise TypeError(f"Vocab.build(): min_freq must be a number, got {type(min_freq).__name__} {min_freq!r}")
        if max_size is not None:
            if isinstance(max_size, bool) or not isinstance(max_size, numbers.Integral) or max_size < 0:
                raise ValueError(f"Vocab.build(): max_size must be None or an int >= 0, got {max_size!r}")
        leaves, _ = flatten_lists(nested, name="nested")
        counts = collections.Counter(leaves)
        if not all(issubclass(t, str) for t in set(map(type, counts))):
            pos, leaf = next((i, v) for i, v in enumerate(leaves) if not isinstance(v, str))
            raise TypeError(f"Vocab.build(): tokens must be str, got {type(leaf).__name__} {leaf!r} (leaf {pos})")
        specials = _strings(specials, "specials")  # a list: an iterator given is read once
        taken = set(specials)  # specials have their ids already: they take no place among the max_size tokens
        kept = (t for t, c in counts.items() if c >= min_freq and t not in taken)
        ranked = sorted(kept, key=lambda t: (-counts[t], t))
        if max_size is not None:
            ranked = ranked[: int(max_size)]
        return cls(ranked, specials=specials, unk=unk)

    def __len__(self):
        return len(self.itos)

    def __getitem__(self, token):
        idx = self.stoi.get(token)
        if idx is None:
            if not isinstance(token, str):  # an id or None is no token: not <unk>
                raise TypeError(f"Vocab[]: a token is a str, got {type(token).__name__} {token!r}")
            idx = self.unk_id
            if idx is None:
                raise KeyError(f"token {token!r} is not in the vocabulary and it has no unknown token")
        return idx

    def __contains__(self, token):
        return token in self.stoi

    def lookup(self, tokens):
        """Ids of ``tokens`` (a flat list or iterable of str) as an int64 array; unknown ones map to ``unk``.

        A single str (not a list of them) and an item that is not a str raise TypeError.

        >>> Vocab(["the", "cat", "dog"]).lookup(["the", "dog", "bird"]).tolist()  # "bird" -> <unk> (1)
        [2, 4, 1]
        """
        tokens = _token_list(tokens, "Vocab.lookup()")
        get = self.stoi.get
        default = self.unk_id
        ids = list(map(get, tokens, [default] * len(tokens))) if default is not None else list(map(get, tokens))
        if default is None and None in ids:
            pos = ids.index(None)
            raise KeyError(
                f"token {tokens[pos]!r} (position {pos}) is not in the vocabulary and it has no unknown token"
            )
        return np.fromiter(ids, dtype=np.int64, count=len(ids))

    def decode(self, ids):
        """Tokens of a flat sequence of ids (a list, a 1-D array or tensor, a LoDTensor's ids).

        Raises
        ------
        TypeError
            An id that is not an integer (a float, a bool, a string), or ids that are not flat.
        ValueError
            An id that is negative or not below ``len(vocab)``; the message names it and the size.

        >>> v = Vocab(["hello", "world"])
        >>> v.decode([2, 3, 0])
        ['hello', 'world', '<pad>']
        >>> v.decode([2, -1])
        Traceback (most recent call last):
        ...
        ValueError: Vocab.decode(): id -1 (position 1) is out of range for a vocabulary of 4 tokens (ids 0 to 3)
        """
        ids = id_array(ids, "Vocab.decode()", "ids")
        size = len(self.itos)
        bad = (ids < 0) | (ids >= size)
        if bad.any():
            pos = int(np.flatnonzero(bad)[0])
            raise ValueError(
                f"Vocab.decode(): id {ids[pos]} (position {pos}) is out of range for a vocabulary of {size} tokens "
                f"(ids 0 to {size - 1})"
            )
        return list(map(self.itos.__getitem__, ids.tolist()))

    def __repr__(self):
        return f"Vocab(size={len(self.itos)}, unk={self.unk!r})"


def batch(nested, vocab=None, lod_level=None, dtype="int64", place=None):
    """A LoDTensor of token ids from nested lists of ids or, with ``vocab``, of strings.

    Every list level becomes a lod level (documents -> sentences -> words:
    two levels, one row per word). One pass per level; strings are looked up
    with one C-level ``map``.

    Parameters
    ----------
    nested : list
        Token ids (ints) or tokens (str, with ``vocab``) at the leaves.
    vocab : Vocab or dict, optional
        Needed for string leaves. A plain dict has no unknown token; its ids must be integers.
    lod_level : int, optional
        Default: every list level.
    dtype : integer NumPy dtype or name, default int64
        Every id must fit it (no silent wraparound).
    place : Place or device string, optional

    Raises
    ------
    TypeError
        Leaves that are not integer ids without ``vocab`` (floats, bools, strings), a dict vocab
        mapping to non-integers, or a ``dtype`` that is not an integer dtype.
    ValueError
        An id that does not fit ``dtype``; lists of inconsistent depth.
    KeyError
        A token missing from a vocabulary without unknown token.

    >>> batch([[[3, 4], [5]], [[6]]]).lod()
    [[0, 2, 3], [0, 2, 3, 4]]
    >>> batch([["x", "y"]], vocab={"x": 0})
    Traceback (most recent call last):
    ...
    KeyError: "token 'y' (position 1) is not in the vocabulary and it has no unknown token"
    >>> batch([[3, 4.5]])
    Traceback (most recent call last):
    ...
    TypeError: batch(): token ids must be integers, got float 4.5 (leaf 1); pass vocab= to look tokens up
    """
    dtype = id_dtype(dtype, "batch()")
    if vocab is None:
        return batch_ids(nested, lod_level, dtype, place)
    if isinstance(vocab, dict):
        vocab = _DictVocab(vocab)
    elif not isinstance(vocab, Vocab):
        raise TypeError(f"batch(): vocab must be a text.Vocab or a dict of token -> id, got {type(vocab).__name__}")
    leaves, lengths = flatten_lists(nested, lod_level, name="nested")
    ids = ids_as(vocab.lookup(leaves), dtype, "batch()")
    lod = LoD._from_valid_lengths(lengths) if lengths else LoD._from_valid(())
    data, where = to_place(ids, as_place(place), copy=False)
    return _wrap(data, lod, where)


class _DictVocab(Vocab):
    """A plain ``{token: id}`` dict used as a vocabulary (no unknown token)."""

    def __init__(self, mapping):  # noqa: PLW0231 - only the lookup state is needed
        self.stoi = dict(mapping)
        self.unk = None
        self.unk_id = None
        self.itos = None

    def lookup(self, tokens):
        """Ids of ``tokens``; the dict's values must be integers (a float or bool id is refused, not truncated)."""
        try:
            ids = list(map(self.stoi.get, tokens))
        except TypeError:  # an unhashable leaf (a list below lod_level...)
            pos, leaf = next((i, v) for i, v in enumerate(tokens) if not isinstance(v, collections.abc.Hashable))
            raise TypeError(f"batch(): token {leaf!r} (leaf {pos}) is a {type(leaf).__name__}, not a token") from None
        if None in ids:
            pos = ids.index(None)
            raise KeyError(
                f"token {tokens[pos]!r} (position {pos}) is not in the vocabulary and it has no unknown token"
            )
        if not set(map(type, ids)) <= {int}:
            pos, value = first_non_id(ids)
            if pos is not None:
                raise TypeError(
                    f"vocab maps token {tokens[pos]!r} to {type(value).__name__} {value!r}; ids must be integers"
                )
        try:
            return np.fromiter(ids, dtype=np.int64, count=len(ids))
        except OverflowError:
            pos = next(i for i, v in enumerate(ids) if not -(2**63) <= int(v) < 2**63)
            raise ValueError(f"vocab maps token {tokens[pos]!r} to {ids[pos]}, which does not fit int64") from None


def _strings(items, what):
    """``items`` (tokens or specials) as a list, every one a str; a lone str is refused (not split into characters)."""
    if isinstance(items, (str, bytes)):
        raise TypeError(f"Vocab(): {what} must be an iterable of str, got the single {type(items).__name__} {items!r}")
    items = list(items)
    if not all(issubclass(t, str) for t in set(map(type, items))):
        pos, item = next((i, v) for i, v in enumerate(items) if not isinstance(v, str))
        raise TypeError(f"Vocab(): {what} must be str, got {type(item).__name__} {item!r} at position {pos}")
    try:  # tokens are text: a lone surrogate is no text (Arrow, tokenizers and torchtext refuse it)
        "".join(items).encode("utf-8")
    except UnicodeEncodeError:
        pos, item = next((i, v) for i, v in enumerate(items) if not _utf8(v))
        raise ValueError(f"Vocab(): {what} must be valid Unicode, got {item!r} at position {pos} "
                         f"(a lone surrogate)") from None
    return items


def _utf8(token):
    try:
        token.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _token_list(tokens, where):
    """``tokens`` as a flat list of str (one C-speed type pass); a TypeError naming the first that is not one."""
    if isinstance(tokens, (str, bytes)):
        raise TypeError(
            f"{where}: tokens must be a flat list of str, got the single {type(tokens).__name__} {tokens!r}"
        )
    if not hasattr(tokens, "__len__"):
        tokens = list(tokens)
    if not all(issubclass(t, str) for t in set(map(type, tokens))):
        pos, leaf = next((i, v) for i, v in enumerate(tokens) if not isinstance(v, str))
        hint = "pass ids without vocab=" if is_id(leaf) else "tokens must be str"
        raise TypeError(f"{where}: got {type(leaf).__name__} {leaf!r} (leaf {pos}) where a token (str) "
                        f"belongs; {hint}")
    return tokens


class Collate:
    """A picklable ``collate_fn`` returning LoDTensors (what :func:`make_collate` returns).

    A class, not a closure, so DataLoaders whose workers start by ``spawn`` or
    ``forkserver`` can pickle it; the backend is kept by name.

    >>> import pickle
    >>> collate = Collate(vocab=Vocab(["the", "cat", "dog"]), backend="torch")
    >>> x = pickle.loads(pickle.dumps(collate))([["the", "cat"], ["dog"]])  # as a spawned worker would
    >>> x.lod(), x.data.tolist(), type(x.data).__module__
    ([[0, 2, 3]], [2, 3, 4], 'torch')
    """

    def __init__(self, vocab=None, backend="numpy", dtype="int64", lod_level=None):
        get_backend(backend)  # fail now, not in a worker, if the backend is missing
        self.vocab, self.backend, self.dtype, self.lod_level = vocab, backend, dtype, lod_level

    def __call__(self, samples):
        if not samples:
            raise ValueError("collate(): got an empty batch")
        be = get_backend(self.backend)
        if isinstance(samples[0], tuple):
            width = len(samples[0])
            bad = next((i for i, s in enumerate(samples) if not isinstance(s, tuple) or len(s) != width), None)
            if bad is not None:  # zip would drop the extra items of the longer samples
                got = samples[bad]
                got = f"a tuple of {len(got)}" if isinstance(got, tuple) else type(got).__name__
                raise ValueError(f"collate(): sample 0 is a tuple of {width} items but sample {bad} is {got}; "
                                 f"every sample must have the same items")
            columns = list(zip(*samples))
            tensor = self._tensor(list(columns[0]), be)
            return (tensor,) + tuple(_stack(column, be, k) for k, column in enumerate(columns[1:], 1))
        return self._tensor(samples, be)

    def _tensor(self, items, be):
        t = batch(items, vocab=self.vocab, lod_level=self.lod_level, dtype=self.dtype)
        return t if t.backend is be else t.with_data(be.asarray(t.data))  # batches are built on the host

    def __repr__(self):
        return f"Collate(backend={self.backend!r}, dtype={self.dtype!r}, lod_level={self.lod_level!r})"


def _stack(column, be, k):
    """Item ``k`` of every sample stacked into one array of ``be``. Torch tensors are stacked by torch (their
    dtype and autograd kept, as ``default_collate`` does); items that make no array (ragged lists; str, None
    for torch) are refused naming them."""
    if all(backend_name_of(c) == be.name for c in column):  # arrays of the backend: joined by it
        try:
            return be.concat_axis([c[None] for c in column], 0)
        except (RuntimeError, ValueError) as err:
            raise ValueError(f"collate(): item {k} of the samples ({be.name} arrays) cannot be stacked: {err}") \
                from None
    try:  # (a backend that holds no str, such as torch, refuses them here)
        return be.asarray(np.asarray(column))
    except (TypeError, ValueError, RuntimeError) as err:
        raise TypeError(
            f"collate(): item {k} of the samples ({type(column[0]).__name__} {column[0]!r}, ...) cannot be stacked "
            f"into one {be.name} array of numbers ({err}); give numeric labels of one shape, or a collate_fn of "
            f"your own"
        ) from None


def make_collate(vocab=None, backend="numpy", dtype="int64", lod_level=None):
    """A ``collate_fn`` for ``torch.utils.data.DataLoader`` returning LoDTensors.

    Each sample is a nested list (one top-level sequence of the batch), or a
    tuple whose first item is one and whose other items (labels, ...) are
    stacked into arrays of the same backend. The result pickles (DataLoader
    workers started by ``spawn``).

    >>> collate = make_collate()
    >>> x, y = collate([([[1, 2], [3]], 0), ([[4]], 1)])
    >>> x.lod(), y.tolist()
    ([[0, 2, 3], [0, 2, 3, 4]], [0, 1])
    >>> import pickle
    >>> pickle.loads(pickle.dumps(collate))([[[5]]]).tolist()
    [[[5]]]
    """
    return Collate(vocab=vocab, backend=backend, dtype=dtype, lod_level=lod_level)


def to_dense(t, pad_value=0):
    """Every level padded: ``(dense, masks)``, ``masks[k]`` True where level ``k`` has an item.

    Same as :meth:`LoDTensor.to_padded_all`.

    >>> t = batch([[[1, 2], [3]], [[4, 5, 6]]])  # 2 documents -> sentences -> words
    >>> dense, masks = to_dense(t, pad_value=-1)
    >>> dense.tolist()
    [[[1, 2, -1], [3, -1, -1]], [[4, 5, 6], [-1, -1, -1]]]
    >>> [m.shape for m in masks], masks[0].tolist()  # one mask per level
    ([(2, 2), (2, 2, 3)], [[True, True], [True, False]])
    """
    return _lod_tensor(t, "to_dense()").to_padded_all(pad_value=pad_value)


def _lod_tensor(t, where):
    if not isinstance(t, LoDTensor):
        raise TypeError(f"{where}: t must be a LoDTensor, got {type(t).__name__}")
    return t


def from_dense(dense, masks):
    """Inverse of :func:`to_dense`. Same as :func:`lodtensor.from_padded_all`.

    >>> t = batch([[[1, 2], [3]], [[4, 5, 6]]])
    >>> back = from_dense(*to_dense(t))
    >>> back.lod() == t.lod(), back.data.tolist()
    (True, [1, 2, 3, 4, 5, 6])
    """
    return from_padded_all(dense, masks)


def pad_batch(t, level=-1, pad_value=0, multiple_of=None):
    """Pad the sequences of ``level`` to the longest length rounded up to ``multiple_of``.

    Returns ``(padded, mask)``; ``mask`` is True on real rows (an attention mask).

    >>> t = batch([[1, 2, 3], [4]])
    >>> padded, mask = pad_batch(t, multiple_of=4)
    >>> padded.tolist(), mask.tolist()
    ([[1, 2, 3, 0], [4, 0, 0, 0]], [[True, True, True, False], [True, False, False, False]])
    """
    lengths = np.diff(_lod_tensor(t, "pad_batch()").lod.absolute_offsets(level))
    longest = int(lengths.max()) if lengths.size else 0
    maxlen = longest
    if multiple_of is not None:
        multiple_of = operator.index(multiple_of)
        if multiple_of < 1:
            raise ValueError(f"pad_batch(): multiple_of must be >= 1, got {multiple_of}")
        maxlen = -(-longest // multiple_of) * multiple_of
    padded, lens = t.to_padded(level=level, pad_value=pad_value, maxlen=maxlen)
    be = t.backend
    mask = be.arange(maxlen, like=padded) < be.asarray(np.asarray(lengths))[:, None]
    return padded, mask
