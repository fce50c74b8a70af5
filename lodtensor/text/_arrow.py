"""Text columns in Arrow (Parquet, ``datasets``) to hierarchical LoD batches, vectorised in Arrow compute.

- :func:`split_sentences`: documents -> sentences by a documented rule, in
  Arrow's C++ string kernels (no Python loop per character or sentence).
- :func:`lookup`: a column of word lists (``list<list<string>>``: documents ->
  sentences -> words) to ids through a :class:`~lodtensor.text.Vocab`, one
  ``index_in`` call for every token.
- :func:`text_column`: any text column (a list of str, an Arrow array or
  ChunkedArray, a Table / RecordBatch / ``datasets.Dataset`` column) as one
  Arrow string array.
"""

import numpy as np

from ..interop._lazy import require
from ..interop.arrow import list_levels, unwrap
from ..lod import LoD
from ..tensor import LoDTensor
from ._batch import _utf8

__all__ = ["split_sentences", "lookup", "text_column", "SENTENCE_END"]

# The sentence rule: a sentence ends after ".", "!" or "?" followed by white space, or at a
# line break; each sentence is stripped of surrounding white space and empty ones are dropped.
# White space and line breaks are Unicode's, as Python's str.isspace / str.splitlines (and Python
# re's \s) see them, the white space the strip removes: RE2's \s alone is only ASCII [\t\n\f\r ].
# The no-break spaces (U+00A0, U+2007, U+202F) end no sentence: they are what keeps "Dr.\u00a0Who"
# and "p.\u00a05" together.
SENTENCE_END = (
    r"([.!?])[\s\v\x{1c}-\x{1f}\x{85}\x{1680}\x{2000}-\x{2006}\x{2008}-\x{200a}\x{2028}\x{2029}\x{205f}\x{3000}]+"
)
_LINE_BREAK = r"[\n\r\v\f\x{1c}-\x{1e}\x{85}\x{2028}\x{2029}]"


def _pa(what):
    pa = require("pyarrow", "arrow", what)
    require("pyarrow.compute", "arrow", what)
    return pa


def _check_strings(pa, arr, where, what):
    """Refuse strings whose offsets leave their data buffer or whose bytes are not UTF-8 (O(bytes), in C++).

    ``validate()`` (what Arrow runs on its own arrays) checks buffer sizes only; the string kernels
    (``index_in``, the regex splits) trust the offsets, and read past the buffer (a crash, or other
    memory in the text) when an array built from raw buffers breaks them.
    """
    try:
        arr.validate(full=True)
    except pa.ArrowException as err:
        raise ValueError(f"{where}: {what} are not valid Arrow strings: {err}") from None


def text_column(docs, column=None, where="text_column()"):
    """``docs`` as one Arrow string array (``large_string`` kept); nulls raise ValueError.

    ``docs`` is a list of str, a pyarrow Array or ChunkedArray, or a Table,
    RecordBatch or ``datasets.Dataset`` with ``column=``.

    >>> import pyarrow as pa
    >>> text_column(["Hello there.", "Hi!"]).type
    DataType(large_string)
    >>> text_column(pa.table({"text": ["a b", "c"], "label": [0, 1]}), column="text").to_pylist()
    ['a b', 'c']
    >>> text_column(pa.array(["a", None]))
    Traceback (most recent call last):
    ...
    ValueError: text_column(): the text column holds 1 null(s), first at index 1
    """
    pa = _pa(where)
    if isinstance(docs, (list, tuple)):
        bad = next((i for i, d in enumerate(docs) if not isinstance(d, str)), None)
        if bad is not None:
            raise TypeError(f"{where}: documents must be str, got {type(docs[bad]).__name__} at position {bad}")
        try:
            arr = pa.array(docs, type=pa.large_string())
        except UnicodeEncodeError:  # a lone surrogate: no UTF-8 text, so no Arrow string either
            at, doc = next((i, d) for i, d in enumerate(docs) if not _utf8(d))
            char = next(i for i, c in enumerate(doc) if not _utf8(c))
            raise ValueError(
                f"{where}: document {at} is not valid Unicode: a lone surrogate {doc[char]!r} at character {char}"
            ) from None
    else:
        arr = unwrap(docs, column, where)
    if not (pa.types.is_string(arr.type) or pa.types.is_large_string(arr.type)):
        raise TypeError(f"{where}: expected a column of strings, got Arrow type {arr.type}")
    if not isinstance(docs, (list, tuple)):  # built by pyarrow from str: valid already
        _check_strings(pa, arr, where, "the documents")
    if arr.null_count:
        at = int(np.flatnonzero(arr.is_null().to_numpy(zero_copy_only=False))[0])
        raise ValueError(f"{where}: the text column holds {arr.null_count} null(s), first at index {at}")
    return arr


def split_sentences(docs, column=None):
    """Split documents into sentences; return ``(sentences, doc_offsets)``.

    The rule (:data:`SENTENCE_END`): a sentence ends after ``.``, ``!`` or
    ``?`` followed by white space, or at a line break; sentences are stripped
    and empty ones dropped, so an empty document has no sentence. White
    space and line breaks are Unicode's, as Python's ``str.isspace`` and
    ``str.splitlines`` see them (an ideographic space U+3000 is white space;
    ``\\r`` and U+2028 are line breaks), except that a no-break space (U+00A0,
    U+2007, U+202F) ends no sentence. Abbreviations ("Dr. Who") split
    too: for other rules, split before and pass sentences with ``split_sentences=False``. Runs in Arrow's string
    kernels: no Python loop over characters or sentences.

    Returns
    -------
    sentences : pyarrow string array, one sentence per entry
    doc_offsets : int64 NumPy array, ``len(docs) + 1`` entries: document ``i``
        holds ``sentences[doc_offsets[i]:doc_offsets[i + 1]]``

    >>> s, offsets = split_sentences(["One. Two? Three", "", "Four!"])
    >>> s.to_pylist(), offsets.tolist()
    (['One.', 'Two?', 'Three', 'Four!'], [0, 3, 3, 4])
    """
    pa = _pa("split_sentences()")
    import pyarrow.compute as pc  # noqa: PLC0415 - loaded by _pa

    arr = text_column(docs, column, "split_sentences()")
    # one regex pass: a sentence end becomes "<mark>\n", any other line break "\n"
    marked = pc.replace_substring_regex(arr, f"{SENTENCE_END}|{_LINE_BREAK}", "\\1\n")
    parts = pc.split_pattern(marked, "\n")
    flat = pc.utf8_trim_whitespace(pc.list_flatten(parts))
    keep = pc.greater(pc.utf8_length(flat), 0)
    parent = pc.list_parent_indices(parts).to_numpy(zero_copy_only=False)
    kept = keep.to_numpy(zero_copy_only=False)
    counts = np.bincount(parent[kept], minlength=len(arr))
    offsets = np.zeros(len(arr) + 1, dtype=np.int64)
    np.cumsum(counts, out=offsets[1:])
    sentences = pc.filter(flat, keep)
    if isinstance(sentences, pa.ChunkedArray):
        sentences = sentences.combine_chunks()
    return sentences, offsets


def lookup(words, vocab, column=None):
    """Ids of a column of word lists through ``vocab``: one vectorised lookup for every token.

    ``words`` is an Arrow ``list<string>`` (sentences -> words) or
    ``list<list<string>>`` (documents -> sentences -> words) column (Array,
    ChunkedArray, or a Table / RecordBatch / ``datasets.Dataset`` with
    ``column=``); the list levels become the lod levels, checked by the LoD
    gate. Unknown words map to ``vocab.unk``.

    Raises
    ------
    KeyError
        An unknown word and a vocabulary without an unknown token.
    ValueError, TypeError
        Nulls; a column that is not lists of strings.

    >>> import pyarrow as pa
    >>> from lodtensor.text import Vocab
    >>> v = Vocab(["the", "cat", "sat"])
    >>> t = lookup(pa.array([[["the", "cat"], ["sat"]], [["the", "dog"]]]), v)
    >>> t.lod(), t.data.tolist()
    ([[0, 2, 3], [0, 2, 3, 5]], [2, 3, 4, 2, 1])
    """
    pa = _pa("lookup()")
    import pyarrow.compute as pc  # noqa: PLC0415 - loaded by _pa

    where = "lookup()"
    if not isinstance(getattr(vocab, "itos", None), list):
        raise TypeError(f"{where}: vocab must be a text.Vocab, got {type(vocab).__name__}")
    levels, leaf = list_levels(unwrap(words, column, where), where)
    if not levels:
        raise TypeError(f"{where}: expected a column of word lists (list<string> or deeper), got {leaf.type}")
    if not (pa.types.is_string(leaf.type) or pa.types.is_large_string(leaf.type)):
        raise TypeError(f"{where}: the innermost values must be strings (words), got Arrow type {leaf.type}")
    _check_strings(pa, leaf, where, "the words")
    if leaf.null_count:
        raise ValueError(f"{where}: the words hold {leaf.null_count} null(s)")
    index = pc.index_in(leaf, value_set=pa.array(vocab.itos, type=leaf.type))
    if index.null_count:
        if vocab.unk_id is None:
            at = int(np.flatnonzero(index.is_null().to_numpy(zero_copy_only=False))[0])
            raise KeyError(
                f"{where}: token {leaf[at].as_py()!r} (position {at}) is not in the vocabulary and it has no "
                f"unknown token"
            )
        index = pc.fill_null(index, vocab.unk_id)
    ids = index.to_numpy(zero_copy_only=False).astype(np.int64, copy=False)
    return LoDTensor(ids, LoD(levels, num_rows=int(ids.shape[0])))
