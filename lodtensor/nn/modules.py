"""``torch.nn.Module`` s for Paddle's sequence layers; Parameters in Paddle's shapes.

A Paddle checkpoint loads unchanged: ``module.weight.data.copy_(torch.from_numpy(state["fc_0.w_0"]))``
or ``load_state_dict({"weight": ..., "bias": ...})``. Weights start Xavier-uniform and biases
at zero, as Paddle's defaults. Every ``forward`` takes and returns LoDTensors holding torch data.

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

from . import functional as F

__all__ = ["Embedding", "FC", "SequenceConv", "RowConv", "DynamicLSTM", "DynamicGRU", "LinearChainCRF", "CRFDecoding"]


def _xavier(*shape, fan_in=None, fan_out=None):
    fan_in = shape[0] if fan_in is None else fan_in
    fan_out = shape[-1] if fan_out is None else fan_out
    bound = math.sqrt(6.0 / (fan_in + fan_out))
    return torch.nn.Parameter(torch.empty(*shape).uniform_(-bound, bound))


def _zeros(*shape):
    return torch.nn.Parameter(torch.zeros(*shape))


class Embedding(torch.nn.Module):
    """Paddle's ``embedding``: ``weight`` ``[num_embeddings, embedding_dim]``; ``padding_idx`` rows are zeros."""

    def __init__(self, num_embeddings, embedding_dim, padding_idx=None):
        super().__init__()
        self.padding_idx = padding_idx
        self.weight = _xavier(num_embeddings, embedding_dim)

    def forward(self, input):  # noqa: A002 - Paddle's name
        return F.embedding(input, self.weight, padding_idx=self.padding_idx)


class FC(torch.nn.Module):
    """Paddle's ``fc``: ``weight`` ``[in_features, out_features]``, ``bias`` ``[out_features]``."""

    def __init__(self, in_features, out_features, num_flatten_dims=1, act=None, bias=True):
        super().__init__()
        self.num_flatten_dims, self.act = num_flatten_dims, act
        self.weight = _xavier(in_features, out_features)
        self.bias = _zeros(out_features) if bias else None

    def forward(self, input):  # noqa: A002
        return F.fc(input, self.weight, self.bias, num_flatten_dims=self.num_flatten_dims, act=self.act)


class SequenceConv(torch.nn.Module):
    """Paddle's ``sequence_conv``: ``weight`` ``[filter_size * input_dim, num_filters]``, ``bias`` ``[num_filters]``."""

    def __init__(self, input_dim, num_filters, filter_size=3, padding_start=None, act=None, bias=True):
        super().__init__()
        self.filter_size, self.padding_start, self.act = filter_size, padding_start, act
        self.weight = _xavier(filter_size * input_dim, num_filters)
        self.bias = _zeros(num_filters) if bias else None

    def forward(self, input):  # noqa: A002
        return F.sequence_conv(input, self.weight, self.bias, filter_size=self.filter_size,
                               padding_start=self.padding_start, act=self.act)


class RowConv(torch.nn.Module):
    """Paddle's ``row_conv``: ``weight`` ``[future_context_size + 1, input_dim]``."""

    def __init__(self, input_dim, future_context_size, act=None):
        super().__init__()
        self.act = act
        self.weight = _xavier(future_context_size + 1, input_dim)

    def forward(self, input):  # noqa: A002
        return F.row_conv(input, self.weight, act=self.act)


class DynamicLSTM(torch.nn.Module):
    """Paddle's ``dynamic_lstm`` with hidden size ``D``: ``weight`` ``[D, 4D]``, ``bias`` ``[1, 7D]``
    (``[1, 4D]`` without peepholes); the input is already projected to ``4D`` (an :class:`FC`)."""

    def __init__(self, hidden_size, use_peepholes=True, is_reverse=False, gate_activation="sigmoid",
                 cell_activation="tanh", candidate_activation="tanh"):
        super().__init__()
        d = hidden_size
        self.hidden_size, self.use_peepholes, self.is_reverse = d, use_peepholes, is_reverse
        self.activations = dict(gate_activation=gate_activation, cell_activation=cell_activation,
                                candidate_activation=candidate_activation)
        self.weight = _xavier(d, 4 * d)
        self.bias = _zeros(1, (7 if use_peepholes else 4) * d)

    def forward(self, input, h_0=None, c_0=None):  # noqa: A002
        return F.dynamic_lstm(input, self.weight, self.bias, h_0=h_0, c_0=c_0, use_peepholes=self.use_peepholes,
                              is_reverse=self.is_reverse, **self.activations)


class DynamicGRU(torch.nn.Module):
    """Paddle's ``dynamic_gru`` with hidden size ``D``: ``weight`` ``[D, 3D]`` (Paddle's flat layout),
    ``bias`` ``[1, 3D]``; the input is already projected to ``3D``."""

    def __init__(self, hidden_size, is_reverse=False, gate_activation="sigmoid", candidate_activation="tanh",
                 origin_mode=False):
        super().__init__()
        d = hidden_size
        self.hidden_size, self.is_reverse, self.origin_mode = d, is_reverse, origin_mode
        self.activations = dict(gate_activation=gate_activation, candidate_activation=candidate_activation)
        self.weight = _xavier(d, 3 * d)
        self.bias = _zeros(1, 3 * d)

    def forward(self, input, h_0=None):  # noqa: A002
        return F.dynamic_gru(input, self.weight, self.bias, h_0=h_0, is_reverse=self.is_reverse,
                             origin_mode=self.origin_mode, **self.activations)


class LinearChainCRF(torch.nn.Module):
    """Paddle's ``linear_chain_crf``: ``transition`` ``[num_tags + 2, num_tags]`` (start, end, then
    tag-to-tag scores). ``forward`` gives each sequence's negative log-likelihood ``[N, 1]``;
    :meth:`decode` the Viterbi path (``crf_decoding``) with the same transition."""

    def __init__(self, num_tags):
        super().__init__()
        self.transition = _xavier(num_tags + 2, num_tags, fan_in=num_tags)

    @property
    def weight(self):
        """The transition matrix (Paddle names the parameter ``crfw``)."""
        return self.transition

    def forward(self, input, label):  # noqa: A002
        return F.linear_chain_crf(input, label, self.transition)

    def decode(self, input, label=None):  # noqa: A002
        return F.crf_decoding(input, self.transition.detach(), label=label)


class CRFDecoding(torch.nn.Module):
    """Paddle's ``crf_decoding`` sharing the ``transition`` of a :class:`LinearChainCRF` (or a new one)."""

    def __init__(self, crf_or_num_tags):
        super().__init__()
        if isinstance(crf_or_num_tags, LinearChainCRF):
            self.crf = crf_or_num_tags
        else:
            self.crf = LinearChainCRF(int(crf_or_num_tags))

    def forward(self, input, label=None):  # noqa: A002
        return self.crf.decode(input, label=label)
