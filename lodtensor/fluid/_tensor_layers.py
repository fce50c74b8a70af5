"""The fluid 1.x tensor layers that LoD model code calls between its sequence layers: the
activation layers (``fluid.layers.tanh``, ``sigmoid``, ``relu``, ``softmax``, ...), ``concat`` and
``create_parameter``. The activations and ``concat`` run eagerly on any backend (NumPy, CuPy,
torch with autograd) and keep the lod as Paddle's operators do; ``create_parameter`` makes a
parameter of the running :class:`~lodtensor.fluid.Program`, under Paddle's name.
"""

from ..backend import backend_name_of, backend_of
from ..lod import LoD
from ..nn._common import activate
from ..ops._common import int_arg
from ..tensor import LoDTensor

# the first names: Paddle 1.x's activation layers without attributes (each ``fluid.layers.<name>(x,
# name=None)``), computed as the ``act=`` table computes them
__all__ = ["tanh", "sigmoid", "relu", "softsign", "exp", "abs", "square", "sqrt", "rsqrt", "log", "reciprocal",
           "sin", "cos", "ceil", "floor", "softplus", "logsigmoid", "tanh_shrink", "erf",
           "softmax", "concat", "create_parameter"]


def _array(x, where, name):
    if isinstance(x, LoDTensor):
        x._require_data(where)
        return x.data
    if backend_name_of(x) is None:
        raise TypeError(
            f"{where}: {name} must be a LoDTensor or an array (NumPy, CuPy or torch), got {type(x).__name__}"
        )
    return x


def _like(x, data):
    return x.with_data(data) if isinstance(x, LoDTensor) else data


def _floating(data, where, name):
    if backend_of(data).dtype_kind(data.dtype) != "f":
        raise TypeError(f"{where}: {name} must be floating (Paddle's activation kernels are float32/float64), "
                        f"got {data.dtype}; cast it first")


def _activation_layer(act):
    def layer(x, name=None):
        where = f"fluid.layers.{act}()"
        data = _array(x, where, "x")
        _floating(data, where, "x")
        return _like(x, activate(backend_of(data), act, data))

    layer.__name__ = layer.__qualname__ = act
    layer.__doc__ = f"""``fluid.layers.{act}``: Paddle's ``{act}`` operator, element-wise, as ``act="{act}"`` of ``fc``
    computes it; a LoDTensor keeps its lod (as Paddle's operator shares it). ``name`` is accepted and unused.

    >>> import numpy as np
    >>> import lodtensor as lt
    >>> import lodtensor.fluid as fluid
    >>> x = lt.LoDTensor(np.array([[0.5], [1.0], [2.0]]), [[0, 1, 3]])
    >>> out = fluid.layers.{act}(x)
    >>> out.lod(), out.shape(), bool(np.allclose(out.data, {_EXPECT[act]}))
    ([[0, 1, 3]], [3, 1], True)
    """
    return layer


_X = "np.array([[0.5], [1.0], [2.0]])"
#: each layer's example: the NumPy spelling of its values at x = [0.5, 1, 2]
_EXPECT = {
    "tanh": f"np.tanh({_X})", "sigmoid": f"1 / (1 + np.exp(-{_X}))", "relu": _X, "softsign": f"{_X} / (1 + {_X})",
    "exp": f"np.exp({_X})", "abs": _X, "square": f"{_X} ** 2", "sqrt": f"np.sqrt({_X})",
    "rsqrt": f"1 / np.sqrt({_X})", "log": f"np.log({_X})", "reciprocal": f"1 / {_X}", "sin": f"np.sin({_X})",
    "cos": f"np.cos({_X})", "ceil": "[[1.0], [1.0], [2.0]]", "floor": "[[0.0], [1.0], [2.0]]",
    "softplus": f"np.log1p(np.exp({_X}))", "logsigmoid": f"-np.log1p(np.exp(-{_X}))",
    "tanh_shrink": f"{_X} - np.tanh({_X})", "erf": "[[0.5204999], [0.8427008], [0.9953223]]",
}


tanh = _activation_layer("tanh")
sigmoid = _activation_layer("sigmoid")
relu = _activation_layer("relu")
softsign = _activation_layer("softsign")
exp = _activation_layer("exp")
abs = _activation_layer("abs")  # noqa: A001 - Paddle's name
square = _activation_layer("square")
sqrt = _activation_layer("sqrt")
rsqrt = _activation_layer("rsqrt")
log = _activation_layer("log")
reciprocal = _activation_layer("reciprocal")
sin = _activation_layer("sin")
cos = _activation_layer("cos")
ceil = _activation_layer("ceil")
floor = _activation_layer("floor")
softplus = _activation_layer("softplus")
logsigmoid = _activation_layer("logsigmoid")
tanh_shrink = _activation_layer("tanh_shrink")
erf = _activation_layer("erf")


def softmax(input, use_cudnn=False, name=None, axis=-1):  # noqa: A002 - Paddle's names
    """``fluid.layers.softmax``: softmax along ``axis`` (the last by default); a LoDTensor keeps its lod.
    Over the rows of each sequence is ``fluid.layers.sequence_softmax``.

    >>> import numpy as np
    >>> import lodtensor as lt
    >>> out = softmax(lt.LoDTensor(np.log(np.array([[1.0, 3.0], [1.0, 1.0]])), [[0, 2]]))
    >>> out.lod(), out.data.tolist()
    ([[0, 2]], [[0.25, 0.75], [0.5, 0.5]])
    """
    where = "fluid.layers.softmax()"
    data = _array(input, where, "input")
    _floating(data, where, "input")
    axis = int_arg(axis, where, "axis", None)
    bound = max(data.ndim, 1)  # (a 0-d input takes -1 and 0, as Paddle's)
    if not -bound <= axis < bound:
        raise ValueError(f"{where}: axis must be in [{-bound}, {bound}) for an input of rank {data.ndim}, got {axis}")
    if data.ndim == 0:  # one value (axis -1 or 0): its softmax is 1, as Paddle's and torch's
        return backend_of(data).softmax(data.reshape(1), 0).reshape(())
    return _like(input, backend_of(data).softmax(data, axis % data.ndim))


def concat(input, axis=0, name=None):  # noqa: A002
    """``fluid.layers.concat``: the inputs joined along ``axis``, as Paddle's ``concat`` operator.
    Along any other axis than 0 the result keeps the first input's lod (features of the same rows,
    as a bidirectional RNN's two directions); along axis 0 the sequences of the inputs follow each
    other (their lods appended, all of one depth).

    >>> import numpy as np
    >>> import lodtensor as lt
    >>> fwd = lt.LoDTensor(np.ones((3, 2)), [[0, 1, 3]])
    >>> bwd = lt.LoDTensor(np.zeros((3, 1)), [[0, 1, 3]])
    >>> both = concat([fwd, bwd], axis=1)
    >>> both.lod(), both.shape()
    ([[0, 1, 3]], [3, 3])
    >>> concat([fwd, fwd], axis=0).lod()
    [[0, 1, 3, 4, 6]]
    """
    where = "fluid.layers.concat()"
    items = list(input) if isinstance(input, (list, tuple)) else [input]
    if not items:
        raise ValueError(f"{where}: input is an empty list")
    datas = [_array(x, where, f"input[{i}]") for i, x in enumerate(items)]
    be = backend_of(datas[0])
    for i, d in enumerate(datas[1:], 1):
        if backend_of(d) is not be:
            raise TypeError(f"{where}: input[{i}] is {backend_name_of(d)} data but input[0] is {be.name}; "
                            f"convert one first")
    rank = datas[0].ndim
    axis = int_arg(axis, where, "axis", None)
    if rank == 0 or not -rank <= axis < rank:
        raise ValueError(f"{where}: axis must be in [{-rank}, {rank}) for inputs of rank {rank}, got {axis}")
    axis %= rank
    first = [int(s) for s in datas[0].shape]
    for i, d in enumerate(datas[1:], 1):
        shape = [int(s) for s in d.shape]
        if len(shape) != rank or any(a != b for k, (a, b) in enumerate(zip(shape, first)) if k != axis):
            raise ValueError(f"{where}: input[{i}] has shape {shape} but input[0] has {first}; they may differ "
                             f"only along axis {axis}")
    out = be.concat_axis(datas, axis)
    if axis != 0:
        return _like(items[0], out)
    lods = [x.lod if isinstance(x, LoDTensor) else LoD(()) for x in items]
    depths = {len(lod) for lod in lods}
    if depths == {0}:
        return _like(items[0], out) if not isinstance(items[0], LoDTensor) else items[0].with_data(out, lod=[])
    if len(depths) != 1:
        raise ValueError(f"{where}: along axis 0 the inputs' lods must have one depth, got depths "
                         f"{[len(lod) for lod in lods]}")
    return LoDTensor(out, lods[0].join(*lods[1:]))  # each input's offsets shifted past the previous inputs'


def create_parameter(shape, dtype, name=None, attr=None, is_bias=False, default_initializer=None):
    """``fluid.layers.create_parameter``: a parameter of the running program (``name``, else
    ``create_parameter_k.w_0``, ``.b_0`` with ``is_bias``), as a torch Parameter on the CPU; a
    parameter that exists under that name is returned, so a program that declares ``crfw`` this
    way and decodes with ``crf_decoding(param_attr=ParamAttr(name="crfw"))`` loads Paddle's value
    by name. Biases start at 0, weights from ``attr``'s or ``default_initializer``, else Xavier.

    >>> import lodtensor.fluid as fluid
    >>> net = fluid.Program(lambda: fluid.layers.create_parameter([4, 2], "float32", name="crfw"))
    >>> tuple(net().shape), net.paddle_names()
    ((4, 2), ['crfw'])
    """
    from ._model_layers import _base, _frame, _param, _torch_dtype  # noqa: PLC0415 - imports torch on use
    from ._param_attr import ParamAttr  # noqa: PLC0415

    where = "fluid.layers.create_parameter()"
    frame = _frame(where)
    if not isinstance(shape, (list, tuple)):
        raise TypeError(f"{where}: shape must be a list or tuple of ints, got {shape!r}")
    dims = [int_arg(s, where, "shape", 0) for s in shape]
    attr = ParamAttr._to_attr(attr if attr is not None else ParamAttr(name=name), where, "attr")
    if attr is False:
        raise TypeError(f"{where}: attr=False makes no parameter")
    import torch  # noqa: PLC0415

    like = torch.empty(0, dtype=_torch_dtype(dtype, where))
    base = _base(frame, "create_parameter", attr.name)
    if default_initializer is not None and attr.initializer is None:
        attr = ParamAttr(name=attr.name, initializer=default_initializer, learning_rate=attr.learning_rate,
                         regularizer=attr.regularizer, trainable=attr.trainable)
    return _param(frame, base, "b" if is_bias else "w", attr, dims, like, where, is_bias=is_bias)
