"""The backend contract: every operation that code outside ``lodtensor/backend`` may call.

Op code (``ops/``, ``sequence/``, ``nested/``, ``nn/``, ``text/``...) is written
once against :class:`Backend`; each array library implements all of it in its
own package (``numpy/``, ``torch/``, ``cupy/``). A method declared here is
abstract unless it is *derived*: written once here from other declared
methods, for every library (listed in :data:`DERIVED`; a backend may still
override one with a faster kernel). Adding a backend (JAX, say) means
subclassing :class:`Backend`, implementing every abstract method, and adding
its package to ``_registry``; ``tests/backend/test_contract.py`` says when it
is complete (the declared signatures, each backend's own implementation, and
the ops run on it).

Conventions every implementation keeps:

- *arrays* are arrays of the backend's library; *host* arrays are NumPy. A
  host array reaches the data only through :meth:`Backend.from_host`, which
  puts it on the data's device with the wanted dtype; op code never hands a
  NumPy array to torch or CuPy math.
- *offsets* given to kernels are int64, valid (checked on the host by the
  LoD gate before any kernel runs) and already on the data's device (the LoD
  caches them per device: ``LoD.on``).
- a *dtype* argument may be the library's own dtype, a NumPy dtype or a name (``"float32"``).
- kernels never read device memory back to the host unless their contract says so (no hidden syncs).
"""

import abc

from ._registry import get_backend

__all__ = ["Backend", "KERNELS", "DERIVED", "ATTRIBUTES", "ACTIVATIONS", "groups"]


class Backend(abc.ABC):
    """One array library's implementation of the contract.

    Attributes
    ----------
    name : str
        ``"numpy"``, ``"cupy"`` or ``"torch"``: the key of ``get_backend``.
    xp : module
        The library's array namespace; used inside the backend only.
    follows_torch_promotion : bool
        Binary ops promote dtypes as torch does by themselves; else op code computes the result dtype
        and passes it to :meth:`binary`.
    records_autograd : bool
        Arrays of this library can record autograd history (``requires_grad``).

    Examples
    --------
    One call of each group of the contract, on the NumPy backend (op code takes ``be = x.backend``):

    >>> import numpy as np
    >>> from lodtensor import get_backend
    >>> be = get_backend("numpy")
    >>> isinstance(be, Backend), be.name
    (True, 'numpy')
    >>> data, offsets = np.arange(1.0, 6.0).reshape(5, 1), np.array([0, 2, 2, 5])

    Arrays, devices and dtypes (a host array meets the data through ``from_host``):

    >>> lengths = be.from_host(np.diff(offsets), like=data, dtype=data.dtype)
    >>> be.device_of(lengths), be.dtype_kind(lengths.dtype), lengths.tolist()
    ('cpu', 'f', [2.0, 0.0, 3.0])

    Allocation and random numbers:

    >>> be.zeros((2, 3), "float32", like=data).shape, be.arange(4).tolist()
    ((2, 3), [0, 1, 2, 3])

    Moving rows (``total``, a size already known, spares a device read):

    >>> be.segment_ids(offsets, total=5).tolist()
    [0, 0, 2, 2, 2]
    >>> be.repeat_interleave(np.array([7, 8, 9]), np.diff(offsets), total=5).tolist()
    [7, 7, 9, 9, 9]

    Segment kernels (an empty sequence gives 0, or ``empty``):

    >>> be.segment_sum(data, offsets).ravel().tolist(), be.segment_max(data, offsets, empty=-1.0).ravel().tolist()
    ([3.0, 0.0, 12.0], [2.0, -1.0, 5.0])

    Elementwise:

    >>> be.activation("sigmoid", np.zeros(2)).tolist(), be.binary("add", np.array([1, 2]), 0.5, dtype="f8").tolist()
    ([0.5, 0.5], [1.5, 2.5])

    Matrix and nn math:

    >>> be.linear(np.ones((1, 3)), np.ones((2, 3)), np.zeros(2)).tolist(), be.softmax(np.zeros((1, 4)), -1).tolist()
    ([[3.0, 3.0]], [[0.25, 0.25, 0.25, 0.25]])

    Recurrences and sequence losses (CTC of uniform scores over 2 steps for the label ``[1]``: ``-log(3/4)``):

    >>> be.ctc_loss(np.zeros((2, 2)), np.array([0, 2]), np.array([1]), np.array([0, 1]), 0).round(4).tolist()
    [0.2877]
    """

    name = "abstract"
    xp = None
    follows_torch_promotion = False
    records_autograd = False

    def __repr__(self):
        return f"<lodtensor backend {self.name!r}>"

    def __reduce__(self):
        return (get_backend, (self.name,))

    # -- arrays, devices and dtypes ----------------------------------------------------------------
    @abc.abstractmethod
    def asarray(self, obj, dtype=None, *, copy=False):
        """``obj`` (array-like of this library, list, scalar) as an array; copies only when asked or needed."""

    @abc.abstractmethod
    def to_numpy(self, x):
        """``x`` as a host NumPy array (a copy only when needed; reads device memory back)."""

    @abc.abstractmethod
    def from_host(self, a, *, like, dtype=None):
        """Host array ``a`` as an array of this library on ``like``'s device, with ``dtype`` (None: ``a``'s).

        The one door by which host-derived arrays (lengths, scales, masks, indices) meet data.
        """

    @abc.abstractmethod
    def device_of(self, x):
        """``x``'s device as a string: ``"cpu"``, ``"cuda:0"``."""

    @abc.abstractmethod
    def to_device(self, x, device, *, copy=False):
        """``x`` on ``device`` (a string as :meth:`device_of` gives)."""

    @abc.abstractmethod
    def is_c_contiguous(self, x):
        """Whether ``x`` is C-contiguous."""

    @abc.abstractmethod
    def contiguous(self, x):
        """``x`` C-contiguous (``x`` itself when it is)."""

    @abc.abstractmethod
    def clone(self, x):
        """A copy of ``x`` (recorded by autograd)."""

    @abc.abstractmethod
    def detach(self, x):
        """``x`` without autograd history (``x`` itself where there is none)."""

    @abc.abstractmethod
    def requires_grad(self, x):
        """Whether autograd tracks ``x``."""

    @abc.abstractmethod
    def version(self, x):
        """A count of the in-place writes into ``x``'s memory that views of it share (torch's ``_version``), or
        None where the library keeps none (NumPy, CuPy; torch over memory they write too: :meth:`uncount`)."""

    @abc.abstractmethod
    def uncount(self, x, other=None):
        """Where ``x`` shares memory with ``other`` (counting no writes): :meth:`version` None over that memory from
        now on, True; without ``other``: whether it was so marked. False where nothing counts (NumPy, CuPy)."""

    @abc.abstractmethod
    def astype(self, x, dtype):
        """``x`` converted to ``dtype`` (``x`` itself when it has it)."""

    @abc.abstractmethod
    def dtype_kind(self, dtype):
        """NumPy's kind letter of ``dtype``: ``"b"`` bool, ``"i"`` signed, ``"u"`` unsigned, ``"f"`` float,
        ``"c"`` complex (``"O"``, ``"V"``... for other NumPy dtypes)."""

    @abc.abstractmethod
    def as_dtype(self, dtype):
        """This library's dtype object for ``dtype`` given in any spelling (NumPy dtype, name, torch dtype);
        TypeError where the library has no such dtype (bfloat16 in NumPy)."""

    @abc.abstractmethod
    def flat(self, x):
        """``x`` as one dimension (a view where possible)."""

    @abc.abstractmethod
    def expand(self, x, shape):
        """``x`` broadcast to ``shape`` (a view)."""

    # -- allocation and random numbers -------------------------------------------------------------
    @abc.abstractmethod
    def empty(self, shape, dtype, like):
        """An uninitialised array on ``like``'s device."""

    @abc.abstractmethod
    def zeros(self, shape, dtype, like):
        """Zeros on ``like``'s device."""

    @abc.abstractmethod
    def full(self, shape, value, dtype, like):
        """``value`` everywhere, on ``like``'s device."""

    @abc.abstractmethod
    def arange(self, n, *, like=None):
        """int64 ``0 .. n-1`` on ``like``'s device (the default device without ``like``)."""

    @abc.abstractmethod
    def rand(self, shape, dtype, like):
        """Uniform ``[0, 1)`` values from the library's global random state, on ``like``'s device."""

    @abc.abstractmethod
    def randn(self, shape, dtype, like):
        """Standard normal values from the library's global random state, on ``like``'s device."""

    @abc.abstractmethod
    def keep_mask(self, shape, p, like):
        """A bool mask, True with probability ``1 - p``, on ``like``'s device."""

    # -- moving rows ---------------------------------------------------------------------------------
    @abc.abstractmethod
    def gather(self, data, index):
        """Rows ``data[index]`` (``index`` int64 on ``data``'s device)."""

    @abc.abstractmethod
    def scatter(self, out, index, values):
        """``out[index] = values`` in place; returns ``out``."""

    @abc.abstractmethod
    def scatter_add(self, out, index, values):
        """A new array: ``out`` with ``values`` added at rows ``index`` (repeated rows accumulate)."""

    @abc.abstractmethod
    def divide_rows(self, x, divisor):
        """``x`` with row ``i`` divided by ``divisor[i]`` (on ``x``'s device), in place where autograd allows:
        pass only a result the op itself made (0 / 0 gives NaN quietly)."""

    @abc.abstractmethod
    def fill_rows(self, x, mask, value):
        """A new array: ``x`` with the rows where bool ``mask`` (on ``x``'s device) is True set to the host
        scalar ``value``."""

    @abc.abstractmethod
    def take(self, x, index, axis):
        """``x`` at the int ``index`` along ``axis`` (one entry removed from the shape), contiguous."""

    @abc.abstractmethod
    def where(self, mask, a, b):
        """``a`` where ``mask`` else ``b``, with the library's type promotion (``a`` or ``b`` may be a Python
        scalar, which promotes as a weak scalar: ``where(m, 1.5, ints)`` is float)."""

    @abc.abstractmethod
    def concat(self, arrays):
        """The rows of every array, in order."""

    @abc.abstractmethod
    def concat_axis(self, arrays, axis):
        """``arrays`` joined along ``axis``."""

    @abc.abstractmethod
    def concat_flat(self, arrays, dtype=None):
        """1-d ``arrays`` joined (empty: a 0-length array of ``dtype`` or float32), cast to ``dtype``."""

    @abc.abstractmethod
    def split_rows(self, x, offsets):
        """Views ``x[offsets[i]:offsets[i + 1]]`` for a Python list ``offsets``."""

    @abc.abstractmethod
    def swapaxes(self, x, a, b):
        """``x`` with axes ``a`` and ``b`` swapped, contiguous."""

    @abc.abstractmethod
    def swapaxes_view(self, x, a, b):
        """``x`` with axes ``a`` and ``b`` swapped, a view."""

    @abc.abstractmethod
    def repeat_interleave(self, values, repeats, *, total=None):
        """Row ``i`` of ``values`` repeated ``repeats[i]`` times; ``total`` (their sum) avoids a device read."""

    @abc.abstractmethod
    def segment_ids(self, offsets, *, total=None):
        """The sequence index of every row (int64); ``total`` (the row count) avoids a device read."""

    @abc.abstractmethod
    def cumsum(self, x, *, exclusive=False):
        """Running sum along axis 0 (``exclusive``: starting at 0, without the last)."""

    # -- segment kernels -----------------------------------------------------------------------------
    @abc.abstractmethod
    def wants_segment_ids(self, like):
        """Whether the segment kernels for data ``like`` take a precomputed ``ids`` (the LoD's host
        copy, cached per device); else op code passes None and the kernels compute what they need from
        the offsets, when they need it (a fresh LoD then costs no host pass over its rows)."""

    @abc.abstractmethod
    def wants_host_plan(self, like):
        """Whether op code makes the row plans of data ``like`` on the host: :meth:`pad`'s ``plan``
        (``pad_plan``) and the row indices it gathers by (``ops/_rows.py``); else :meth:`pad` gets None
        and the indices are made on ``like``'s device from per-sequence arrays (no host pass over the
        rows of a fresh LoD)."""

    @abc.abstractmethod
    def segment_sum(self, data, offsets, *, ids=None):
        """Sum of the rows of each sequence; an empty sequence gives 0. Float16/bfloat16 accumulate in
        float32; integer sums keep the data's dtype (wrapping around), bool sums are bool (any)."""

    @abc.abstractmethod
    def segment_mean(self, data, offsets, *, empty=0, ids=None):
        """Mean of the rows of each sequence (float; integers as float64); an empty sequence gives ``empty``."""

    @abc.abstractmethod
    def segment_max(self, data, offsets, *, empty, ids=None):
        """Max of the rows of each sequence (NaN propagates); an empty sequence gives ``empty``."""

    @abc.abstractmethod
    def segment_min(self, data, offsets, *, empty, ids=None):
        """Min of the rows of each sequence (NaN propagates); an empty sequence gives ``empty``."""

    @abc.abstractmethod
    def segment_softmax(self, data, offsets, *, ids=None):
        """Softmax over the rows of each sequence, per column (float; integers as float)."""

    @abc.abstractmethod
    def segment_extreme_with_index(self, rows, offsets, kind):
        """``(values, indices)`` of the first ``kind`` (``"max"``/``"min"``) of each sequence (host
        ``offsets``, no empty sequence), or None where padding and one argmax is faster."""

    @abc.abstractmethod
    def place_rows(self, data, index, shape, pad_value, *, out=None):
        """Dense ``shape + row_shape`` filled with ``pad_value``, row ``i`` written at flat ``index[i]``."""

    @abc.abstractmethod
    def pad(self, data, offsets, maxlen, pad_value, *, out=None, plan=None):
        """Flat rows into ``(sequences, maxlen, *row)``, ``pad_value`` past each sequence's end (a longer
        sequence keeps its first ``maxlen`` rows)."""

    @abc.abstractmethod
    def unpad(self, padded, offsets, *, plan=None, total=None):
        """``(sequences, L, *row)`` back to flat rows: the inverse of :meth:`pad` (``L`` at least the longest
        sequence: backends with host offsets refuse a shorter one); ``total`` (the row count) avoids a
        device read."""

    # -- elementwise ------------------------------------------------------------------------------------
    @abc.abstractmethod
    def apply_ufunc(self, ufunc, method, *args, **kwargs):
        """A NumPy ufunc call (``__array_ufunc__``'s arguments) run with this library; an ``out=`` (an in-place
        operator's tensor) that cannot hold the result's dtype under the library's casting rule raises
        :class:`~lodtensor.errors.DTypeError` before anything is written."""

    @abc.abstractmethod
    def pointwise(self, np_name, torch_name, *args, **kwargs):
        """The pointwise function named ``np_name`` in NumPy's spelling and ``torch_name`` in torch's."""

    @abc.abstractmethod
    def binary(self, name, a, b, *, dtype):
        """The ufunc ``name`` (``"add"``, ``"less"``...) of arrays or scalars, with result ``dtype``."""

    @abc.abstractmethod
    def relu(self, x):
        """``max(x, 0)``, keeping the dtype."""

    @abc.abstractmethod
    def gelu(self, x, approximate):
        """GELU as torch computes it (``approximate`` ``"none"`` or ``"tanh"``)."""

    @abc.abstractmethod
    def silu(self, x):
        """``x * sigmoid(x)``."""

    @abc.abstractmethod
    def sgn(self, x):
        """The sign (complex: ``x / |x|``, 0 at 0)."""

    @abc.abstractmethod
    def activation(self, name, x):
        """Paddle's activation ``name`` (:data:`ACTIVATIONS`) of ``x``, out of place (differentiable)."""

    @abc.abstractmethod
    def activation_(self, name, x):
        """Paddle's activation ``name`` applied to ``x`` in place (returns ``x``); None when ``name`` has no
        in-place form here."""

    @abc.abstractmethod
    def dropout(self, x, p, inplace):
        """Zero each value with probability ``p``, scale the rest by ``1 / (1 - p)``."""

    # -- matrix and nn math ------------------------------------------------------------------------------
    @abc.abstractmethod
    def matmul(self, a, b):
        """``a @ b`` with broadcasting."""

    @abc.abstractmethod
    def addmm(self, c, a, b, *, out=None):
        """``c + a @ b`` (2-d); with ``out``, written into it (no autograd; ``out`` may be ``c``)."""

    @abc.abstractmethod
    def linear(self, x, weight, bias):
        """``x @ weight.T + bias`` (``bias`` may be None)."""

    @abc.abstractmethod
    def softmax(self, x, axis, out=None):
        """Softmax along ``axis`` (into ``out`` when given)."""

    @abc.abstractmethod
    def log_softmax(self, x, axis, out=None):
        """Log-softmax along ``axis`` (into ``out`` when given)."""

    @abc.abstractmethod
    def logsumexp(self, x, axis):
        """``log(sum(exp(x)))`` along ``axis``, stable (an all ``-inf`` slice gives ``-inf``)."""

    @abc.abstractmethod
    def normalize_sum(self, x, axis, out=None):
        """``x / x.sum(axis)`` (into ``out`` when given)."""

    @abc.abstractmethod
    def layer_norm(self, x, eps, weight, bias):
        """Each row of 2-d ``x`` normalised (``weight``/``bias`` flat or None)."""

    @abc.abstractmethod
    def rms_norm(self, x, eps, weight):
        """Each row of 2-d ``x`` over its root mean square (``weight`` flat or None)."""

    @abc.abstractmethod
    def attention(self, q, k, v, mask, is_causal, scale, dropout_p):
        """Scaled dot-product attention of dense blocks ``(..., L, E)`` (torch's semantics)."""

    @abc.abstractmethod
    def embedding(self, index, weight, padding_idx, max_norm, norm_type, scale_grad_by_freq, sparse):
        """Rows ``weight[index]`` (torch's ``F.embedding`` arguments)."""

    @abc.abstractmethod
    def renorm_rows(self, rows, max_norm, p):
        """Rows scaled down to ``p``-norm ``max_norm`` where longer."""

    @abc.abstractmethod
    def reduce(self, x, kind, axis, keepdim):
        """``kind`` (sum, mean, amax, amin, prod, any, all, argmax, argmin) over ``axis`` (None: all)."""

    @abc.abstractmethod
    def extreme_with_index(self, x, kind, axis, keepdim):
        """``(values, indices)`` of the first ``kind`` (``"max"``/``"min"``) along ``axis``."""

    # -- recurrences and sequence losses ---------------------------------------------------------------
    @abc.abstractmethod
    def lstm(self, x, weight, bias, h_0, c_0, rows, inverse, counts, activations, peepholes):
        """Paddle's LSTM over the rows of ``x`` ``[N, 4D]`` (``weight`` ``[D, 4D]``, ``bias`` ``[1, 4D]``, or
        ``[1, 7D]`` ending in the peephole weights with ``peepholes``; gate order candidate, input, forget,
        output; ``activations`` the (gate, cell, candidate) names of :data:`ACTIVATIONS`, softmax per gate),
        taken in step order: ``rows`` (int64 on ``x``'s device) lists them step-major, step ``t`` the
        ``counts[t]`` (host ints, non-increasing) rows that continue the first ``counts[t]`` of step
        ``t - 1``; ``inverse`` is its inverse; ``h_0``/``c_0`` are ``[counts[0], D]`` in step order or None.
        Returns ``(hidden, cell)``, ``[N, D]`` in ``x``'s row order. Where the library records gradients,
        one node for the whole recurrence (a second differentiation raises)."""

    @abc.abstractmethod
    def gru(self, x, w_gate, w_cand, bias, h_0, rows, inverse, counts, activations, origin_mode):
        """Paddle's GRU over the rows of ``x`` ``[N, 3D]`` (update, reset, candidate; ``w_gate`` ``[D, 2D]``,
        ``w_cand`` ``[D, D]``, ``bias`` ``[1, 3D]`` or None, ``activations`` the (gate, candidate) names)
        in the step order of :meth:`lstm`; the hidden states ``[N, D]`` in ``x``'s row order."""

    @abc.abstractmethod
    def ctc_loss(self, logits, input_offsets, labels, label_offsets, blank, blank_labels=None):
        """CTC loss of each sequence of unnormalised scores ``logits`` ``[T, C]`` (host ``input_offsets``;
        softmax inside) against the 1-D int64 ids ``labels`` (host ``label_offsets``), checked in ``[0, C)``
        by the caller: a host (NumPy) array, or an array of this backend on ``logits``' device, used there
        (neither read back nor indexed on the host row by row). ``[num_sequences]`` in ``logits``' dtype,
        ``inf`` where no alignment exists.

        A label id may equal ``blank`` (Paddle's warpctc): no path skips into it from the label before (it
        passes through the blank first). ``blank_labels`` says whether some id does, where the caller knows
        (None: the backend finds out, which may read the device)."""


#: The activations :meth:`Backend.activation` knows (Paddle's names).
ACTIVATIONS = ("sigmoid", "tanh", "relu", "identity", "linear", "softmax", "leaky_relu", "elu", "softsign")

#: Declared methods with one implementation here, for every backend (none yet: every method is the
#: library's own).
DERIVED = ()

#: Attributes every backend sets (see :class:`Backend`).
ATTRIBUTES = ("name", "xp", "follows_torch_promotion", "records_autograd")


def groups():
    """The declared methods by group, in the order of this file (the ``# -- group --`` comments)."""
    import inspect  # noqa: PLC0415
    import re  # noqa: PLC0415

    source = inspect.getsource(Backend)
    out, group = {}, None
    for line in source.splitlines():
        head = re.match(r"\s*# -- (.+?) -+$", line)
        if head:
            group = head.group(1)
            continue
        name = re.match(r"\s*def (\w+)\(", line)
        if name and group and (name.group(1) in Backend.__abstractmethods__ or name.group(1) in DERIVED):
            out.setdefault(group, []).append(name.group(1))
    return out


#: Every declared method, in the order of this file.
KERNELS = tuple(name for name in vars(Backend) if name in Backend.__abstractmethods__ or name in DERIVED)
