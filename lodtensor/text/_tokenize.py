"""Real tokenizers (the ``tokenizers`` package) to hierarchical LoD batches.

- :func:`train_tokenizer`: a WordPiece or BPE tokenizer trained on the corpus
  itself (nothing to download), or load one with
  ``tokenizers.Tokenizer.from_file(path)``.
- :func:`encode`: documents -> sentences -> token ids as one 2-level
  LoDTensor (or documents -> tokens), from a list of str, an Arrow / Parquet
  column or a ``datasets.Dataset`` column. Sentences are split by the rule of
  :func:`~lodtensor.text.split_sentences` in Arrow's string kernels; the
  tokenizer encodes every sentence in one Rust batch call; the ids are joined
  at C speed (no Python loop per token).
"""

import itertools
import numbers

import numpy as np

from ..interop._lazy import require
from ..lod import LoD
from ..tensor import LoDTensor
from ._arrow import split_sentences as _split_sentences
from ._arrow import text_column

__all__ = ["train_tokenizer", "encode", "SPECIALS"]

# pad first, so id 0 is padding (as in Vocab and nn.Embedding(padding_idx=0))
SPECIALS = ("[PAD]", "[UNK]")
_MODELS = ("wordpiece", "bpe")
_SETTINGS = (
    ("padding", "store pad ids as tokens of every sentence; call tokenizer.no_padding() first "
                "(pad later with text.pad_batch)"),
    ("truncation", "drop the tokens of long sentences; call tokenizer.no_truncation() first"),
)


def _batches(arr, size=1000):
    for start in range(0, len(arr), size):
        yield arr.slice(start, size).to_pylist()


def train_tokenizer(texts, *, model="wordpiece", vocab_size=8000, min_frequency=2, lowercase=True, column=None):
    """A ``tokenizers.Tokenizer`` trained on ``texts`` (WordPiece or BPE); id 0 is ``[PAD]``, 1 ``[UNK]``.

    Pipeline: Unicode NFD, optional lowercasing and accent stripping, split on
    white space and punctuation (``Whitespace``), then the subword model.
    ``texts`` is what :func:`encode` takes (list of str, Arrow column,
    ``datasets.Dataset`` with ``column=``); it is streamed to the trainer in
    batches of 1,000 documents.

    Raises
    ------
    ValueError
        ``model`` is not ``"wordpiece"`` or ``"bpe"``, ``vocab_size`` is too small or
        ``min_frequency`` negative.
    ImportError
        ``tokenizers`` is missing (``pip install lodtensor[text]``).

    >>> tok = train_tokenizer(["the cat sat.", "the dog sat!"] * 20, vocab_size=60, min_frequency=1)
    >>> tok.token_to_id("[PAD]"), tok.token_to_id("[UNK]"), tok.decode(tok.encode("the cat").ids)
    (0, 1, 'the cat')
    """
    tk = require("tokenizers", "text", "train_tokenizer()")
    from tokenizers import decoders, models, normalizers, pre_tokenizers, trainers  # noqa: PLC0415 - loaded above

    if model not in _MODELS:
        raise ValueError(f"train_tokenizer(): model must be 'wordpiece' or 'bpe', got {model!r}")
    # NumPy integers are ints here, as the trainers take them; bools are not
    if isinstance(vocab_size, bool) or not isinstance(vocab_size, numbers.Integral) or vocab_size <= len(SPECIALS):
        raise ValueError(f"train_tokenizer(): vocab_size must be an int > {len(SPECIALS)}, got {vocab_size!r}")
    if isinstance(min_frequency, bool) or not isinstance(min_frequency, numbers.Integral) or min_frequency < 0:
        raise ValueError(f"train_tokenizer(): min_frequency must be an int >= 0, got {min_frequency!r}")
    vocab_size, min_frequency = int(vocab_size), int(min_frequency)
    arr = text_column(texts, column, "train_tokenizer()")
    if model == "wordpiece":
        tok = tk.Tokenizer(models.WordPiece(unk_token="[UNK]"))
        trainer = trainers.WordPieceTrainer(
            vocab_size=vocab_size, min_frequency=min_frequency, special_tokens=list(SPECIALS), show_progress=False
        )
        tok.decoder = decoders.WordPiece()
    else:
        tok = tk.Tokenizer(models.BPE(unk_token="[UNK]"))
        trainer = trainers.BpeTrainer(
            vocab_size=vocab_size,
            min_frequency=min_frequency,
            special_tokens=list(SPECIALS),
            end_of_word_suffix="</w>",
            show_progress=False,
        )
        tok.decoder = decoders.BPEDecoder(suffix="</w>")
    steps = [normalizers.NFD()] + ([normalizers.Lowercase(), normalizers.StripAccents()] if lowercase else [])
    tok.normalizer = normalizers.Sequence(steps)
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    tok.train_from_iterator(_batches(arr), trainer=trainer, length=len(arr))
    return tok


def _encode_all(tokenizer, sentences):
    """Token ids of every sentence: (flat int64 ids, int64 lengths); one batch call, C-speed joins."""
    fast = getattr(tokenizer, "encode_batch_fast", None) or tokenizer.encode_batch
    encodings = fast(sentences, add_special_tokens=False)
    ids = [e.ids for e in encodings]  # one attribute read per sentence, not per token
    lengths = np.fromiter(map(len, ids), dtype=np.int64, count=len(ids))
    flat = np.fromiter(itertools.chain.from_iterable(ids), dtype=np.int64, count=int(lengths.sum()))
    return flat, lengths


def encode(docs, tokenizer, *, split_sentences=True, column=None):
    """Documents -> sentences -> token ids as one LoDTensor (int64 ids, 2 lod levels).

    Parameters
    ----------
    docs : list of str, pyarrow Array / ChunkedArray, or Table / RecordBatch / ``datasets.Dataset``
        One document per entry (pass ``column=`` for a table or dataset).
    tokenizer : ``tokenizers.Tokenizer``
        From :func:`train_tokenizer` or ``tokenizers.Tokenizer.from_file``
        (a ``transformers`` fast tokenizer's ``backend_tokenizer`` works too).
        Special tokens are not added. A tokenizer with padding or truncation
        enabled is refused (pads would be stored as tokens, tokens dropped).
    split_sentences : bool
        True: documents -> sentences -> tokens (2 levels, the rule of
        :func:`~lodtensor.text.split_sentences`). False: each entry is one
        sequence of tokens (1 level).
    column : str, optional

    Returns
    -------
    LoDTensor
        NumPy int64 ids; documents with no sentence, and sentences with no
        token, are empty sequences. Where no document has a sentence the token
        level holds no sequence (lod ``[[0, 0, ...], [0]]``, 0 rows).

    >>> tok = train_tokenizer(["the cat sat. the dog ran!"] * 20, vocab_size=60, min_frequency=1)
    >>> t = encode(["The cat sat. The dog ran!", "", "A cat."], tok)
    >>> t.lod()
    [[0, 2, 2, 3], [0, 4, 8, 11]]
    >>> tok.decode(t[0][1].data.tolist())
    'the dog ran!'
    """
    if not callable(getattr(tokenizer, "encode_batch", None)):
        raise TypeError(
            f"encode(): tokenizer must be a tokenizers.Tokenizer (with encode_batch), got {type(tokenizer).__name__}"
        )
    for setting, effect in _SETTINGS:
        if getattr(tokenizer, setting, None) is not None:  # pads would be stored as tokens, or tokens dropped
            raise ValueError(
                f"encode(): tokenizer has {setting} enabled ({getattr(tokenizer, setting)}): it would {effect}"
            )
    if split_sentences:
        sentences, doc_offsets = _split_sentences(docs, column)
    else:
        sentences, doc_offsets = text_column(docs, column, "encode()"), None
    flat, lengths = _encode_all(tokenizer, sentences.to_pylist())
    token_offsets = np.zeros(lengths.size + 1, dtype=np.int64)
    np.cumsum(lengths, out=token_offsets[1:])
    levels = [token_offsets] if doc_offsets is None else [doc_offsets, token_offsets]
    return LoDTensor(flat, LoD(levels, num_rows=int(flat.size)))
