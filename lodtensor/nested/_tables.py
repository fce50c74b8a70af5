"""The pointwise ops as data: NumPy name, torch name, dtype rule and parameters of each.

Names, not objects, so that building the tables imports neither torch nor
cupy. ``_pointwise.py`` turns every entry into ``ln.<name>``, a NestedTensor
method, the torch names' ``__torch_function__`` entries and ``<name>_`` in place;
:func:`_params` and :func:`_bind` read and bind an entry's parameters.
"""

import numbers

__all__ = ["UNARY", "BINARY", "ALIASES", "POLYNOMIALS", "BOOL_REFUSALS", "COMPLEX_REFUSALS", "ARG_RULES", "SCALAR_ARGS"]

# The dtype rule of an op: what integer and bool inputs give, as in torch 2.13.
#   float  a floating result (integers and bools compute in float32)
#   int    keeps integer dtypes, refuses bool
#   real   as int, and refuses complex
#   any    keeps every dtype
#   bool   a bool result
#   fp     floating inputs only
#   fpi    integers compute in float32, bool refused
#   sq     keeps integers, bool becomes int64
#   bits   integers and bools only, dtype kept (bitwise ops; floats refused)

_REQUIRED = object()  # a parameter without a default (``threshold``'s ``threshold`` and ``value``)


def _params(spec):
    """``"alpha=1.0, inplace=False"`` -> ``[("alpha", 1.0), ("inplace", False)]``; a bare name is required."""
    import ast  # noqa: PLC0415 - once per table entry at import

    if not spec:
        return []
    call = ast.parse(f"f({spec})", mode="eval").body
    return [(a.id, _REQUIRED) for a in call.args] + [(kw.arg, ast.literal_eval(kw.value)) for kw in call.keywords]


def _bind(name, params, args, kwargs):
    if len(args) > len(params):
        raise TypeError(f"{name}() takes at most {len(params) + 1} positional arguments, got {len(args) + 1}")
    bound = dict(params)
    for (key, _), value in zip(params, args):
        bound[key] = value
    for key, value in kwargs.items():
        if key not in bound:
            raise TypeError(f"{name}() got an unexpected keyword argument {key!r}")
        bound[key] = value
    missing = [key for key, value in bound.items() if value is _REQUIRED]
    if missing:
        raise TypeError(f"{name}() missing required argument(s) {', '.join(map(repr, missing))}")
    return bound


#: name: (NumPy name, torch path from ``torch``, dtype rule, parameters after the input)
UNARY = {
    "abs": ("absolute", "abs", "int", ""),
    "acos": ("arccos", "acos", "float", ""),
    "acosh": ("arccosh", "acosh", "float", ""),
    "angle": ("angle", "angle", "float", ""),
    "asin": ("arcsin", "asin", "float", ""),
    "asinh": ("arcsinh", "asinh", "float", ""),
    "atan": ("arctan", "atan", "float", ""),
    "atanh": ("arctanh", "atanh", "float", ""),
    "bitwise_not": ("invert", "bitwise_not", "bits", ""),
    "ceil": ("ceil", "ceil", "int", ""),
    "conj": ("conj", "conj", "any", ""),
    "cos": ("cos", "cos", "float", ""),
    "cosh": ("cosh", "cosh", "float", ""),
    "deg2rad": ("deg2rad", "deg2rad", "float", ""),
    "digamma": ("digamma", "digamma", "float", ""),
    "erf": ("erf", "erf", "float", ""),
    "erfc": ("erfc", "erfc", "float", ""),
    "erfinv": ("erfinv", "erfinv", "float", ""),
    "exp": ("exp", "exp", "float", ""),
    "exp2": ("exp2", "exp2", "float", ""),
    "expm1": ("expm1", "expm1", "float", ""),
    "fix": ("trunc", "fix", "int", ""),
    "floor": ("floor", "floor", "int", ""),
    "frac": ("frac", "frac", "fp", ""),
    "i0": ("i0", "i0", "float", ""),
    "isfinite": ("isfinite", "isfinite", "bool", ""),
    "isinf": ("isinf", "isinf", "bool", ""),
    "isnan": ("isnan", "isnan", "bool", ""),
    "isneginf": ("isneginf", "isneginf", "bool", ""),
    "isposinf": ("isposinf", "isposinf", "bool", ""),
    "lgamma": ("lgamma", "lgamma", "float", ""),
    "log": ("log", "log", "float", ""),
    "log10": ("log10", "log10", "float", ""),
    "log1p": ("log1p", "log1p", "float", ""),
    "log2": ("log2", "log2", "float", ""),
    "logical_not": ("logical_not", "logical_not", "bool", ""),
    "logit": ("logit", "logit", "float", "eps=None"),
    "nan_to_num": ("nan_to_num", "nan_to_num", "any", "nan=0.0, posinf=None, neginf=None"),
    "neg": ("negative", "neg", "int", ""),
    "positive": ("positive", "positive", "int", ""),
    "rad2deg": ("rad2deg", "rad2deg", "float", ""),
    "reciprocal": ("reciprocal", "reciprocal", "float", ""),
    "round": ("round", "round", "int", "decimals=0"),
    "rsqrt": ("rsqrt", "rsqrt", "float", ""),
    "sgn": ("sgn", "sgn", "any", ""),
    "sigmoid": ("sigmoid", "sigmoid", "float", ""),
    "sign": ("sign", "sign", "any", ""),
    "signbit": ("signbit", "signbit", "bool", ""),
    "sin": ("sin", "sin", "float", ""),
    "sinc": ("sinc", "sinc", "float", ""),
    "sinh": ("sinh", "sinh", "float", ""),
    "sqrt": ("sqrt", "sqrt", "float", ""),
    "square": ("square", "square", "sq", ""),
    "tan": ("tan", "tan", "float", ""),
    "tanh": ("tanh", "tanh", "float", ""),
    "trunc": ("trunc", "trunc", "int", ""),
    # torch.nn.functional's activations
    "relu": ("relu", "relu", "int", "inplace=False"),
    "relu6": ("relu6", "nn.functional.relu6", "int", "inplace=False"),
    "hardtanh": ("hardtanh", "nn.functional.hardtanh", "int", "min_val=-1.0, max_val=1.0, inplace=False"),
    "gelu": ("gelu", "nn.functional.gelu", "fp", "approximate='none'"),
    "silu": ("silu", "nn.functional.silu", "fp", "inplace=False"),
    "elu": ("elu", "nn.functional.elu", "fp", "alpha=1.0, inplace=False"),
    "selu": ("selu", "nn.functional.selu", "fp", "inplace=False"),
    "celu": ("celu", "nn.functional.celu", "fp", "alpha=1.0, inplace=False"),
    "mish": ("mish", "nn.functional.mish", "fp", "inplace=False"),
    "softplus": ("softplus", "nn.functional.softplus", "fp", "beta=1.0, threshold=20.0"),
    "hardsigmoid": ("hardsigmoid", "nn.functional.hardsigmoid", "fp", "inplace=False"),
    "leaky_relu": ("leaky_relu", "nn.functional.leaky_relu", "fp", "negative_slope=0.01, inplace=False"),
    "tanhshrink": ("tanhshrink", "nn.functional.tanhshrink", "fpi", ""),
    "softsign": ("softsign", "nn.functional.softsign", "fpi", ""),
    "hardshrink": ("hardshrink", "nn.functional.hardshrink", "fp", "lambd=0.5"),
    "softshrink": ("softshrink", "nn.functional.softshrink", "fp", "lambd=0.5"),
    "threshold": ("threshold", "nn.functional.threshold", "real", "threshold, value, inplace=False"),
    "conj_physical": ("conj", "conj_physical", "any", ""),
    "mvlgamma": ("mvlgamma", "mvlgamma", "float", "p=None"),
    # torch.special's functions (NumPy: SciPy's, see backend.numpy._special.SCIPY_SPECIAL)
    **{
        name: (name, f"special.{name}", "float", "")
        for name in (
            "airy_ai", "bessel_j0", "bessel_j1", "bessel_y0", "bessel_y1", "modified_bessel_i0",
            "modified_bessel_i1", "modified_bessel_k0", "modified_bessel_k1", "scaled_modified_bessel_k0",
            "scaled_modified_bessel_k1", "spherical_bessel_j0", "i0e", "i1", "i1e", "erfcx", "log_ndtr", "ndtr",
            "ndtri", "entr",
        )
    },
}

# Binary dtype rules: promote (torch's promotion), float (then integers -> float32), compare (bool
# result of promoted operands), bool (logical: bool result), fp (floating operands only), bits
# (integer or bool operands only, promoted).
#: name: (NumPy name, torch path, dtype rule, scalar operand allowed)
BINARY = {
    "add": ("add", "add", "promote", True),
    "sub": ("subtract", "sub", "promote", True),
    "mul": ("multiply", "mul", "promote", True),
    "div": ("true_divide", "div", "float", True),
    "remainder": ("remainder", "remainder", "promote", True),
    "fmod": ("fmod", "fmod", "promote", True),
    "pow": ("power", "pow", "promote", True),
    "atan2": ("arctan2", "atan2", "float", False),
    "maximum": ("maximum", "maximum", "promote", False),
    "minimum": ("minimum", "minimum", "promote", False),
    "fmax": ("fmax", "fmax", "promote", False),
    "fmin": ("fmin", "fmin", "promote", False),
    "hypot": ("hypot", "hypot", "fp", False),
    "copysign": ("copysign", "copysign", "float", True),
    "logaddexp": ("logaddexp", "logaddexp", "fp", False),
    "logaddexp2": ("logaddexp2", "logaddexp2", "fp", False),
    "nextafter": ("nextafter", "nextafter", "fp", False),
    "xlogy": ("xlogy", "xlogy", "float", True),
    "eq": ("equal", "eq", "compare", True),
    "ne": ("not_equal", "ne", "compare", True),
    "lt": ("less", "lt", "compare", True),
    "le": ("less_equal", "le", "compare", True),
    "gt": ("greater", "gt", "compare", True),
    "ge": ("greater_equal", "ge", "compare", True),
    "logical_and": ("logical_and", "logical_and", "bool", False),
    "logical_or": ("logical_or", "logical_or", "bool", False),
    "logical_xor": ("logical_xor", "logical_xor", "bool", False),
    "bitwise_and": ("bitwise_and", "bitwise_and", "bits", True),
    "bitwise_or": ("bitwise_or", "bitwise_or", "bits", True),
    "bitwise_xor": ("bitwise_xor", "bitwise_xor", "bits", True),
    "bitwise_left_shift": ("left_shift", "bitwise_left_shift", "bits", True),
    "bitwise_right_shift": ("right_shift", "bitwise_right_shift", "bits", True),
    "xlog1py": ("xlog1py", "special.xlog1py", "float", True),
    "zeta": ("zeta", "special.zeta", "float", True),
    "igamma": ("gammainc", "igamma", "fp", False),
    "igammac": ("gammaincc", "igammac", "fp", False),
}

#: torch.special's orthogonal polynomials ``f(x, n)`` of degree ``n``, as binary ops (nested, scalar or dense ``x``
#: and ``n``; integers compute in float32): name -> (backend name, torch path, dtype rule, scalar operand allowed)
POLYNOMIALS = {
    name: (name, f"special.{name}", "float", True)
    for name in (*(f"{kind}_polynomial_{c}" for kind in ("chebyshev", "shifted_chebyshev") for c in "tuvw"),
                 "hermite_polynomial_h", "hermite_polynomial_he", "laguerre_polynomial_l", "legendre_polynomial_p")
}

#: torch.div with a rounding mode: the promoted dtype, not float (not registered on their own).
_SPECS = {
    **BINARY,
    "div_trunc": ("div_trunc", "div", "promote", True),
    "div_floor": ("div_floor", "div", "promote", True),
    # ``_more_ops``' binary ops (their own dtype checks first; not in BINARY, which the tables' tests sweep)
    "float_power": ("float_power", "float_power", "promote", True),
    "heaviside": ("heaviside", "heaviside", "promote", False),
    "gcd": ("gcd", "gcd", "promote", False),
    "lcm": ("lcm", "lcm", "promote", False),
    **POLYNOMIALS,  # (``_more_pointwise`` registers them)
}

#: torch's other names for table ops.
ALIASES = {
    "sub": ("subtract", "__sub__"), "mul": ("multiply", "__mul__", "__rmul__"), "neg": ("negative",),
    "div": ("divide", "true_divide", "__truediv__"), "add": ("__add__", "__radd__"), "pow": ("__pow__",),
    "abs": ("absolute",), "acos": ("arccos",), "asin": ("arcsin",), "atan": ("arctan",),
    "acosh": ("arccosh",), "asinh": ("arcsinh",), "atanh": ("arctanh",), "atan2": ("arctan2",),
    "clamp": ("clip",), "sigmoid": ("special.expit",), "logit": ("special.logit",),
    "digamma": ("special.psi",), "lgamma": ("special.gammaln",), "mvlgamma": ("special.multigammaln",),
    "igamma": ("special.gammainc",), "igammac": ("special.gammaincc",),
    "eq": ("__eq__",), "ne": ("__ne__",), "lt": ("__lt__", "less"), "le": ("__le__", "less_equal"),
    "gt": ("__gt__", "greater"), "ge": ("__ge__", "greater_equal"),
    "bitwise_not": ("__invert__",), "bitwise_and": ("__and__", "__rand__"),
    "bitwise_left_shift": ("__lshift__",), "bitwise_right_shift": ("__rshift__",),
    "bitwise_or": ("__or__", "__ror__"), "bitwise_xor": ("__xor__", "__rxor__"), "remainder": ("__mod__",),
}  # fmt: skip


#: torch's own words where it refuses bool input.
BOOL_REFUSALS = {
    "neg": "Negation, the `-` operator, on a bool tensor is not supported. If you are trying to invert a mask, "
    "use the `~` or `logical_not()` operator instead.",
    "relu": "Boolean inputs not supported for relu",
}

_CLAMP = "clamp is not supported for complex types"

#: ops torch 2.13 refuses for complex data, where NumPy computes on (ordering comparisons by real part,
#: then imaginary; a complex erf, gelu, round...): name -> torch's words, or "" for its '"name" not
#: implemented for 'ComplexFloat''. A complex operand anywhere (a Python complex too) is refused.
COMPLEX_REFUSALS = {
    **dict.fromkeys(("lt", "le", "gt", "ge", "airy_ai", "celu", "digamma", "elu", "erf", "erfc", "erfcx", "gelu",
                     "hardshrink", "hardsigmoid", "leaky_relu", "log_ndtr", "logit", "mish", "ndtr", "round",
                     "selu", "softplus", "softshrink", "spherical_bessel_j0", "zeta"), ""),
    **dict.fromkeys(("maximum", "minimum", "fmax", "fmin"), "{} not implemented for complex tensors."),
    **dict.fromkeys(("relu", "relu6", "hardtanh"), _CLAMP),
    "sign": "Unlike NumPy, torch.sign is not intended to support complex numbers. Please use torch.sgn instead.",
}

#: torch's checks of an activation's arguments (the NumPy kernels would compute on regardless: NaN for
#: celu's alpha=0, a constant for hardtanh's min_val > max_val), run before any op, in place or not:
#: name -> fn(bound arguments) -> None, or (the refused argument, what torch says of it)
ARG_RULES = {
    "hardtanh": lambda a: a["min_val"] > a["max_val"] and (
        "min_val", f"min_val cannot be greater than max_val, got min_val={a['min_val']}, max_val={a['max_val']}"),
    "celu": lambda a: a["alpha"] == 0 and ("alpha", f"alpha cannot be 0 for CELU, got alpha={a['alpha']}"),
    "softshrink": lambda a: a["lambd"] < 0 and ("lambd", f"lambda must be in range [0, inf), but found {a['lambd']}"),
    "gelu": lambda a: a["approximate"] not in ("none", "tanh") and (
        "approximate", f"approximate argument must be either none or tanh, got {a['approximate']!r}"),
    "mvlgamma": lambda a: isinstance(a["p"], numbers.Real) and a["p"] < 1 and (
        "p", f"p has to be greater than or equal to 1, got p={a['p']}"),
}

#: arguments torch converts to the input's dtype before computing, refusing a value the type cannot hold
#: (:func:`._dtypes.checked_scalar`): name -> {argument: whether to the type the op computes in (opmath)}
SCALAR_ARGS = {"threshold": {"threshold": True, "value": False}}
