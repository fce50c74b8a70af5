"""``torch.nn.Module`` s for Paddle's sequence layers; Parameters in Paddle's shapes.

A Paddle checkpoint loads unchanged: ``module.weight.data.copy_(torch.from_numpy(state["fc_0.w_0"]))``
or ``load_state_dict({"weight": ..., "bias": ...})``. Weights start Xavier-uniform and biases
at zero, as Paddle's defaults. Every ``forward`` takes LoDTensors (or arrays) and returns
LoDTensors holding torch data: the modules compute with torch, so that gradients reach their
Parameters. A NumPy input is converted (``LoDTensor.to_torch()``, zero-copy on the CPU; floating
data in the module's dtype, on its device); for NumPy-only inference call
:mod:`lodtensor.nn.functional` with NumPy weights instead.

>>> import torch
>>> import lodtensor as lt
>>> lstm = DynamicLSTM(4)
>>> lstm.weight.shape, lstm.bias.shape
(torch.Size([4, 16]), torch.Size([1, 28]))
>>> x = lt.LoDTensor(torch.randn(5, 16), [[0, 2, 5]])
>>> hidden, cell = lstm(x)
>>> hidden.lod(), tuple(hidden.data.shape)
([[0, 2, 5]], (5, 4))
"""

import math

import torch

from ..ops._common import flag_arg, int_arg
from ..tensor import LoDTensor
from . import functional as F
from ._common import act_name, as_torch
from ._state import CheckedLoad

__all__ = ["Embedding", "FC", "SequenceConv", "RowConv", "DynamicLSTM", "DynamicGRU", "LinearChainCRF", "CRFDecoding"]


def _xavier(*shape, fan_in=None, fan_out=None):
    return _xavier_(torch.nn.Parameter(torch.empty(*shape)), fan_in, fan_out)


def _xavier_(p, fan_in=None, fan_out=None):
    """``p`` drawn again in place, Xavier-uniform (Paddle's default for weights); returns ``p``."""
    fan_in = p.shape[0] if fan_in is None else fan_in
    fan_out = p.shape[-1] if fan_out is None else fan_out
    bound = math.sqrt(6.0 / (fan_in + fan_out))
    with torch.no_grad():
        p.uniform_(-bound, bound)
    return p


def _zeros(*shape):
    return torch.nn.Parameter(torch.zeros(*shape))


def _sizes(where, **sizes):
    """Each of ``sizes`` (a layer's dimensions) as an int >= 1, with an error naming the argument: before,
    ``FC(-2, 2)`` raised ZeroDivisionError and ``FC(2.5, 2)`` torch.empty()'s message."""
    return [int_arg(v, where, name, 1) for name, v in sizes.items()]


def _on_torch(module, x, name="input"):
    """``x`` (the argument ``name``) for ``module``'s torch math: NumPy data becomes torch (zero-copy
    on the CPU; floating data in the module's dtype, on its device); torch data passes unchanged."""
    ref = next(iter(module.parameters()), None)
    if ref is None:
        return as_torch(x, f"{type(module).__name__}.forward()", name)
    return as_torch(x, f"{type(module).__name__}.forward()", name, dtype=ref.dtype, device=ref.device)


def _hidden(cls, hidden_size, size, gates, paddle_size):
    """The hidden size from ``hidden_size`` or Paddle's ``size`` (``paddle_size(h)`` is Paddle's for ``h``)."""
    if size is None:
        if hidden_size is None:
            raise TypeError(f"{cls}(): give hidden_size (or Paddle's size=)")
        return int_arg(hidden_size, f"{cls}()", "hidden_size", 1)
    size = int_arg(size, f"{cls}()", "size", 1)
    h = size // gates if gates > 1 else size
    if size < 1 or paddle_size(h) != size:
        raise ValueError(f"{cls}(): Paddle's size must be {gates} * hidden size, got {size}")
    if hidden_size is not None and int(hidden_size) != h:
        raise ValueError(
            f"{cls}(): hidden_size={hidden_size} and size={size} disagree (size={size} means hidden size {h})"
        )
    return h


def _check_width(module, x, gates, cls):
    """A clear error where the input is not ``gates * hidden_size`` wide (Paddle's size rule spelled out)."""
    data = x.data if isinstance(x, LoDTensor) else None
    if data is None or data.ndim != 2:
        return
    width, h = int(data.shape[1]), module.hidden_size
    if width != gates * h:
        hint = ""
        if width % gates == 0:
            hint = (
                f"; an input of width {width} needs hidden size {width // gates}: {cls}({width // gates})"
                + (f" or {cls}(size={width})" if gates == 4 else "")
            )
        raise ValueError(
            f"{cls}(hidden_size={h}).forward(): input must have {gates} * hidden_size = {gates * h} columns "
            f"(the input projected by an FC), got {width}"
            + (". Paddle's dynamic_lstm(size=...) is 4 * hidden size" if gates == 4 else "")
            + hint
        )


def _activations(module, where, **names):
    """The recurrence's activation names, checked at construction (as torch's ``nonlinearity=``) rather than
    at the first forward, kept as attributes of ``module``."""
    for arg, name in names.items():
        act_name(name, where, arg)
        setattr(module, arg, name)


def _check_columns(x, want, where, what, start=1):
    """A clear error, naming the module's size, where the rows of ``x`` (its dims from ``start`` on,
    flattened) do not hold ``want`` values: before, the function's message blamed the module's own
    weight (``fc(): weight must have shape [4, *], got [3, 2]``) for a wrong input."""
    data = x.data if isinstance(x, LoDTensor) else x
    shape = getattr(data, "shape", None)
    if shape is None or not 1 <= start < len(shape):  # rank errors are the function's
        return
    got = math.prod(shape[start:])
    if got != want:
        raise ValueError(f"{where}: input must have {what} = {want} values per row, got {int(got)} "
                         f"(input shape {[int(s) for s in shape]})")


class _Layer(CheckedLoad, torch.nn.Module):
    """What the layers share: ``reset_parameters`` and ``extra_repr`` as torch's layers have them.

    ``_shown`` names the attributes ``repr`` shows: positional ones first, then ``name=value`` for those
    in ``_defaults`` whose value is not the default (a Parameter with a default of True shows whether it exists)."""

    _shown, _defaults, _xavier_fan_in = (), {}, None

    def reset_parameters(self):
        """Draw the parameters again as at construction: ``weight`` (``transition``) Xavier-uniform, the
        bias, peepholes and padding rows zero.

        >>> import torch
        >>> fc = FC(3, 2)
        >>> with torch.no_grad():
        ...     _ = fc.bias.fill_(5.0)
        >>> fc.reset_parameters()
        >>> fc.bias.tolist(), bool(fc.weight.abs().max() <= (6 / (3 + 2)) ** 0.5)  # Xavier's bound
        ([0.0, 0.0], True)
        """
        for name, p in self.named_parameters(recurse=False):
            if name in ("weight", "transition"):
                _xavier_(p, fan_in=None if self._xavier_fan_in is None else p.shape[self._xavier_fan_in])
            else:
                with torch.no_grad():
                    p.zero_()

    def extra_repr(self):
        """The sizes and options in ``repr(module)``, as torch's layers show theirs.

        >>> FC(3, 2, act="relu")
        FC(3, 2, act='relu')
        >>> Embedding(10, 4, padding_idx=0).extra_repr()
        '10, 4, padding_idx=0'
        >>> DynamicLSTM(4, use_peepholes=False, is_reverse=True)
        DynamicLSTM(4, use_peepholes=False, is_reverse=True)
        """
        parts = []
        for name in self._shown:
            value = getattr(self, name)
            if isinstance(self._defaults.get(name), bool) and not isinstance(value, bool):  # bias: a Parameter
                value = value is not None
            if name not in self._defaults:
                parts.append(repr(value))
            elif value != self._defaults[name]:
                parts.append(f"{name}={value!r}")
        return ", ".join(parts)


class Embedding(_Layer):
    """Paddle's ``embedding``: ``weight`` ``[num_embeddings, embedding_dim]``; ``padding_idx`` rows are zeros.

    >>> import numpy as np
    >>> import lodtensor as lt
    >>> emb = Embedding(10, 4, padding_idx=0)
    >>> out = emb(lt.LoDTensor(np.array([[3], [0], [7]]), [[0, 2, 3]]))  # ids [N, 1], one lod level
    >>> out.lod(), tuple(out.data.shape), out.data[1].abs().sum().item()  # padding_idx 0: a zero row
    ([[0, 2, 3]], (3, 4), 0.0)
    """

    def __init__(self, num_embeddings, embedding_dim, padding_idx=None):
        super().__init__()
        where = "Embedding()"
        num_embeddings, embedding_dim = _sizes(where, num_embeddings=num_embeddings, embedding_dim=embedding_dim)
        if padding_idx is not None:
            padding_idx = int_arg(padding_idx, where, "padding_idx")
            if not -num_embeddings <= padding_idx < num_embeddings:
                raise ValueError(f"{where}: padding_idx must be in [{-num_embeddings}, {num_embeddings}) for "
                                 f"num_embeddings={num_embeddings}, got {padding_idx}")
        self.num_embeddings, self.embedding_dim, self.padding_idx = num_embeddings, embedding_dim, padding_idx
        self.weight = _xavier(num_embeddings, embedding_dim)

    _shown, _defaults = ("num_embeddings", "embedding_dim", "padding_idx"), {"padding_idx": None}

    def forward(self, input):  # noqa: A002 - Paddle's name
        return F.embedding(_on_torch(self, input), self.weight, padding_idx=self.padding_idx)


class FC(_Layer):
    """Paddle's ``fc``: ``weight`` ``[in_features, out_features]``, ``bias`` ``[out_features]``.

    >>> import numpy as np
    >>> import torch
    >>> import lodtensor as lt
    >>> fc = FC(3, 2, act="relu")
    >>> with torch.no_grad():
    ...     _ = fc.weight.fill_(1.0), fc.bias.fill_(-4.0)
    >>> y = fc(lt.LoDTensor(np.arange(6.0, dtype="float32").reshape(2, 3), [[0, 2]]))
    >>> y.lod(), y.data.tolist()  # relu(row sum - 4)
    ([[0, 2]], [[0.0, 0.0], [8.0, 8.0]])
    """

    def __init__(self, in_features, out_features, num_flatten_dims=1, act=None, bias=True):
        super().__init__()
        in_features, out_features = _sizes("FC()", in_features=in_features, out_features=out_features)
        num_flatten_dims = int_arg(num_flatten_dims, "FC()", "num_flatten_dims")
        if num_flatten_dims != -1 and num_flatten_dims < 1:
            raise ValueError(f"FC(): num_flatten_dims must be -1 or >= 1, got {num_flatten_dims}")
        self.in_features, self.out_features = in_features, out_features
        self.num_flatten_dims, self.act = num_flatten_dims, act
        self.weight = _xavier(in_features, out_features)
        self.bias = _zeros(out_features) if flag_arg(bias, "FC()", "bias") else None

    _shown = ("in_features", "out_features", "num_flatten_dims", "act", "bias")
    _defaults = {"num_flatten_dims": 1, "act": None, "bias": True}

    def forward(self, input):  # noqa: A002
        input = _on_torch(self, input)
        k, ndim = self.num_flatten_dims, len(getattr(input.data if isinstance(input, LoDTensor) else input,
                                                         "shape", ()))
        what = "in_features" if k in (1, -1) else f"in_features (the dims after the first {k}, flattened)"
        _check_columns(input, self.in_features, f"FC(in_features={self.in_features}).forward()", what,
                       ndim - 1 if k == -1 else k)
        return F.fc(input, self.weight, self.bias, num_flatten_dims=self.num_flatten_dims,
                    act=self.act)


class SequenceConv(_Layer):
    """Paddle's ``sequence_conv``: ``weight`` ``[filter_size * input_dim, num_filters]``, ``bias`` ``[num_filters]``.

    With ``padding_trainable`` the positions outside a sequence read the learnable rows of
    ``padding`` (Paddle's ``PaddingData``, ``[begin_pad + end_pad, input_dim]``, starting at zero:
    see :func:`lodtensor.nn.functional.sequence_conv`).

    >>> import torch
    >>> conv = SequenceConv(2, 4, filter_size=3, padding_trainable=True)
    >>> conv.weight.shape, conv.padding.shape
    (torch.Size([6, 4]), torch.Size([2, 2]))
    >>> import lodtensor as lt
    >>> y = conv(lt.LoDTensor(torch.ones(5, 2), [[0, 2, 5]]))
    >>> y.lod(), tuple(y.data.shape)
    ([[0, 2, 5]], (5, 4))
    """

    def __init__(self, input_dim, num_filters, filter_size=3, padding_start=None, act=None, bias=True,
                 padding_trainable=False):
        super().__init__()
        where = "SequenceConv()"
        input_dim, num_filters = _sizes(where, input_dim=input_dim, num_filters=num_filters)
        filter_size = int_arg(filter_size, where, "filter_size", 1)
        self.input_dim, self.num_filters = input_dim, num_filters
        padding_start = None if padding_start is None else int_arg(padding_start, where, "padding_start")
        self.filter_size, self.padding_start, self.act = filter_size, padding_start, act
        self.weight = _xavier(filter_size * input_dim, num_filters)
        self.bias = _zeros(num_filters) if flag_arg(bias, where, "bias") else None
        start = -(filter_size // 2) if padding_start is None else padding_start
        rows = max(0, -start) + max(0, start + filter_size - 1)
        self.padding_trainable = flag_arg(padding_trainable, where, "padding_trainable")
        self.padding = _zeros(rows, input_dim) if self.padding_trainable else None

    _shown = ("input_dim", "num_filters", "filter_size", "padding_start", "act", "bias", "padding_trainable")
    _defaults = {"filter_size": 3, "padding_start": None, "act": None, "bias": True, "padding_trainable": False}

    def forward(self, input):  # noqa: A002
        input = _on_torch(self, input)
        _check_columns(input, self.input_dim, f"SequenceConv(input_dim={self.input_dim}).forward()", "input_dim")
        return F.sequence_conv(input, self.weight, self.bias, filter_size=self.filter_size,
                               padding_start=self.padding_start, act=self.act,
                               padding_trainable=self.padding_trainable, padding_data=self.padding)


class RowConv(_Layer):
    """Paddle's ``row_conv``: ``weight`` ``[future_context_size + 1, input_dim]``.

    >>> import numpy as np
    >>> import torch
    >>> import lodtensor as lt
    >>> rc = RowConv(2, future_context_size=1)
    >>> with torch.no_grad():
    ...     _ = rc.weight.fill_(1.0)
    >>> rc(lt.LoDTensor(np.arange(1.0, 7.0, dtype="float32").reshape(3, 2), [[0, 2, 3]])).data.tolist()
    [[4.0, 6.0], [3.0, 4.0], [5.0, 6.0]]
    """

    def __init__(self, input_dim, future_context_size, act=None):
        super().__init__()
        self.act = act
        (input_dim,) = _sizes("RowConv()", input_dim=input_dim)
        future_context_size = int_arg(future_context_size, "RowConv()", "future_context_size", 0)
        self.input_dim, self.future_context_size = input_dim, future_context_size
        self.weight = _xavier(future_context_size + 1, input_dim)

    _shown, _defaults = ("input_dim", "future_context_size", "act"), {"act": None}

    def forward(self, input):  # noqa: A002
        input = _on_torch(self, input)
        _check_columns(input, self.input_dim, f"RowConv(input_dim={self.input_dim}).forward()", "input_dim")
        return F.row_conv(input, self.weight, act=self.act)


class DynamicLSTM(_Layer):
    """Paddle's ``dynamic_lstm`` with hidden size ``D``: ``weight`` ``[D, 4D]``, ``bias`` ``[1, 7D]``
    (``[1, 4D]`` without peepholes); the input is already projected to ``4D`` (an :class:`FC`).

    ``DynamicLSTM(size=4 * D)`` takes Paddle's ``size`` (4 times the hidden size) instead.

    >>> DynamicLSTM(size=2048).hidden_size
    512
    >>> import lodtensor as lt
    >>> hidden, cell = DynamicLSTM(4)(lt.LoDTensor(torch.ones(5, 16), [[0, 2, 5]]))  # input [N, 4 * 4]
    >>> hidden.lod(), tuple(hidden.data.shape), tuple(cell.data.shape)
    ([[0, 2, 5]], (5, 4), (5, 4))
    """

    def __init__(self, hidden_size=None, use_peepholes=True, is_reverse=False, gate_activation="sigmoid",
                 cell_activation="tanh", candidate_activation="tanh", *, size=None):
        super().__init__()
        d = _hidden("DynamicLSTM", hidden_size, size, 4, lambda h: 4 * h)
        where = "DynamicLSTM()"
        use_peepholes = flag_arg(use_peepholes, where, "use_peepholes")  # it sets the bias's shape
        self.hidden_size, self.use_peepholes, self.is_reverse = d, use_peepholes, flag_arg(is_reverse, where,
                                                                                           "is_reverse")
        _activations(self, where, gate_activation=gate_activation, cell_activation=cell_activation,
                     candidate_activation=candidate_activation)
        self.weight = _xavier(d, 4 * d)
        self.bias = _zeros(1, (7 if use_peepholes else 4) * d)

    _shown = ("hidden_size", "use_peepholes", "is_reverse", "gate_activation", "cell_activation",
              "candidate_activation")
    _defaults = {"use_peepholes": True, "is_reverse": False, "gate_activation": "sigmoid", "cell_activation": "tanh",
                 "candidate_activation": "tanh"}

    def forward(self, input, h_0=None, c_0=None):  # noqa: A002
        input = _on_torch(self, input)
        _check_width(self, input, 4, "DynamicLSTM")
        return F.dynamic_lstm(input, self.weight, self.bias, h_0=_on_torch(self, h_0, "h_0"),
                              c_0=_on_torch(self, c_0, "c_0"),
                              use_peepholes=self.use_peepholes, is_reverse=self.is_reverse,
                              gate_activation=self.gate_activation, cell_activation=self.cell_activation,
                              candidate_activation=self.candidate_activation)


class DynamicGRU(_Layer):
    """Paddle's ``dynamic_gru`` with hidden size ``D``: ``weight`` ``[D, 3D]`` (Paddle's flat layout),
    ``bias`` ``[1, 3D]``; the input is already projected to ``3D``.

    Paddle's ``dynamic_gru(size=D)`` is the hidden size itself: ``DynamicGRU(size=D)`` is ``DynamicGRU(D)``.

    >>> import numpy as np
    >>> import lodtensor as lt
    >>> gru = DynamicGRU(size=2)
    >>> gru.weight.shape, tuple(gru(lt.LoDTensor(np.ones((3, 6), "float32"), [[0, 1, 3]])).data.shape)
    (torch.Size([2, 6]), (3, 2))
    """

    def __init__(self, hidden_size=None, is_reverse=False, gate_activation="sigmoid", candidate_activation="tanh",
                 origin_mode=False, *, size=None):
        super().__init__()
        d = _hidden("DynamicGRU", hidden_size, size, 1, lambda h: h)
        where = "DynamicGRU()"
        self.hidden_size, self.is_reverse = d, flag_arg(is_reverse, where, "is_reverse")
        self.origin_mode = flag_arg(origin_mode, where, "origin_mode")
        _activations(self, where, gate_activation=gate_activation, candidate_activation=candidate_activation)
        self.weight = _xavier(d, 3 * d)
        self.bias = _zeros(1, 3 * d)

    _shown = ("hidden_size", "is_reverse", "gate_activation", "candidate_activation", "origin_mode")
    _defaults = {"is_reverse": False, "gate_activation": "sigmoid", "candidate_activation": "tanh",
                 "origin_mode": False}

    def forward(self, input, h_0=None):  # noqa: A002
        input = _on_torch(self, input)
        _check_width(self, input, 3, "DynamicGRU")
        return F.dynamic_gru(input, self.weight, self.bias, h_0=_on_torch(self, h_0, "h_0"),
                             is_reverse=self.is_reverse,
                             origin_mode=self.origin_mode, gate_activation=self.gate_activation,
                             candidate_activation=self.candidate_activation)


class LinearChainCRF(_Layer):
    """Paddle's ``linear_chain_crf``: ``transition`` ``[num_tags + 2, num_tags]`` (start, end, then
    tag-to-tag scores). ``forward`` gives each sequence's negative log-likelihood ``[N, 1]``;
    :meth:`decode` the Viterbi path (``crf_decoding``) with the same transition.

    >>> import numpy as np
    >>> import torch
    >>> import lodtensor as lt
    >>> crf = LinearChainCRF(3)
    >>> with torch.no_grad():
    ...     _ = crf.transition.zero_()  # emissions alone decide
    >>> scores = lt.LoDTensor(torch.tensor([[2.0, 0, 0], [0, 0, 3.0], [0, 1.0, 0]]), [[0, 2, 3]])
    >>> tags = lt.LoDTensor(np.array([[0], [2], [1]]), [[0, 2, 3]])
    >>> nll = crf(scores, tags)  # one negative log-likelihood per sequence
    >>> tuple(nll.shape), nll.detach().numpy().round(4).ravel().tolist()
    ((2, 1), [0.3345, 0.5514])
    >>> nll.sum().backward()
    >>> tuple(crf.transition.grad.shape)
    (5, 3)
    """

    def __init__(self, num_tags):
        super().__init__()
        num_tags = int_arg(num_tags, "LinearChainCRF()", "num_tags", 1)
        self.num_tags = num_tags
        self.transition = _xavier(num_tags + 2, num_tags, fan_in=num_tags)

    _shown, _xavier_fan_in = ("num_tags",), 1  # Xavier with fan_in = fan_out = num_tags

    @property
    def weight(self):
        """The transition matrix (Paddle names the parameter ``crfw``)."""
        return self.transition

    def forward(self, input, label):  # noqa: A002
        input = _on_torch(self, input)
        _check_columns(input, self.num_tags, f"LinearChainCRF(num_tags={self.num_tags}).forward()", "num_tags")
        return F.linear_chain_crf(input, _on_torch(self, label, "label"), self.transition)

    def decode(self, input, label=None):  # noqa: A002
        """The Viterbi path of each sequence (Paddle's ``crf_decoding``) under this CRF's transition;
        with ``label``, 1 where the path agrees with it.

        >>> import numpy as np
        >>> import torch
        >>> import lodtensor as lt
        >>> crf = LinearChainCRF(3)
        >>> with torch.no_grad():
        ...     _ = crf.transition.zero_()
        >>> scores = lt.LoDTensor(torch.tensor([[2.0, 0, 0], [0, 0, 3.0], [0, 1.0, 0]]), [[0, 2, 3]])
        >>> path = crf.decode(scores)
        >>> path.lod(), path.data.tolist()
        ([[0, 2, 3]], [[0], [2], [1]])
        """
        input = _on_torch(self, input)
        _check_columns(input, self.num_tags, f"LinearChainCRF(num_tags={self.num_tags}).decode()", "num_tags")
        return F.crf_decoding(input, self.transition.detach(), label=_on_torch(self, label, "label"))


class CRFDecoding(CheckedLoad, torch.nn.Module):
    """Paddle's ``crf_decoding`` sharing the ``transition`` of a :class:`LinearChainCRF` (or a new one).

    >>> import numpy as np
    >>> import torch
    >>> import lodtensor as lt
    >>> crf = LinearChainCRF(3)
    >>> with torch.no_grad():
    ...     _ = crf.transition.zero_()
    >>> decoding = CRFDecoding(crf)  # shares crf.transition
    >>> scores = lt.LoDTensor(torch.tensor([[2.0, 0, 0], [0, 0, 3.0], [0, 1.0, 0]]), [[0, 2, 3]])
    >>> decoding(scores).data.tolist()
    [[0], [2], [1]]
    >>> decoding(scores, label=lt.LoDTensor(np.array([[1], [2], [1]]), [[0, 2, 3]])).data.tolist()  # 1: agrees
    [[0], [1], [1]]
    """

    def __init__(self, crf_or_num_tags):
        super().__init__()
        if isinstance(crf_or_num_tags, LinearChainCRF):
            self.crf = crf_or_num_tags
        else:
            if not isinstance(crf_or_num_tags, int) and not hasattr(crf_or_num_tags, "__index__"):
                raise TypeError(
                    f"CRFDecoding(): crf_or_num_tags must be a LinearChainCRF (to share its transition) or a "
                    f"number of tags, got {type(crf_or_num_tags).__name__} {crf_or_num_tags!r}"
                )
            self.crf = LinearChainCRF(crf_or_num_tags)

    def forward(self, input, label=None):  # noqa: A002
        return self.crf.decode(input, label=label)
