"""The fluid 1.x layer calls of Paddle's model code, with Paddle's signatures and parameter names.

Each call runs inside a :class:`~lodtensor.fluid.Program` (its forward, or ``program_guard``):
the first run creates the parameters Paddle would (``fc_0.w_0``, ``fc_0.b_0``,
``embedding_0.w_0``, ``lstm_0.w_0``, ...; a ``ParamAttr`` name or a string instead), later
runs reuse them by call order. The math is :mod:`lodtensor.nn.functional`'s, on torch:
NumPy inputs are converted (``fluid.layers.data`` also casts a feed to its declared dtype).
"""

import numpy as np

from .._data import host_array
from ..nn import functional as F
from ..nn._common import as_torch
from ..ops._common import int_arg
from ..tensor import LoDTensor
from ._param_attr import Constant, ParamAttr

__all__ = [
    "data",
    "embedding",
    "fc",
    "sequence_conv",
    "row_conv",
    "dynamic_lstm",
    "dynamic_gru",
    "linear_chain_crf",
    "crf_decoding",
]


def _frame(where):
    from ._program import current  # noqa: PLC0415 - imports torch

    return current(where)


def _data(x):
    return x.data if isinstance(x, LoDTensor) else x


def _param(frame, base, suffix, attr, shape, like, where, *, dtype=None, is_bias=False):
    """Paddle's ``LayerHelper.create_parameter``: ``attr``'s name, else ``<base>.<suffix>_<k>``."""
    name = attr.name if attr.name is not None else frame.unique(f"{base}.{suffix}")
    default = Constant(0.0) if is_bias else None  # None: Xavier, Paddle's default for weights
    dt = like.dtype if dtype is None else _torch_dtype(dtype, where)
    if not dt.is_floating_point:
        raise TypeError(f"{where}: the parameter {name!r} takes the input's dtype, {str(dt).replace('torch.', '')}, "
                        f"which is not floating; cast the input (a float32 data layer, or x.float())")
    return frame.program.create_parameter(name, shape, dt, like.device, attr, default, where)


def _torch_dtype(dtype, where):
    import torch  # noqa: PLC0415

    if isinstance(dtype, torch.dtype):
        return dtype
    try:
        return torch.from_numpy(np.empty(0, dtype=np.dtype(str(dtype)))).dtype
    except TypeError:
        raise TypeError(f"{where}: dtype must be a floating dtype name such as 'float32', got {dtype!r}") from None


def _base(frame, layer_type, name):
    """Paddle's layer name: ``name`` or ``<layer_type>_<k>``."""
    return name if name is not None else frame.unique(layer_type)


def _shape_arg(shape, where):
    """A data layer's declared shape: a list or tuple of ints, ``None`` or ``-1`` for any size."""
    if not isinstance(shape, (list, tuple)):
        raise TypeError(f"{where}: shape must be a list or tuple of ints (None or -1: any size), got {shape!r}")
    out = []
    for i, s in enumerate(shape):
        if s is None:
            s = -1
        if isinstance(s, bool) or not isinstance(s, (int, np.integer)) or s < -1:
            raise ValueError(f"{where}: shape[{i}] must be a size >= 0, or None or -1 for any size, got {s!r} "
                             f"(shape {list(shape)})")
        out.append(int(s))
    return out


def _cast_feed(value, want, where, name):
    """The feed in the data layer's dtype ``want`` (NumPy and torch feeds alike). Floating values fed to
    an integer or bool layer must be whole numbers: 1.7 is refused, not truncated to the id 1 (Paddle
    refuses every feed of another dtype)."""
    import torch  # noqa: PLC0415

    got = _data(value)
    if got.dtype == want:
        return value
    if (got.is_floating_point() or got.is_complex()) and not (want.is_floating_point or want.is_complex):
        bad = ~torch.isfinite(got) | (got != torch.trunc(got)) if got.is_floating_point() else got.imag != 0
        if want != torch.bool and got.is_floating_point():  # and within the integer type's range
            bad = bad | (got < torch.iinfo(want).min) | (got > torch.iinfo(want).max)
        if bool(bad.any()):
            first = got.reshape(-1)[bad.reshape(-1)][0].item()
            raise ValueError(f"{where}: the data layer declares {str(want).replace('torch.', '')}, but feed {name!r} "
                             f"holds {first!r} ({str(got.dtype).replace('torch.', '')}), which is not a whole "
                             f"number in its range; feed integers (Paddle refuses a feed of another dtype)")
    got = got.to(want)
    return value.with_data(got) if isinstance(value, LoDTensor) else got


def _python_feed(feed, where, name):
    """A feed given as Python numbers (a list, tuple or scalar) as a NumPy array, as Paddle's executor
    takes it (``np.array(feed)``, then the layer's dtype)."""
    if not isinstance(feed, (list, tuple, int, float, bool)):
        return feed
    try:
        array = host_array(feed)
    except ValueError as err:  # ragged lists (on every NumPy: host_array)
        raise ValueError(f"{where}: feed {name!r} is a nested list that is not a regular array ({err}); give "
                         f"ragged data as a LoDTensor (fluid.create_lod_tensor)") from None
    if array.dtype == object:
        raise ValueError(f"{where}: feed {name!r} is a nested list that is not a regular array; give ragged "
                         f"data as a LoDTensor (fluid.create_lod_tensor)")
    return array


def _fed(where, name, dtype, shape, lod_level, batch_dim, check_batch=False):
    """The feed ``name`` of the running program in ``dtype``, checked against ``shape`` (batch dim
    excluded: it may be any size, unless ``check_batch`` and a feed without lod); ``batch_dim=None``:
    ``shape`` holds it if it has the feed's rank."""
    frame = _frame(where)
    if name not in frame.feeds:
        raise ValueError(
            f"{where}: the program was not fed {name!r}; call it with feed={{{name!r}: ...}} "
            f"(fed: {sorted(frame.feeds)})"
        )
    if isinstance(frame.feeds[name], LoDTensor) and frame.feeds[name].data is None:
        raise ValueError(f"{where}: feed {name!r} is a LoDTensor that holds no data yet; give it an array with "
                         f"t.set(array, place)")
    feed = _python_feed(frame.feeds[name], where, name)
    value = _cast_feed(as_torch(feed, where, f"feed {name!r}"), _torch_dtype(dtype, where), where, name)
    got = _data(value)
    if batch_dim is None:
        batch_dim = len(shape) == got.dim()
    want, have = shape[1:] if batch_dim else shape, [int(s) for s in got.shape[1:]]
    # Paddle's check_feed_shape_type: a fixed batch dim must match, unless the feed has a lod
    batch_differs = (check_batch and batch_dim and got.dim() and shape[0] not in (-1, int(got.shape[0]))
                     and not (isinstance(value, LoDTensor) and value.lod_level))
    if batch_differs or len(want) != len(have) or any(w not in (-1, h) for w, h in zip(want, have)):
        if batch_dim:
            raise ValueError(f"{where}: the feed has shape {[int(s) for s in got.shape]}, but the data layer "
                             f"declares {shape} (-1: any size)")
        raise ValueError(f"{where}: the feed has rows of shape {have}, but the data layer declares {want}")
    have_levels = value.lod_level if isinstance(value, LoDTensor) else 0
    if have_levels < int(lod_level):
        raise ValueError(f"{where}: the data layer declares lod_level {lod_level}, the feed has {have_levels}")
    return value


def data(name, shape, dtype="float32", lod_level=0, append_batch_size=True, type=None, stop_gradient=True):  # noqa: A002
    """``fluid.layers.data``: the value fed as ``name`` to the running program (``net(..., feed={name:
    value})``), as a LoDTensor (or tensor) of torch data in ``dtype``; ``shape`` and ``lod_level`` are
    checked. As in Paddle 1.x, ``shape`` leaves out the batch dim (``append_batch_size=True``) unless
    it has a ``None`` or ``-1`` (any size) somewhere: then it is the whole shape.

    >>> import numpy as np
    >>> import lodtensor as lt
    >>> import lodtensor.fluid as fluid
    >>> net = fluid.Program(lambda: fluid.layers.data(name="words", shape=[1], dtype="int64", lod_level=1))
    >>> net(feed={"words": lt.LoDTensor(np.array([[3], [4]]), [[0, 2]])}).lod()
    [[0, 2]]
    """
    where = f"fluid.layers.data(name={name!r})"
    rows = _shape_arg(shape, where)
    return _fed(where, name, dtype, rows, lod_level, batch_dim=not append_batch_size or -1 in rows)


def data_v2(name, shape, dtype="float32", lod_level=0):
    """``fluid.data`` (Paddle 1.6+, ``paddle.static.data``): as :func:`data`, but ``shape`` is the whole
    shape, batch dim included (``None`` or ``-1`` for any size): ``fluid.data("x", [None, 1], "int64")``.
    A fixed batch dim must match the feed's, as Paddle checks it, unless the feed has a lod. (A shape
    without ``None``/``-1`` and one dim short of the feed is taken as its rows, as ``fluid.layers.data``;
    Paddle refuses it.) A feed may be a LoDTensor, an array, or Python numbers (a list), as Paddle's.

    >>> import numpy as np
    >>> import lodtensor.fluid as fluid
    >>> net = fluid.Program(lambda: fluid.data(name="x", shape=[None, 3]))
    >>> tuple(net(feed={"x": np.ones((2, 3))}).shape)
    (2, 3)
    """
    where = f"fluid.data(name={name!r})"
    rows = _shape_arg(shape, where)
    return _fed(where, name, dtype, rows, lod_level, batch_dim=True if -1 in rows else None, check_batch=True)


def _embedding_size(size, where):
    if isinstance(size, (str, bytes)) or not hasattr(size, "__len__") or len(size) != 2:
        raise TypeError(f"{where}: size must be [vocab_size, emb_dim], a list or tuple of 2 ints, got {size!r}")
    return [int_arg(s, where, f"size[{i}]", 1) for i, s in enumerate(size)]


def embedding(input, size, is_sparse=False, is_distributed=False, padding_idx=None, param_attr=None,  # noqa: A002
              dtype="float32"):
    """``fluid.layers.embedding``: ids ``[N, 1]`` (or ``[N]``) -> rows ``[N, D]`` of the parameter
    ``embedding_k.w_0`` of shape ``size = [vocab, D]``; ``padding_idx`` rows are zeros (negative:
    from the end). ``is_sparse``/``is_distributed`` are accepted (gradients are dense).

    >>> import numpy as np, torch
    >>> import lodtensor as lt
    >>> import lodtensor.fluid as fluid
    >>> net = fluid.Program(lambda ids: fluid.layers.embedding(ids, size=[5, 3], padding_idx=0))
    >>> out = net(lt.LoDTensor(np.array([[0], [4]]), [[0, 2]]))
    >>> tuple(out.data.shape), out.data[0].tolist()
    ((2, 3), [0.0, 0.0, 0.0])
    """
    where = "fluid.layers.embedding()"
    frame = _frame(where)
    size = _embedding_size(size, where)
    ids = as_torch(input, where)
    attr = ParamAttr._to_attr(param_attr, where)
    w = _param(frame, _base(frame, "embedding", None), "w", attr, size, _data(ids), where, dtype=dtype)
    if not isinstance(ids, LoDTensor):
        ids = LoDTensor(ids)
    return F.embedding(ids, w, padding_idx=padding_idx)


def embedding_v2(input, size, is_sparse=False, is_distributed=False, padding_idx=None, param_attr=None,  # noqa: A002
              dtype="float32"):
    """``fluid.embedding`` (Paddle 1.8, ``lookup_table_v2``): rows ``ids.shape + [D]`` of the parameter
    ``embedding_k.w_0`` ``size = [vocab, D]``: ``[N]`` ids give ``[N, D]``, ``[N, 1]`` give ``[N, 1, D]``
    (``fluid.layers.embedding`` gives ``[N, D]`` for both). Keeps the lod.

    >>> import numpy as np
    >>> import lodtensor as lt
    >>> import lodtensor.fluid as fluid
    >>> net = fluid.Program(lambda ids: fluid.embedding(ids, size=[5, 3]))
    >>> tuple(net(lt.LoDTensor(np.array([[1], [2]]), [[0, 2]])).data.shape)
    (2, 1, 3)
    """
    size = _embedding_size(size, "fluid.embedding()")
    ids = as_torch(input, "fluid.embedding()")
    flat = _data(ids).reshape(-1)
    out = _data(embedding(LoDTensor(flat), size, is_sparse=is_sparse, is_distributed=is_distributed,
                          padding_idx=padding_idx, param_attr=param_attr, dtype=dtype))
    out = out.reshape((*tuple(int(s) for s in _data(ids).shape), int(size[1])))
    return ids.with_data(out) if isinstance(ids, LoDTensor) else out


def _fc_inputs(input, where):
    inputs = list(input) if isinstance(input, (list, tuple)) else [input]
    if not inputs:
        raise ValueError(f"{where}: input is an empty list; give a tensor or a list of tensors")
    return [as_torch(x, where, f"input[{i}]") for i, x in enumerate(inputs)]


def fc(input, size, num_flatten_dims=1, param_attr=None, bias_attr=None, act=None, name=None):  # noqa: A002
    """``fluid.layers.fc``: ``act(sum_i flatten(input[i]) @ W_i + b)`` with one weight per input
    (``fc_k.w_0``, ``fc_k.w_1``, ... of shape ``[prod(shape[num_flatten_dims:]), size]``) and the
    bias ``fc_k.b_0`` ``[size]`` (none with ``bias_attr=False``). ``param_attr`` is one attr for
    every input or a list of one per input. The result keeps the first input's lod.

    >>> import torch
    >>> import lodtensor.fluid as fluid
    >>> net = fluid.Program(lambda a, b: fluid.layers.fc(input=[a, b], size=4, act="tanh"))
    >>> tuple(net(torch.ones(2, 3), torch.ones(2, 5)).shape), net.paddle_names()
    ((2, 4), ['fc_0.w_0', 'fc_0.w_1', 'fc_0.b_0'])
    """
    where = "fluid.layers.fc()"
    frame = _frame(where)
    size = int_arg(size, where, "size", 0)
    inputs = _fc_inputs(input, where)
    attrs = param_attr if isinstance(param_attr, (list, tuple)) else [param_attr] * len(inputs)
    if len(attrs) != len(inputs):
        raise ValueError(f"{where}: param_attr is a list of {len(attrs)} but there are {len(inputs)} inputs")
    base = _base(frame, "fc", name)
    weights, dims = [], []
    for i, (x, attr) in enumerate(zip(inputs, attrs)):
        d = _data(x)
        k = d.dim() - 1 if num_flatten_dims == -1 else int(num_flatten_dims)
        if not 1 <= k < d.dim():
            raise ValueError(f"{where}: num_flatten_dims must be in [1, {d.dim() - 1}] for input[{i}], got {k}")
        dims.append(k)
        shape = [int(np.prod([int(s) for s in d.shape[k:]])), int(size)]
        weights.append(_param(frame, base, "w", ParamAttr._to_attr(attr, where), shape, _data(inputs[0]), where))
    battr = ParamAttr._to_attr(bias_attr, where, "bias_attr")
    bias = None if battr is False else _param(frame, base, "b", battr, [int(size)], _data(inputs[0]), where,
                                              is_bias=True)
    if len(set(dims)) != 1:
        raise ValueError(f"{where}: num_flatten_dims=-1 gives different dims per input: {dims}")
    if len(inputs) == 1:
        return F.fc(inputs[0], weights[0], bias, num_flatten_dims=dims[0], act=act)
    return F.fc(inputs, weights, bias, num_flatten_dims=dims[0], act=act)


def sequence_conv(input, num_filters, filter_size=3, filter_stride=1, padding=True, padding_start=None,  # noqa: A002
                  bias_attr=None, param_attr=None, act=None, name=None, *, padding_trainable=False):
    """``fluid.layers.sequence_conv``: the filter ``sequence_conv_k.w_0`` ``[filter_size * D, num_filters]``
    and bias ``sequence_conv_k.b_0`` ``[num_filters]``. ``padding`` is accepted and, as in Paddle, has
    no effect; ``padding_trainable=True`` (lodtensor; Paddle's operator has it, its layer does not)
    adds the learnable padding rows ``sequence_conv_k.w_1`` (``PaddingData``, starting at zero).

    >>> import numpy as np
    >>> import lodtensor as lt
    >>> import lodtensor.fluid as fluid
    >>> net = fluid.Program(lambda x: fluid.layers.sequence_conv(x, num_filters=2, filter_size=3))
    >>> out = net(lt.LoDTensor(np.ones((4, 5), "float32"), [[0, 1, 4]]))
    >>> out.lod(), [tuple(p.shape) for p in net.parameters()]
    ([[0, 1, 4]], [(15, 2), (2,)])
    """
    where = "fluid.layers.sequence_conv()"
    frame = _frame(where)
    x = as_torch(input, where)
    d = x.data
    if not isinstance(x, LoDTensor) or d.dim() != 2:
        raise ValueError(f"{where}: input must be a LoDTensor of rows [N, D]")
    base = _base(frame, "sequence_conv", name)
    size = int_arg(filter_size, where, "filter_size", 1)
    num_filters = int_arg(num_filters, where, "num_filters", 0)
    w = _param(frame, base, "w", ParamAttr._to_attr(param_attr, where), [size * int(d.shape[1]), int(num_filters)],
               d, where)
    battr = ParamAttr._to_attr(bias_attr, where, "bias_attr")
    b = None if battr is False else _param(frame, base, "b", battr, [int(num_filters)], d, where, is_bias=True)
    pad = None
    if padding_trainable:
        start = -(size // 2) if padding_start is None else int_arg(padding_start, where, "padding_start")
        rows = max(0, -start) + max(0, start + size - 1)
        pad = _param(frame, base, "w", ParamAttr(initializer=Constant(0.0)), [rows, int(d.shape[1])], d, where)
    return F.sequence_conv(x, w, b, filter_size=size, filter_stride=filter_stride, padding_start=padding_start,
                           act=act, padding_trainable=padding_trainable, padding_data=pad)


def row_conv(input, future_context_size, param_attr=None, act=None):  # noqa: A002
    """``fluid.layers.row_conv``: the look-ahead filter ``row_conv_k.w_0`` ``[future_context_size + 1, D]``.

    >>> import numpy as np
    >>> import lodtensor as lt
    >>> import lodtensor.fluid as fluid
    >>> net = fluid.Program(lambda x: fluid.layers.row_conv(x, future_context_size=2))
    >>> _ = net(lt.LoDTensor(np.ones((3, 4), "float32"), [[0, 3]]))
    >>> net.paddle_names(), tuple(net.get_parameter("row_conv_0.w_0").shape)
    (['row_conv_0.w_0'], (3, 4))
    """
    where = "fluid.layers.row_conv()"
    frame = _frame(where)
    future_context_size = int_arg(future_context_size, where, "future_context_size", 0)
    x = as_torch(input, where)
    d = _data(x)
    w = _param(frame, _base(frame, "row_conv", None), "w", ParamAttr._to_attr(param_attr, where),
               [int(future_context_size) + 1, int(d.shape[-1])], d, where)
    return F.row_conv(x, w, act=act)


def dynamic_lstm(input, size, h_0=None, c_0=None, param_attr=None, bias_attr=None, use_peepholes=True,  # noqa: A002
                 is_reverse=False, gate_activation="sigmoid", cell_activation="tanh", candidate_activation="tanh",
                 dtype="float32", name=None):
    """``fluid.layers.dynamic_lstm``: ``size`` is 4 times the hidden size ``D`` (Paddle's rule), the
    input is ``[T, size]`` (projected by an fc); parameters ``lstm_k.w_0`` ``[D, 4D]`` and ``lstm_k.b_0``
    ``[1, 7D]`` (``[1, 4D]`` without peepholes), in ``dtype``. Returns ``(hidden, cell)``, ``[T, D]``.

    >>> import numpy as np
    >>> import lodtensor as lt
    >>> import lodtensor.fluid as fluid
    >>> net = fluid.Program(lambda x: fluid.layers.dynamic_lstm(x, size=8)[0])
    >>> out = net(lt.LoDTensor(np.ones((3, 8), "float32"), [[0, 1, 3]]))
    >>> tuple(out.data.shape), [(n, tuple(p.shape)) for n, p in net.named_parameters()]
    ((3, 2), [('lstm_0.w_0', (2, 8)), ('lstm_0.b_0', (1, 14))])
    """
    where = "fluid.layers.dynamic_lstm()"
    frame = _frame(where)
    size = int_arg(size, where, "size", 4)
    if size % 4:
        raise ValueError(f"{where}: size is 4 * hidden size (Paddle's rule), so it must be a multiple of 4, got {size}")
    x = as_torch(input, where)
    d = int(size) // 4
    width = int(_data(x).shape[-1])
    if width != int(size):
        raise ValueError(
            f"{where}: input has {width} columns but size={size}; size is 4 * hidden size and the input must be "
            f"[T, size] (an fc of size={size} in front)"
        )
    battr = ParamAttr._to_attr(bias_attr, where, "bias_attr")
    if battr is False:
        raise ValueError(f"{where}: bias_attr must not be False (Paddle's lstm needs its bias)")
    base = _base(frame, "lstm", name)
    w = _param(frame, base, "w", ParamAttr._to_attr(param_attr, where), [d, 4 * d], _data(x), where, dtype=dtype)
    b = _param(frame, base, "b", battr, [1, (7 if use_peepholes else 4) * d], _data(x), where, dtype=dtype,
               is_bias=True)
    return F.dynamic_lstm(x, w, b, h_0=as_torch(h_0, where, "h_0"), c_0=as_torch(c_0, where, "c_0"),
                          use_peepholes=use_peepholes, is_reverse=is_reverse, gate_activation=gate_activation,
                          cell_activation=cell_activation, candidate_activation=candidate_activation)


def dynamic_gru(input, size, param_attr=None, bias_attr=None, is_reverse=False, gate_activation="sigmoid",  # noqa: A002
                candidate_activation="tanh", h_0=None, origin_mode=False):
    """``fluid.layers.dynamic_gru``: ``size`` is the hidden size ``D`` and the input ``[T, 3 * size]``;
    parameters ``gru_k.w_0`` ``[D, 3D]`` and ``gru_k.b_0`` ``[1, 3D]`` (none with ``bias_attr=False``).

    >>> import numpy as np
    >>> import lodtensor as lt
    >>> import lodtensor.fluid as fluid
    >>> net = fluid.Program(lambda x: fluid.layers.dynamic_gru(x, size=2))
    >>> tuple(net(lt.LoDTensor(np.ones((3, 6), "float32"), [[0, 1, 3]])).data.shape), net.paddle_names()
    ((3, 2), ['gru_0.w_0', 'gru_0.b_0'])
    """
    where = "fluid.layers.dynamic_gru()"
    frame = _frame(where)
    x = as_torch(input, where)
    d = int_arg(size, where, "size", 1)
    width = int(_data(x).shape[-1])
    if width != 3 * d:
        raise ValueError(
            f"{where}: input has {width} columns but size={size}; Paddle's dynamic_gru takes the hidden size as "
            f"size and an input of 3 * size = {3 * d} columns (an fc of size={3 * d} in front)"
        )
    base = _base(frame, "gru", None)
    w = _param(frame, base, "w", ParamAttr._to_attr(param_attr, where), [d, 3 * d], _data(x), where)
    battr = ParamAttr._to_attr(bias_attr, where, "bias_attr")
    b = None if battr is False else _param(frame, base, "b", battr, [1, 3 * d], _data(x), where, is_bias=True)
    return F.dynamic_gru(x, w, b, h_0=as_torch(h_0, where, "h_0"), is_reverse=is_reverse,
                         gate_activation=gate_activation, candidate_activation=candidate_activation,
                         origin_mode=origin_mode)


def _no_length(length, where):
    if length is not None:
        raise ValueError(f"{where}: length= is Paddle's padded form; pass the emissions as a LoDTensor instead")


def linear_chain_crf(input, label, param_attr=None, length=None):  # noqa: A002
    """``fluid.layers.linear_chain_crf``: each sequence's negative log-likelihood ``[N, 1]`` under the
    transition ``linear_chain_crf_k.w_0`` ``[K + 2, K]`` (start, end, tag to tag; name it with
    ``param_attr`` to share it with :func:`crf_decoding`).

    >>> import numpy as np
    >>> import lodtensor as lt
    >>> import lodtensor.fluid as fluid
    >>> def net(emission, tags):
    ...     return fluid.layers.linear_chain_crf(emission, tags, param_attr=fluid.ParamAttr(name="crfw"))
    >>> prog = fluid.Program(net)
    >>> lod = [[0, 1, 3]]
    >>> cost = prog(lt.LoDTensor(np.zeros((3, 4), "float32"), lod), lt.LoDTensor(np.zeros((3, 1), "int64"), lod))
    >>> tuple(cost.shape), prog.paddle_names()
    ((2, 1), ['crfw'])
    """
    where = "fluid.layers.linear_chain_crf()"
    frame = _frame(where)
    _no_length(length, where)
    x = as_torch(input, where)
    k = int(_data(x).shape[-1])
    transition = _param(frame, _base(frame, "linear_chain_crf", None), "w", ParamAttr._to_attr(param_attr, where),
                        [k + 2, k], _data(x), where)
    return F.linear_chain_crf(x, as_torch(label, where, "label"), transition)


def crf_decoding(input, param_attr, label=None, length=None):  # noqa: A002
    """``fluid.layers.crf_decoding``: the Viterbi path ``[N, 1]`` (int64, the input's lod) under the
    transition named by ``param_attr`` (created by :func:`linear_chain_crf`); with ``label``, 1 where
    the path agrees with it, else 0.

    >>> import numpy as np
    >>> import lodtensor as lt
    >>> import lodtensor.fluid as fluid
    >>> def net(emission, tags):
    ...     fluid.layers.linear_chain_crf(emission, tags, param_attr="crfw")
    ...     return fluid.layers.crf_decoding(emission, param_attr=fluid.ParamAttr(name="crfw"))
    >>> x = lt.LoDTensor(np.eye(3, dtype="float32") * 9, [[0, 3]])
    >>> fluid.Program(net)(x, lt.LoDTensor(np.zeros((3, 1), "int64"), [[0, 3]])).data.ravel().tolist()
    [0, 1, 2]
    """
    where = "fluid.layers.crf_decoding()"
    frame = _frame(where)
    _no_length(length, where)
    attr = ParamAttr._to_attr(param_attr, where)
    found = frame.program._lookup(attr.name) if attr is not False and attr.name is not None else None
    if found is None:
        raise ValueError(
            f"{where}: param_attr must name the transition of a linear_chain_crf call of this program "
            f"(e.g. ParamAttr(name='crfw') in both), got {param_attr!r}"
        )
    return F.crf_decoding(as_torch(input, where), found.detach(), label=as_torch(label, where, "label"))
