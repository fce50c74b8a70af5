"""Paddle's ``ParamAttr``, initializers and ``L2Decay`` for the fluid layer calls.

Initializers fill a torch tensor in place (torch's random generator: ``torch.manual_seed``
decides the values, or ``seed=`` a generator of its own). Nothing here imports torch until a
parameter is made.
"""

import math

import numpy as np

__all__ = [
    "ParamAttr",
    "Constant",
    "Uniform",
    "Normal",
    "TruncatedNormal",
    "Xavier",
    "MSRA",
    "NumpyArrayInitializer",
    "L2Decay",
]


def _fans(shape):
    """Paddle's fan-in and fan-out of a parameter shape (2-D: ``[in, out]``)."""
    if len(shape) == 0:
        return 1, 1
    if len(shape) == 1:
        return shape[0], shape[0]
    if len(shape) == 2:
        return shape[0], shape[1]
    receptive = int(np.prod(shape[2:]))
    return shape[1] * receptive, shape[0] * receptive


class _Initializer:
    """Base: ``init(tensor)`` fills ``tensor`` in place and returns it."""

    seed = 0

    def _generator(self, tensor):
        if not self.seed:
            return None
        import torch  # noqa: PLC0415

        return torch.Generator(device=tensor.device).manual_seed(int(self.seed))

    def __call__(self, tensor):
        import torch  # noqa: PLC0415

        with torch.no_grad():
            return self._fill(tensor)

    def __repr__(self):
        args = ", ".join(f"{k}={v!r}" for k, v in vars(self).items())
        return f"{type(self).__name__}({args})"


class Constant(_Initializer):
    """Every value ``value``: ``fluid.initializer.Constant(value=0.0)``.

    >>> import torch
    >>> Constant(0.5)(torch.empty(2)).tolist()
    [0.5, 0.5]
    """

    def __init__(self, value=0.0, force_cpu=False):
        self.value = float(value)

    def _fill(self, tensor):
        return tensor.fill_(self.value)


class Uniform(_Initializer):
    """Uniform in ``[low, high)``: ``fluid.initializer.Uniform(low=-1.0, high=1.0, seed=0)``.

    >>> import torch
    >>> bool((Uniform(-0.1, 0.1)(torch.empty(100)).abs() <= 0.1).all())
    True
    """

    def __init__(self, low=-1.0, high=1.0, seed=0, diag_num=0, diag_step=0, diag_val=1.0):
        if float(low) > float(high):
            raise ValueError(f"Uniform(): low must be <= high, got low={low}, high={high}")
        for arg, value in (("diag_num", diag_num), ("diag_step", diag_step)):
            if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 0:
                raise ValueError(f"Uniform(): {arg} must be an integer >= 0, got {value!r}")
        self.low, self.high, self.seed = float(low), float(high), int(seed)
        self.diag_num, self.diag_step, self.diag_val = int(diag_num), int(diag_step), float(diag_val)

    def _fill(self, tensor):
        tensor.uniform_(self.low, self.high, generator=self._generator(tensor))
        if self.diag_num:  # Paddle: diag_val at the flat positions i * (diag_step + 1), i < diag_num
            last = (self.diag_num - 1) * (self.diag_step + 1)
            if last >= tensor.numel():
                raise ValueError(f"Uniform(): diag_num={self.diag_num}, diag_step={self.diag_step} reach the flat "
                                 f"position {last}, past the {tensor.numel()} values of shape {list(tensor.shape)}")
            tensor.view(-1)[:: self.diag_step + 1][: self.diag_num] = self.diag_val
        return tensor


class Normal(_Initializer):
    """Normal with mean ``loc`` and standard deviation ``scale``: ``fluid.initializer.Normal(loc=0.0, scale=1.0)``.

    >>> import torch
    >>> Normal(3.0, 0.0)(torch.empty(2)).tolist()
    [3.0, 3.0]
    """

    def __init__(self, loc=0.0, scale=1.0, seed=0):
        self.loc, self.scale, self.seed = float(loc), float(scale), int(seed)

    def _fill(self, tensor):  # a negative scale draws as its absolute value, as Paddle's (symmetric) draws
        return tensor.normal_(self.loc, abs(self.scale), generator=self._generator(tensor))


class TruncatedNormal(_Initializer):
    """Normal cut at two standard deviations from the mean (values outside are drawn again), as Paddle.

    >>> import torch
    >>> bool((TruncatedNormal(0.0, 1.0)(torch.empty(1000)).abs() <= 2.0).all())
    True
    """

    def __init__(self, loc=0.0, scale=1.0, seed=0):
        self.loc, self.scale, self.seed = float(loc), float(scale), int(seed)

    def _fill(self, tensor):
        import torch  # noqa: PLC0415

        scale = abs(self.scale)  # as Normal; 0: every value loc, as Paddle (torch divides by it)
        if scale == 0:
            return tensor.fill_(self.loc)
        return torch.nn.init.trunc_normal_(tensor, self.loc, scale, self.loc - 2 * scale, self.loc + 2 * scale,
                                           generator=self._generator(tensor))


class Xavier(_Initializer):
    """Glorot: uniform in ``+-sqrt(6 / (fan_in + fan_out))`` (or normal with ``sqrt(2 / (fan_in +
    fan_out))``); Paddle's default for weights. For ``[in, out]`` weights ``fan_in = in``.

    >>> import torch
    >>> bool((Xavier()(torch.empty(3, 5)).abs() <= (6 / 8) ** 0.5).all())
    True
    """

    def __init__(self, uniform=True, fan_in=None, fan_out=None, seed=0):
        self.uniform, self.fan_in, self.fan_out, self.seed = bool(uniform), fan_in, fan_out, int(seed)

    def _fill(self, tensor):
        fan_in, fan_out = _fans(tuple(tensor.shape))
        fan_in = fan_in if self.fan_in is None else self.fan_in
        fan_out = fan_out if self.fan_out is None else self.fan_out
        if self.uniform:
            limit = math.sqrt(6.0 / (fan_in + fan_out))
            return tensor.uniform_(-limit, limit, generator=self._generator(tensor))
        return tensor.normal_(0.0, math.sqrt(2.0 / (fan_in + fan_out)), generator=self._generator(tensor))


class MSRA(_Initializer):
    """He/Kaiming: uniform in ``+-gain * sqrt(3 / fan_in)`` (or normal with ``gain / sqrt(fan_in)``), the
    ``gain`` of ``nonlinearity`` as Paddle's ``calculate_gain`` (relu: ``sqrt(2)``, so ``+-sqrt(6 / fan_in)``;
    leaky_relu: ``sqrt(2 / (1 + negative_slope ** 2))``; tanh: 5/3; linear, sigmoid: 1).

    >>> import torch
    >>> bool((MSRA()(torch.empty(6, 2)).abs() <= 1.0).all())
    True
    """

    def __init__(self, uniform=True, fan_in=None, seed=0, negative_slope=0, nonlinearity="relu"):
        self.uniform, self.fan_in, self.seed = bool(uniform), fan_in, int(seed)
        self.negative_slope, self.nonlinearity = float(negative_slope), nonlinearity
        self.gain = _gain(nonlinearity, self.negative_slope)

    def _fill(self, tensor):
        fan_in = _fans(tuple(tensor.shape))[0] if self.fan_in is None else self.fan_in
        if self.uniform:  # gain * sqrt(3 / fan_in): sqrt(6 / fan_in) for relu
            limit = self.gain * math.sqrt(3.0 / fan_in)
            return tensor.uniform_(-limit, limit, generator=self._generator(tensor))
        return tensor.normal_(0.0, self.gain / math.sqrt(fan_in), generator=self._generator(tensor))


def _gain(nonlinearity, negative_slope):
    """Paddle's ``calculate_gain`` for ``MSRA``: sqrt(2) for relu, 5/3 for tanh, ..."""
    gains = {"sigmoid": 1.0, "linear": 1.0, "conv1d": 1.0, "conv2d": 1.0, "conv3d": 1.0, "conv1d_transpose": 1.0,
             "conv2d_transpose": 1.0, "conv3d_transpose": 1.0, "tanh": 5.0 / 3, "relu": math.sqrt(2.0),
             "leaky_relu": math.sqrt(2.0 / (1 + negative_slope ** 2)), "selu": 3.0 / 4}
    if nonlinearity not in gains:
        raise ValueError(f"MSRA(): nonlinearity must be one of {sorted(gains)}, got {nonlinearity!r}")
    return gains[nonlinearity]


class NumpyArrayInitializer(_Initializer):
    """The values of an array (of the parameter's shape): pre-trained weights.

    >>> import numpy as np, torch
    >>> NumpyArrayInitializer(np.arange(3.0))(torch.empty(3)).tolist()
    [0.0, 1.0, 2.0]
    """

    def __init__(self, value):
        self.value = np.asarray(value)

    def _fill(self, tensor):
        import torch  # noqa: PLC0415

        if tuple(self.value.shape) != tuple(tensor.shape):
            raise ValueError(
                f"NumpyArrayInitializer: the array has shape {list(self.value.shape)} but the parameter "
                f"{list(tensor.shape)}"
            )
        return tensor.copy_(torch.as_tensor(np.array(self.value)))


class L2Decay:
    """``fluid.regularizer.L2Decay(regularization_coeff)``: ``coeff * param`` added to the gradient,
    applied as the ``weight_decay`` of the parameter's group in :meth:`Program.param_groups`.

    >>> L2Decay(1e-4).coeff
    0.0001
    """

    def __init__(self, regularization_coeff=0.0, coeff=None):
        self.coeff = float(regularization_coeff if coeff is None else coeff)

    def __repr__(self):
        return f"L2Decay({self.coeff})"


class ParamAttr:
    """Paddle's ``ParamAttr``: the name, initializer, learning-rate multiplier, L2 decay and
    ``trainable`` flag of a parameter a fluid layer call creates.

    ``name`` picks the parameter by name: two calls with the same name share one parameter,
    as in Paddle. ``learning_rate`` and ``regularizer`` take effect through
    :meth:`Program.param_groups`; ``trainable=False`` makes the parameter
    ``requires_grad=False``.

    >>> ParamAttr(name="emb", trainable=False).name
    'emb'
    """

    def __init__(self, name=None, initializer=None, learning_rate=1.0, regularizer=None, trainable=True,
                 do_model_average=True, need_clip=True):
        if name is not None and not isinstance(name, str):
            raise TypeError(f"ParamAttr(): name must be a str or None, got {type(name).__name__} {name!r}")
        if initializer is not None and not callable(initializer):
            raise TypeError(f"ParamAttr(): initializer must be an initializer, got {initializer!r}")
        if regularizer is not None and not isinstance(regularizer, L2Decay):
            raise TypeError(
                f"ParamAttr(): regularizer must be fluid.regularizer.L2Decay or None, got {regularizer!r}; "
                f"other penalties belong in the loss"
            )
        self.name, self.initializer, self.regularizer = name, initializer, regularizer
        self.learning_rate, self.trainable = float(learning_rate), bool(trainable)
        self.do_model_average, self.need_clip = do_model_average, need_clip

    @staticmethod
    def _to_attr(arg, where, what="param_attr"):
        """Paddle's conversion: None -> defaults, str -> a name, an initializer -> its attr,
        False -> no parameter (bias_attr only), a ParamAttr as it is."""
        if arg is None or arg is True:
            return ParamAttr()
        if arg is False:
            return False
        if isinstance(arg, ParamAttr):
            return arg
        if isinstance(arg, str):
            return ParamAttr(name=arg)
        if isinstance(arg, _Initializer):
            return ParamAttr(initializer=arg)
        raise TypeError(f"{where}: {what} must be a ParamAttr, a name, an initializer, None or False, got {arg!r}")

    def __repr__(self):
        return f"ParamAttr(name={self.name!r}, trainable={self.trainable}, learning_rate={self.learning_rate})"


# Paddle 1.x's longer names
ConstantInitializer, UniformInitializer, NormalInitializer = Constant, Uniform, Normal
TruncatedNormalInitializer, XavierInitializer, MSRAInitializer = TruncatedNormal, Xavier, MSRA
L2DecayRegularizer = L2Decay
