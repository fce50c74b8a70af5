"""``fluid.Program``: a fluid 1.x program as a ``torch.nn.Module``.

The fluid layer calls (``fluid.layers.fc``, ``embedding``, ``dynamic_lstm``, ...) create their
parameters in the program that is running them, under Paddle's generated names. A program
runs when it is called (its ``forward`` is the network-building code) or inside
``with fluid.program_guard(program):``; each run starts Paddle's name counters afresh, so
the ``k``-th ``fc`` call of a run is ``fc_k`` every time: the first run creates
``fc_0.w_0``, ``fc_0.b_0``, ..., later runs find them by name. The parameters live in the
module under those names (``fc_0.w_0`` is the Parameter ``w_0`` of the sub-module ``fc_0``),
so ``state_dict()`` keys are Paddle's and an optimizer sees them all.
"""

import threading
import warnings

import numpy as np
import torch

from ..tensor import LoDTensor
from ._param_attr import Xavier

__all__ = ["Program", "program_guard", "current"]

_LOCAL = threading.local()


class _Scope(torch.nn.Module):
    """A node of the parameter tree: ``fc_0`` in ``fc_0.w_0``."""

    def forward(self, *args, **kwargs):
        raise TypeError("a parameter scope of a fluid.Program holds parameters; it does not run")


class _Frame:
    """One run of a program: its name counters and its feeds."""

    __slots__ = ("program", "counters", "feeds")

    def __init__(self, program, feeds):
        self.program, self.counters, self.feeds = program, {}, dict(feeds or {})

    def unique(self, key):
        """Paddle's ``unique_name.generate(key)``: ``key_0``, ``key_1``, ... within the run."""
        k = self.counters.get(key, 0)
        self.counters[key] = k + 1
        return f"{key}_{k}"


def _stack():
    stack = getattr(_LOCAL, "stack", None)
    if stack is None:
        stack = _LOCAL.stack = []
    return stack


def current(where):
    """The frame of the program running now, or an error saying how to run one."""
    stack = _stack()
    if not stack:
        raise RuntimeError(
            f"{where} creates parameters, so it runs inside a fluid.Program: call it from a program's forward "
            f"(net = fluid.Program(build_fn); net(...), or a subclass of fluid.Program), or inside "
            f"`with fluid.program_guard(program):`"
        )
    return stack[-1]


class program_guard:  # noqa: N801 - Paddle's name
    """Run ``main_program`` for the duration: fluid layer calls create (first run) or reuse its
    parameters. ``startup_program`` is accepted for Paddle's signature; parameters are initialised
    when they are created. Entering the guard starts the name counters afresh (re-entering the
    program that is already running continues its run).

    >>> import numpy as np, torch
    >>> import lodtensor.fluid as fluid
    >>> prog = fluid.Program()
    >>> with fluid.program_guard(prog):
    ...     y = fluid.layers.fc(torch.ones(2, 3), size=4)
    >>> sorted(prog.state_dict())
    ['fc_0.b_0', 'fc_0.w_0']
    """

    def __init__(self, main_program, startup_program=None, *, feed=None):
        if not isinstance(main_program, Program):
            raise TypeError(f"program_guard(): main_program must be a fluid.Program, got {type(main_program).__name__}")
        self.program, self.feed, self.frame = main_program, feed, None

    def __enter__(self):
        stack = _stack()
        if stack and stack[-1].program is self.program and self.feed is None:
            self.frame = None  # a nested call of the running program continues its run
            return self.program
        self.frame = _Frame(self.program, self.feed)
        stack.append(self.frame)
        return self.program

    def __exit__(self, kind, value, tb):
        if self.frame is None:
            return False
        _stack().pop()
        if kind is None:
            self.program._end_of_run()
        return False


def _as_tensor(value, where, name):
    """A checkpoint value (NumPy, torch, LoDTensor) as a torch tensor; NumPy uint16 is bfloat16's
    bits, as Paddle's checkpoints hold a bfloat16 parameter (``load_program_state`` returns them so)."""
    if isinstance(value, LoDTensor):
        value = value.data
    if isinstance(value, torch.Tensor):
        return value.detach()
    try:
        array = np.array(value)
        if array.dtype == np.uint16:
            return torch.from_numpy(array.astype(np.int16, copy=False)).view(torch.bfloat16)
        return torch.as_tensor(array)
    except (TypeError, ValueError):
        raise TypeError(f"{where}: {name} must be an array, got {type(value).__name__}") from None


def _to_numpy(param):
    """A parameter as NumPy; bfloat16 (which NumPy lacks) as its bits in uint16, as Paddle gives it."""
    t = param.detach().cpu()
    if t.dtype == torch.bfloat16:
        return t.view(torch.int16).numpy().view(np.uint16)
    return t.numpy()


class Program(torch.nn.Module):
    """A fluid program as a torch module: the parameters its fluid layer calls create, by Paddle name.

    ``Program(build_fn)`` runs ``build_fn(*args, **kwargs)`` as its forward; a subclass
    overrides ``forward`` instead. Calling the program runs it (see :class:`program_guard`);
    ``net(..., feed={"words": t})`` also makes ``t`` what ``fluid.layers.data(name="words", ...)``
    returns in that run. Parameters are created on the first run, with the input's dtype (or
    the layer's ``dtype=``) on its device: run the program once before making an optimizer.

    A Paddle checkpoint loads by name: ``net.set_state_dict(fluid.io.load_program_state(path))``
    (also before the first run: the values are then used as the parameters are created).

    Examples
    --------
    >>> import numpy as np, torch
    >>> import lodtensor as lt
    >>> import lodtensor.fluid as fluid
    >>> def net(words):
    ...     emb = fluid.layers.embedding(input=words, size=[10, 4])
    ...     return fluid.layers.fc(input=emb, size=2, act="softmax")
    >>> model = fluid.Program(net)
    >>> out = model(lt.LoDTensor(np.array([[1], [2], [3]]), [[0, 1, 3]]))
    >>> out.lod(), [(k, tuple(v.shape)) for k, v in model.state_dict().items()]
    ([[0, 1, 3]], [('embedding_0.w_0', (10, 4)), ('fc_0.w_0', (4, 2)), ('fc_0.b_0', (2,))])
    """

    def __init__(self, build_fn=None):
        super().__init__()
        if build_fn is not None and not callable(build_fn):
            raise TypeError(f"Program(): build_fn must be callable, got {type(build_fn).__name__}")
        self._build_fn = build_fn
        self._paddle_names = []  # creation order
        self._attrs = {}  # name -> ParamAttr
        self._pending = None  # (state, strict) set before the parameters exist

    def forward(self, *args, **kwargs):
        if self._build_fn is None:
            raise TypeError("fluid.Program(): give a build function (Program(build_fn)) or override forward()")
        return self._build_fn(*args, **kwargs)

    def __call__(self, *args, feed=None, **kwargs):
        with program_guard(self, feed=feed):
            return super().__call__(*args, **kwargs)

    # -- parameters by Paddle name ---------------------------------------------------------------
    def _lookup(self, name):
        if name not in self._attrs:
            return None
        return self.get_parameter(name)

    def create_parameter(self, name, shape, dtype, device, attr, default_initializer, where):
        """The parameter ``name`` of ``shape``: found (its shape checked) or made now (from a value
        given to :meth:`set_state_dict` before the first run, else ``attr.initializer``, else
        ``default_initializer``, else Xavier). The fluid layer calls use it; ``where`` names the caller
        in errors.

        >>> import torch
        >>> import lodtensor.fluid as fluid
        >>> prog = fluid.Program()
        >>> w = prog.create_parameter("scale", [2], torch.float32, "cpu", fluid.ParamAttr(),
        ...                           fluid.initializer.Constant(1.0), "example")
        >>> w.tolist(), prog.paddle_names()
        ([1.0, 1.0], ['scale'])
        """
        found = self._lookup(name)
        shape = [int(s) for s in shape]
        if found is not None:
            if list(found.shape) != shape:
                raise ValueError(
                    f"{where}: parameter {name!r} exists with shape {list(found.shape)}, but this call needs "
                    f"{shape}; a ParamAttr name shares one parameter between calls of the same shape"
                )
            return found
        with torch.no_grad():
            value = torch.empty(shape, dtype=dtype, device=device)
            pending = self._pending[0].get(name) if self._pending is not None else None
            if pending is not None:
                self._copy(value, pending, name, "set_state_dict()")  # a bad value stays pending: a rerun says so again
                del self._pending[0][name]
            else:
                if self._pending is not None:
                    self._pending[2].append(name)
                (attr.initializer or default_initializer or Xavier())(value)
        param = torch.nn.Parameter(value, requires_grad=attr.trainable)
        self._register(name, param, where)
        self._paddle_names.append(name)
        self._attrs[name] = attr
        return param

    def _register(self, name, param, where):
        parts = name.split(".")
        if not all(parts):
            raise ValueError(f"{where}: parameter name {name!r} has an empty part between dots")
        node = self
        for depth, part in enumerate(parts[:-1]):
            child = node._modules.get(part)
            if child is None:
                if part in node._parameters or part in node.__dict__ or hasattr(type(node), part):
                    raise ValueError(f"{where}: parameter name {name!r} clashes with {'.'.join(parts[:depth + 1])!r}")
                child = _Scope()
                node.add_module(part, child)
            elif not isinstance(child, _Scope):
                raise ValueError(f"{where}: parameter name {name!r} clashes with the sub-module {part!r}")
            node = child
        leaf = parts[-1]
        if leaf in node._modules or leaf in node.__dict__ or hasattr(type(node), leaf):
            raise ValueError(f"{where}: parameter name {name!r} clashes with an attribute of the program")
        node.register_parameter(leaf, param)

    def paddle_names(self):
        """The Paddle names of the parameters, in creation order (Paddle's program order).

        >>> import torch
        >>> import lodtensor.fluid as fluid
        >>> net = fluid.Program(lambda x: fluid.layers.fc(fluid.layers.fc(x, size=3), size=2))
        >>> _ = net(torch.ones(1, 4))
        >>> net.paddle_names()
        ['fc_0.w_0', 'fc_0.b_0', 'fc_1.w_0', 'fc_1.b_0']
        """
        return list(self._paddle_names)

    def program_state(self):
        """``{name: ndarray}`` of every parameter, as ``paddle.static.load_program_state`` returns
        (bfloat16 as its bits, uint16, as Paddle); ``fluid.io.save_combine(net.program_state(), path)``
        writes a Paddle checkpoint.

        >>> import torch
        >>> import lodtensor.fluid as fluid
        >>> net = fluid.Program(lambda x: fluid.layers.fc(x, size=2, bias_attr=False))
        >>> _ = net(torch.ones(1, 3))
        >>> {k: v.shape for k, v in net.program_state().items()}
        {'fc_0.w_0': (3, 2)}
        """
        return {n: _to_numpy(self.get_parameter(n)) for n in self._paddle_names}

    # -- loading ---------------------------------------------------------------------------------
    @staticmethod
    def _checked(param, value, name, where):
        """``value`` as a tensor ready to copy into ``param`` (its shape checked, nothing written)."""
        t = _as_tensor(value, where, repr(name))
        if tuple(t.shape) != tuple(param.shape):
            raise ValueError(
                f"{where}: {name!r} has shape {list(t.shape)} in the state but {list(param.shape)} in the program"
            )
        return t.to(device=param.device, dtype=param.dtype)

    @classmethod
    def _copy(cls, param, value, name, where):
        param.copy_(cls._checked(param, value, name, where))

    def set_state_dict(self, state_dict, strict=True):
        """Load ``{paddle_name: array}`` (NumPy, torch or LoDTensor values, e.g.
        ``fluid.io.load_program_state(path)``) into the parameters of those names.

        Returns ``(missing, unexpected)``: parameters the state lacks, names the program lacks.
        With ``strict`` either raises ``ValueError`` naming them. Called before the program's
        first run, the values are kept and used as the parameters are created; the check then
        runs at the end of that first run.

        >>> import numpy as np, torch
        >>> import lodtensor.fluid as fluid
        >>> net = fluid.Program(lambda x: fluid.layers.fc(x, size=1, bias_attr=False))
        >>> net.set_state_dict({"fc_0.w_0": np.array([[2.0], [3.0]], "float32")})
        ([], [])
        >>> net(torch.ones(1, 2)).tolist()
        [[5.0]]
        """
        state = dict(state_dict)
        if not self._paddle_names:
            self._pending = (state, bool(strict), [])
            return [], []
        missing = [n for n in self._paddle_names if n not in state]
        unexpected = [n for n in state if n not in self._attrs]
        if strict:
            self._check_names(missing, unexpected, "set_state_dict()")
        # every value checked before the first is written: a bad one leaves every parameter as it was
        ready = [(self.get_parameter(n), self._checked(self.get_parameter(n), state[n], n, "set_state_dict()"))
                 for n in self._paddle_names if n in state]
        with torch.no_grad():
            for param, value in ready:
                param.copy_(value)
        return missing, unexpected

    def load_program_state(self, state, strict=True):
        """Same as :meth:`set_state_dict` (the name of ``paddle.static.set_program_state``'s input).

        >>> import numpy as np, torch
        >>> import lodtensor.fluid as fluid
        >>> net = fluid.Program(lambda x: fluid.layers.fc(x, size=1, bias_attr=False))
        >>> net.load_program_state({"fc_0.w_0": np.ones((2, 1), "float32")})
        ([], [])
        >>> net(torch.ones(1, 2)).tolist()
        [[2.0]]
        """
        return self.set_state_dict(state, strict=strict)

    @staticmethod
    def _check_names(missing, unexpected, where):
        def show(names):
            return ", ".join(repr(n) for n in names[:8]) + (", ..." if len(names) > 8 else "")

        if unexpected:
            raise ValueError(f"{where}: the state has names this program does not create: {show(unexpected)}")
        if missing:
            raise ValueError(f"{where}: the state lacks parameters of this program: {show(missing)}")

    def _end_of_run(self):
        if self._pending is None:
            return
        rest, strict, missing = self._pending
        self._pending = None
        if strict:
            self._check_names(missing, sorted(rest), "set_state_dict() (checked after the first run)")
        elif rest:
            warnings.warn(f"set_state_dict(): names the program did not create: {sorted(rest)[:8]}", stacklevel=3)

    # -- training --------------------------------------------------------------------------------
    def param_groups(self, learning_rate):
        """torch optimizer parameter groups honouring each ``ParamAttr``: ``lr`` is ``learning_rate``
        times the attr's ``learning_rate``, ``weight_decay`` its ``L2Decay`` coefficient; parameters
        with ``trainable=False`` are left out.

        >>> import torch
        >>> import lodtensor.fluid as fluid
        >>> net = fluid.Program(lambda x: fluid.layers.fc(x, size=2, param_attr=fluid.ParamAttr(learning_rate=2.0)))
        >>> _ = net(torch.ones(1, 3))
        >>> sorted((g["lr"], len(g["params"])) for g in net.param_groups(0.1))
        [(0.1, 1), (0.2, 1)]
        """
        groups = {}
        for name in self._paddle_names:
            attr = self._attrs[name]
            if not attr.trainable:
                continue
            decay = attr.regularizer.coeff if attr.regularizer is not None else 0.0
            key = (attr.learning_rate, decay)
            groups.setdefault(key, []).append(self.get_parameter(name))
        return [{"params": ps, "lr": learning_rate * lr, "weight_decay": decay} for (lr, decay), ps in groups.items()]
