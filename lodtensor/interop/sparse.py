"""Sparse: the hybrid layout of torch.sparse, sparse over (sequence, position), dense over the rest.

Sequence ``i`` of the last lod level is row ``i`` of the matrix and its rows
fill columns ``0..len-1``; trailing dims of the data are the dense dims of
each entry. The CSR row pointers are the last level's offsets (shared with
SciPy, which keeps them read-only; copied for torch, which would not), the
values are ``data`` (shared). Dense shape: ``(sequences, longest, *row_shape)``.

>>> import lodtensor as lt
>>> t = lt.LoDTensor(np.array([1.0, 2.0, 3.0]), [[0, 2, 2, 3]])
>>> m = t.to_sparse_csr(format="scipy")
>>> m.toarray().tolist()
[[1.0, 2.0], [0.0, 0.0], [3.0, 0.0]]
>>> np.shares_memory(m.indptr, t.lod.levels[0]), lt.from_sparse(m).tolist()
(True, [[1.0, 2.0], [], [3.0]])
"""


import numpy as np

from .._compile import eager_under_compile
from ..backend import backend_name_of
from ..errors import LoDError
from ..lod import LoD
from ..tensor import LoDTensor
from ._lazy import loaded, lod_tensor_arg, require

__all__ = ["to_sparse_csr", "to_sparse_coo", "from_sparse"]

_FORMATS = ("torch", "scipy")


def _parts(t, what):
    """(data, offsets of the last level in rows, lengths, positions, sequence ids, dense shape)."""
    lod_tensor_arg(t, what)
    t._require_lod(what)
    data = t._check_fits(what)
    lod = t.lod
    offsets = lod.levels[-1]
    n = offsets.size - 1
    # (sequence, position) of every row: one pass, then kept with the (immutable) LoD, so later
    # conversions of tensors sharing it cost O(levels)
    seq, positions, longest = lod._plan(("interop.sparse_coords",), lambda: _coords(lod))
    shape = (n, longest, *(int(s) for s in data.shape[1:]))
    return data, offsets, positions, seq, shape


def _coords(lod):
    offsets = lod.levels[-1]
    seq = lod.segment_ids(-1)
    positions = np.arange(offsets[-1], dtype=np.int64) - offsets[:-1][seq]
    positions.setflags(write=False)
    lengths = lod.lengths(-1)
    return seq, positions, int(lengths.max()) if lengths.size else 0


def _check_format(format, what):
    if format not in _FORMATS:
        raise ValueError(f"{what}: format must be 'torch' or 'scipy', got {format!r}")


def _scipy_data(t, data, what):
    if data.ndim != 1:
        raise ValueError(
            f"{what}: format='scipy' holds scalars only, so the data must be 1-D, got shape {tuple(data.shape)}; "
            f"use format='torch' for a hybrid matrix with dense trailing dims"
        )
    name = backend_name_of(data)
    if name == "torch" and data.device.type == "cpu":
        # shared; bfloat16 widened as numpy() does, conjugate/negative views resolved (copies)
        data = t.backend.to_numpy(data.detach().resolve_conj().resolve_neg())
    elif name != "numpy":
        raise ValueError(f"{what}: scipy matrices live on the host; the data is on {t.device}, call .cpu() first")
    if data.dtype.kind == "f" and data.dtype.itemsize == 2:  # scipy.sparse would build a matrix it cannot use
        raise ValueError(
            f"{what}: scipy.sparse has no {data.dtype} type; cast the data (e.g. to float32) or use format='torch'"
        )
    if not data.dtype.isnative:  # scipy.sparse takes native byte order only (its tocoo() refused the matrix): a copy
        data = data.astype(data.dtype.newbyteorder("="))
    return data


def _torch_values(t, data):
    return data if backend_name_of(data) == "torch" else t.to_torch().data


@eager_under_compile  # reads the host offsets: under torch.compile, behind a graph break
def to_sparse_csr(t, format="torch"):
    """The last level as a hybrid CSR matrix: ``crow_indices`` are its offsets and the values ``data``, shared.

    ``col_indices`` (each row's position in its sequence) are computed (one
    pass). ``format="torch"`` gives ``torch.sparse_csr_tensor`` of shape
    ``(sequences, longest, *row_shape)``; ``format="scipy"`` a
    ``scipy.sparse.csr_array`` (1-D data only). Outer lod levels are not kept.

    Raises
    ------
    ValueError
        Unknown ``format``; ``"scipy"`` with N-d or GPU data; no lod.

    Examples
    --------
    >>> import lodtensor as lt
    >>> t = lt.LoDTensor(np.arange(1.0, 7.0).reshape(3, 2), [[0, 2, 2, 3]])  # rows of 2: a hybrid matrix
    >>> m = t.to_sparse_csr()
    >>> tuple(m.shape), m.crow_indices().tolist(), m.col_indices().tolist()
    ((3, 2, 2), [0, 2, 2, 3], [0, 1, 0])
    >>> m.to_dense()[:, :, 0].tolist()
    [[1.0, 3.0], [0.0, 0.0], [5.0, 0.0]]
    """
    _check_format(format, "to_sparse_csr()")
    data, offsets, positions, _, shape = _parts(t, "to_sparse_csr()")
    if format == "scipy":
        sp = require("scipy.sparse", "sparse", "to_sparse_csr(format='scipy')")
        values = _scipy_data(t, data, "to_sparse_csr()")
        return sp.csr_array((values, positions, offsets), shape=shape, copy=False)
    torch = require("torch", "torch", "to_sparse_csr()")
    values = _torch_values(t, data)
    dev = values.device
    from ..backend.torch._cpu import sparse_csr  # noqa: PLC0415 - imports torch, which is loaded by now

    # torch's own copies: a tensor over the LoD's frozen memory (or its cached positions) would be
    # writable, since torch ignores read-only memory (and warns about it)
    crow, cols = (torch.from_numpy(np.array(a)).to(dev) for a in (offsets, positions))
    return sparse_csr(crow, cols, values, shape)  # torch's one-time "beta" notice swallowed, thread-safely


@eager_under_compile  # reads the host offsets: under torch.compile, behind a graph break
def to_sparse_coo(t, format="torch"):
    """The last level as a hybrid COO matrix (coalesced): indices ``(sequence, position)``, values ``data`` (shared).

    ``format="torch"`` gives ``torch.sparse_coo_tensor`` of shape
    ``(sequences, longest, *row_shape)``; ``format="scipy"`` a
    ``scipy.sparse.coo_array`` (1-D data only).

    >>> import lodtensor as lt
    >>> t = lt.LoDTensor(np.array([1.0, 2.0, 3.0]), [[0, 2, 2, 3]])
    >>> c = t.to_sparse_coo()
    >>> c.indices().tolist(), c.is_coalesced()
    ([[0, 0, 2], [0, 1, 0]], True)
    >>> t.to_sparse_coo(format="scipy").toarray().tolist()
    [[1.0, 2.0], [0.0, 0.0], [3.0, 0.0]]
    """
    _check_format(format, "to_sparse_coo()")
    data, _, positions, seq, shape = _parts(t, "to_sparse_coo()")
    if format == "scipy":
        sp = require("scipy.sparse", "sparse", "to_sparse_coo(format='scipy')")
        values = _scipy_data(t, data, "to_sparse_coo()")
        return sp.coo_array((values, (seq, positions)), shape=shape)
    torch = require("torch", "torch", "to_sparse_coo()")
    values = _torch_values(t, data)
    indices = torch.from_numpy(np.stack([seq, positions])).to(values.device)
    return torch.sparse_coo_tensor(indices, values, size=shape, is_coalesced=True, check_invariants=False)


def _lod_from_rows(offsets, cols, shape, where):
    """Check that each row's columns are exactly 0..n-1 in order, inside ``shape``; return the checked LoD."""
    rows, width = int(shape[0]), int(shape[1])  # no rows: a level of no sequence, offsets [0]
    if offsets.shape != (rows + 1,):
        raise ValueError(
            f"{where}: the row pointers have shape {tuple(offsets.shape)}, expected ({rows + 1},) for "
            f"{rows} rows (a batched sparse tensor is not a LoD)"
        )
    try:
        lod = LoD([offsets])  # the gate
    except LoDError as err:
        raise LoDError(f"{where}: the row pointers are not offsets: {err}", level=err.level, index=err.index) from None
    if cols.shape != (int(offsets[-1]),):
        raise ValueError(
            f"{where}: {cols.size} column indices for {int(offsets[-1])} stored entries (the last row pointer); "
            f"the matrix is malformed"
        )
    lengths = lod.lengths(0)
    if lengths.size and int(lengths.max()) > width:
        row = int(np.argmax(lengths))
        raise ValueError(
            f"{where}: row {row} stores {int(lengths[row])} entries, more than the {width} columns of shape "
            f"{tuple(shape)}; the matrix is malformed"
        )
    seq = np.repeat(np.arange(lengths.size, dtype=np.int64), lengths)
    expected = np.arange(int(offsets[-1]), dtype=np.int64) - lod.levels[0][:-1][seq]
    bad = cols != expected
    if bad.any():
        j = int(np.flatnonzero(bad)[0])
        row = int(seq[j])
        a, b = int(lod.levels[0][row]), int(lod.levels[0][row + 1])
        got = cols[a:b][:8].tolist()
        raise ValueError(
            f"{where}: row {row} holds columns {got}{'...' if b - a > 8 else ''}, but a sequence fills "
            f"columns 0..{b - a - 1} in order (no gaps); this matrix is not a LoD"
        )
    return lod


def _from_scipy(m, sp):
    where = "from_sparse()"
    if m.ndim != 2:
        raise ValueError(f"{where}: expected a 2-D scipy sparse matrix, got {m.ndim}-D")
    if m.format != "csr":
        m = m.tocsr()  # COO -> CSR sums duplicates (a copy)
    if not m.has_canonical_format:
        m = m.copy()  # never sort or sum the caller's matrix in place
        m.sum_duplicates()
    nnz = int(m.indptr[-1]) if m.indptr.size else 0
    lod = _lod_from_rows(m.indptr, np.asarray(m.indices[:nnz], dtype=np.int64), m.shape, where)
    return LoDTensor(np.asarray(m.data[:nnz]), lod)


def _from_torch_sparse(s, torch):
    where = "from_sparse()"
    if s.sparse_dim() != 2:
        raise ValueError(f"{where}: expected 2 sparse dims (sequence, position), got {s.sparse_dim()}")
    if s.layout == torch.sparse_coo:
        s = s.coalesce()  # sorts and sums duplicates, as torch does (a copy unless coalesced)
        indices = s.indices().detach().cpu().numpy()
        rows, cols = indices[0], indices[1]
        if rows.size and not (0 <= int(rows.min()) and int(rows.max()) < int(s.shape[0])):
            bad = int(rows[(rows < 0) | (rows >= int(s.shape[0]))][0])
            raise ValueError(
                f"{where}: row index {bad} is outside the {int(s.shape[0])} rows of shape {tuple(s.shape)}"
            )
        counts = np.bincount(rows, minlength=int(s.shape[0]))
        offsets = np.zeros(counts.size + 1, dtype=np.int64)
        np.cumsum(counts, out=offsets[1:])
        values = s.values()
    elif s.layout == torch.sparse_csr:
        offsets = s.crow_indices().detach().cpu().numpy()
        cols = s.col_indices().detach().cpu().numpy()
        values = s.values()
    else:
        raise ValueError(f"{where}: expected a sparse_coo or sparse_csr tensor, got layout {s.layout}")
    offsets, cols = offsets.astype(np.int64, copy=False), cols.astype(np.int64, copy=False)
    lod = _lod_from_rows(offsets, cols, s.shape, where)
    return LoDTensor(values, lod)


@eager_under_compile  # builds the LoD on the host: under torch.compile, behind a graph break
def from_sparse(sp):
    """A one-level LoDTensor from a sparse matrix over (sequence, position); inverse of ``to_sparse_*``.

    Accepts scipy sparse matrices and arrays (any format; converted to CSR)
    and torch ``sparse_coo`` / ``sparse_csr`` tensors, hybrid ones included
    (dense trailing dims become the row shape). An uncoalesced COO (unsorted,
    duplicates) is coalesced first, duplicates summed, as torch does. Values
    are shared with a CSR input; offsets are checked by the LoD gate.

    Raises
    ------
    ValueError
        A row whose columns are not exactly 0..n-1 (a gap, a column out of
        order), or a layout that is not COO/CSR over two sparse dims.
    TypeError
        ``sp`` is not a scipy or torch sparse object.

    Examples
    --------
    >>> import torch
    >>> index, values = torch.tensor([[1, 0, 0], [0, 1, 0]]), torch.tensor([5.0, 2.0, 1.0])
    >>> coo = torch.sparse_coo_tensor(index, values, (2, 2), check_invariants=True)
    >>> from_sparse(coo).tolist()  # unsorted: coalesced first
    [[1.0, 2.0], [5.0]]
    >>> import scipy.sparse
    >>> from_sparse(scipy.sparse.csr_array(np.array([[0.0, 2.0]])))
    Traceback (most recent call last):
    ...
    ValueError: from_sparse(): row 0 holds columns [1], but a sequence fills columns 0..0 in order (no gaps); ...
    """
    sps = loaded("scipy.sparse")
    if sps is not None and sps.issparse(sp):
        return _from_scipy(sp, sps)
    torch = loaded("torch")
    if torch is not None and isinstance(sp, torch.Tensor) and sp.layout != torch.strided:
        return _from_torch_sparse(sp, torch)
    raise TypeError(f"from_sparse(): expected a scipy sparse matrix or a torch sparse tensor, got {type(sp).__name__}")
