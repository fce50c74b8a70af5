"""Which torch functions keep the rows of a LoDTensor: the declared table behind ``__torch_function__``.

A LoDTensor's lod describes its rows (dim 0 of the data). A torch function's
result may keep that lod only when **result row i is a function of input row i
alone**: a pointwise op, a reduction or softmax over a feature dim, a linear
layer. Anything that moves, selects, mixes or reshapes rows (a softmax or sort
over dim 0, ``index_select(t, 0, perm)``, ``roll``, ``flipud``, a broadcast
that puts new dims in front) must not. Which case a call is depends on the
dims it acts on, so every entry here says where its dim arguments sit; torch's
functions take them at different positions and names (``topk(input, k, dim)``,
``roll(input, shifts, dims)``), and some have none (``msort`` and ``flipud`` act
on dim 0, ``tril`` on the last two).

Names, not function objects: ``torch.<name>``, ``Tensor.<name>`` (as ``plain +
t`` dispatches it), ``torch.nn.functional.<name>`` and the in-place
``<name>_`` share an entry when they share the argument layout. Where a
module's function of the same name takes other arguments, ``QUALIFIED`` says
so. A function in no table is **unknown**: its result is returned as plain
torch data, never with the lod (the safe default).

Rule forms (``carriers`` lists the ``(parameter, position)`` slots whose rows
are the input rows; a LoDTensor anywhere else gives plain data):

- ``EW``: elementwise with broadcasting; every tensor argument is a carrier.
  The lod is kept when each LoDTensor argument has the result's rank and row
  count (an operand that broadcasts the result to new leading dims gives plain data).
- ``("dim", [(param, position, default), ...], carriers, mode)``: acts along
  the dims those arguments name. The lod is kept when dim 0 is not among
  them. ``default`` applies when the argument is absent: ``None`` means every
  dim (a full reduction, a flattened ``roll``), ``REQUIRED`` that torch
  insists on it, ``"softmax"`` torch's legacy implicit softmax dim, ``"size3"``
  the first dim of size 3 (``cross``), ``"fftn"`` every dim or the last
  ``len(s)``. ``mode``: ``"new"`` counts dims of the result, one more than
  the input (``stack``, ``diag_embed``); ``"except"`` acts on every dim but
  the named one (``renorm``).
- ``("fixed", dims)``: acts on these dims, or ``"all"``; ``("last", k,
  carriers)``: on the last ``k`` dims when the input has at least ``k``;
  ``("ndim", {ndim: dims}, dims_otherwise, carriers)``: dims by input rank
  (``hstack``, ``dstack``, ``hsplit``).
- ``("trailing", param, position, per)``: acts on the last
  ``len(value) // per`` dims (``layer_norm``'s ``normalized_shape``);
  ``("pad",)``: on the dims whose ``(left, right)`` pad pair is not zero.
- ``("map", carriers, extra)``: maps each row of a carrier on its own
  (``linear``, ``embedding``, and writes that leave every row in place:
  ``index_fill``, ``scatter``, ``tril``); the result has the carrier's rank
  plus ``extra`` (None: any rank, ``diag``).
- ``("batched", k)``: row-wise when the input has ``k`` spatial dims plus
  batch and channel (``conv1d`` on ``(N, C, L)``); an unbatched input's dim 0
  is its channels, which a convolution mixes.
- ``("flag", param, position)``: mixes rows when the flag is true
  (``batch_norm`` in training uses batch statistics).
- ``("reshape",)``: order-preserving reshapes: the lod is kept when the
  result's dim 0 still has the input's row count.
- ``("maxmin",)``, ``("where",)``, ``("matmul", lhs, rhs)``, ``("movedim",)``,
  ``("permute",)``, ``("swap", (param, position), (param, position))``: the
  overloads and permutations these functions have.
"""

__all__ = ["RULES", "QUALIFIED", "ADVICE", "REQUIRED"]

REQUIRED = "required"
EW = ("ew",)
_IN = (("input", 0),)
_TWO = (("input", 0), ("other", 1))
_LIST = (("tensors", 0),)  # a list of tensors: every element is a carrier
_WRITES = ("map", (("input", 0),), 0)


def _dim(position, default=REQUIRED, param="dim", carriers=_IN, mode=""):
    return ("dim", ((param, position, default),), carriers, mode)


# -- elementwise (torch's pointwise tag, their aliases, activations, dropout, dtype/device moves) -------------
_POINTWISE = """
abs absolute acos acosh angle arccos arccosh arcsin arcsinh arctan arctan2 arctanh asin asinh atan atan2 atanh
addcdiv addcmul add bitwise_and bitwise_left_shift bitwise_not bitwise_or bitwise_right_shift bitwise_xor
ceil clamp clamp_max clamp_min clip clone complex conj conj_physical copysign cos cosh deg2rad digamma div divide
eq erf erfc erfinv exp exp2 expm1 fix float_power floor floor_divide fmax fmin fmod frac frexp gcd ge greater
greater_equal gt heaviside hypot i0 igamma igammac imag isclose isfinite isinf isnan isneginf isposinf isreal
lcm ldexp le lerp less less_equal lgamma log log10 log1p log2 logaddexp logaddexp2 logical_and logical_not
logical_or logical_xor logit lt masked_fill maximum minimum mul multiply mvlgamma nan_to_num ne neg negative
nextafter not_equal polar polygamma positive pow rad2deg real reciprocal remainder round rsqrt rsub sgn sigmoid
sign signbit sin sinc sinh sqrt square sub subtract tan tanh true_divide trunc xlogy
special_airy_ai special_bessel_j0 special_bessel_j1 special_bessel_y0 special_bessel_y1 special_digamma
special_entr special_erf special_erfc special_erfcx special_erfinv special_exp2 special_expit special_expm1
special_gammainc special_gammaincc special_gammaln special_i0 special_i0e special_i1 special_i1e special_log1p
special_log_ndtr special_logit special_modified_bessel_i0 special_modified_bessel_i1 special_modified_bessel_k0
special_modified_bessel_k1 special_multigammaln special_ndtr special_ndtri special_polygamma special_psi
special_round special_scaled_modified_bessel_k0 special_scaled_modified_bessel_k1 special_sinc
special_spherical_bessel_j0 special_xlog1py special_xlogy special_zeta
relu relu6 elu celu selu gelu silu mish hardtanh hardsigmoid hardswish hardshrink softshrink tanhshrink softplus
softsign leaky_relu log_sigmoid rrelu threshold _threshold prelu
dropout dropout1d dropout2d dropout3d alpha_dropout feature_alpha_dropout feature_dropout native_dropout bernoulli
poisson zeros_like ones_like empty_like full_like rand_like randn_like randint_like detach to type_as expand_as
expand_copy broadcast_to broadcast_tensors tile resolve_conj resolve_neg
__floordiv__ __rfloordiv__ __rsub__ __rdiv__ __rmod__ __rpow__ __and__ __iand__ __or__ __ior__ __xor__ __ixor__
__lshift__ __rlshift__ __ilshift__ __rshift__ __rrshift__ __irshift__
"""
# in-place twins that a LoDTensor can reach: torch.relu_(t), F.elu_(t), x.add_(t) (t as the other operand)
_INPLACE = """
abs_ acos_ acosh_ alpha_dropout_ arccos_ arccosh_ arcsin_ arcsinh_ arctan_ arctanh_ asin_ asinh_ atan_ atanh_
ceil_ celu_ clamp_ clamp_max_ clamp_min_ clip_ conj_physical_ cos_ cosh_ deg2rad_ detach_ dropout_ elu_ erf_ erfc_
exp2_ exp_ expm1_ feature_alpha_dropout_ feature_dropout_ fix_ floor_ frac_ gcd_ hardtanh_ i0_ lcm_ ldexp_
leaky_relu_ log10_ log1p_ log2_ log_ logit_ nan_to_num_ neg_ negative_ rad2deg_ reciprocal_ relu_ round_ rrelu_
rsqrt_ selu_ sigmoid_ sin_ sinc_ sinh_ sqrt_ square_ tan_ tanh_ threshold_ trunc_ xlogy_
add_ addcdiv_ addcmul_ arctan2_ atan2_ bitwise_and_ bitwise_left_shift_ bitwise_or_ bitwise_right_shift_
bitwise_xor_ copysign_ div_ divide_ eq_ float_power_ floor_divide_ fmod_ ge_ greater_ greater_equal_ gt_
heaviside_ hypot_ igamma_ igammac_ le_ lerp_ less_ less_equal_ logical_and_ logical_or_ logical_xor_ lt_
masked_fill_ mul_ multiply_ ne_ nextafter_ not_equal_ pow_ remainder_ sub_ subtract_ true_divide_ bernoulli_
"""

_REDUCTIONS = {  # (position of dim, its default); None: every dim when absent
    "sum": (1, None), "nansum": (1, None), "mean": (1, None), "nanmean": (1, None), "prod": (1, None),
    "all": (1, None), "any": (1, None), "amax": (1, None), "amin": (1, None), "argmax": (1, None),
    "argmin": (1, None), "count_nonzero": (1, None), "logsumexp": (1, REQUIRED),
    "special_logsumexp": (1, REQUIRED), "std": (1, None), "var": (1, None), "std_mean": (1, None),
    "var_mean": (1, None), "median": (1, None), "nanmedian": (1, None), "mode": (1, -1), "kthvalue": (2, -1),
    "quantile": (2, None), "nanquantile": (2, None), "norm": (2, None), "linalg_norm": (2, None),
    "linalg_vector_norm": (2, None), "linalg_matrix_norm": (2, (-2, -1)), "aminmax": (None, None),
    "frobenius_norm": (1, None), "nuclear_norm": (1, None), "hash_tensor": (1, None),
}  # fmt: skip
_ALONG = {  # functions acting along one dim (or a dims tuple): (parameter, position, default)
    "cumsum": ("dim", 1, REQUIRED), "cumprod": ("dim", 1, REQUIRED), "cummax": ("dim", 1, REQUIRED),
    "cummin": ("dim", 1, REQUIRED), "logcumsumexp": ("dim", 1, REQUIRED),
    "cumulative_trapezoid": ("dim", None, -1), "trapezoid": ("dim", None, -1), "trapz": ("dim", None, -1),
    "diff": ("dim", 2, -1), "gradient": ("dim", None, None),
    "softmax": ("dim", 1, "softmax"), "log_softmax": ("dim", 1, "softmax"), "softmin": ("dim", 1, "softmax"),
    "special_softmax": ("dim", 1, REQUIRED), "special_log_softmax": ("dim", 1, REQUIRED),
    "gumbel_softmax": ("dim", 4, -1), "glu": ("dim", 1, -1), "normalize": ("dim", 2, 1),
    "sort": ("dim", 1, -1), "argsort": ("dim", 1, -1), "topk": ("dim", 2, -1),
    "flip": ("dims", 1, REQUIRED), "roll": ("dims", 2, None), "rot90": ("dims", 2, (0, 1)),
    "index_select": ("dim", 1, REQUIRED), "gather": ("dim", 1, REQUIRED),
    "take_along_dim": ("dim", 2, None), "repeat_interleave": ("dim", 2, None),
    "narrow": ("dim", 1, REQUIRED), "narrow_copy": ("dim", 1, REQUIRED), "select": ("dim", 1, REQUIRED),
    "select_copy": ("dim", 1, REQUIRED), "slice_copy": ("dim", 1, 0),
    "split": ("dim", 2, 0), "split_with_sizes": ("dim", 2, 0), "unsafe_split": ("dim", 2, 0),
    "unsafe_split_with_sizes": ("dim", 2, 0), "split_copy": ("dim", 2, 0), "split_with_sizes_copy": ("dim", 2, 0),
    "tensor_split": ("dim", 2, 0), "chunk": ("dim", 2, 0), "unsafe_chunk": ("dim", 2, 0),
    "unbind": ("dim", 1, 0), "unbind_copy": ("dim", 1, 0), "unfold_copy": ("dimension", 1, REQUIRED),
    "fft_fft": ("dim", 2, -1), "fft_ifft": ("dim", 2, -1), "fft_rfft": ("dim", 2, -1), "fft_irfft": ("dim", 2, -1),
    "fft_hfft": ("dim", 2, -1), "fft_ihfft": ("dim", 2, -1),
    "fft_fft2": ("dim", 2, (-2, -1)), "fft_ifft2": ("dim", 2, (-2, -1)), "fft_rfft2": ("dim", 2, (-2, -1)),
    "fft_irfft2": ("dim", 2, (-2, -1)), "fft_hfft2": ("dim", 2, (-2, -1)), "fft_ihfft2": ("dim", 2, (-2, -1)),
    "fft_fftn": ("dim", 2, "fftn"), "fft_ifftn": ("dim", 2, "fftn"), "fft_rfftn": ("dim", 2, "fftn"),
    "fft_irfftn": ("dim", 2, "fftn"), "fft_hfftn": ("dim", 2, "fftn"), "fft_ihfftn": ("dim", 2, "fftn"),
    "fft_fftshift": ("dim", 1, None), "fft_ifftshift": ("dim", 1, None),
}  # fmt: skip

RULES = {name: EW for name in _POINTWISE.split()}
RULES.update({name: EW for name in _INPLACE.split()})
RULES.update({name: ("dim", (("dim", pos, default),), _IN, "red") for name, (pos, default) in _REDUCTIONS.items()})
RULES.update({name: _dim(pos, default, param) for name, (param, pos, default) in _ALONG.items()})
RULES.update({
    "max": ("maxmin",), "min": ("maxmin",), "where": ("where",),
    "msort": ("fixed", (0,)), "flipud": ("fixed", (0,)), "fliplr": ("fixed", (1,)), "vsplit": ("fixed", (0,)),
    "dsplit": ("fixed", (2,)), "trace": ("fixed", "all"),
    "t": ("last", 2, _IN), "t_copy": ("last", 2, _IN), "adjoint": ("last", 2, _IN),
    "pairwise_distance": ("last", 1, (("x1", 0), ("x2", 1))),
    "hsplit": ("ndim", {1: (0,)}, (1,), _IN),
    "cat": _dim(1, 0, carriers=_LIST), "concat": _dim(1, 0, carriers=_LIST), "concatenate": _dim(1, 0, "axis", _LIST),
    "stack": _dim(1, 0, carriers=_LIST, mode="new"),
    "hstack": ("ndim", {1: (0,)}, (), _LIST), "vstack": ("fixed", (0,)), "row_stack": ("fixed", (0,)),
    "dstack": ("ndim", {1: (0,)}, (), _LIST), "column_stack": ("ndim", {}, (), _LIST),
    "cosine_similarity": _dim(2, 1, carriers=(("x1", 0), ("x2", 1))),
    "cross": _dim(2, "size3", carriers=_TWO), "linalg_cross": _dim(None, -1, carriers=_TWO),
    "linalg_vecdot": _dim(None, -1, carriers=(("x", 0), ("y", 1))),
    "renorm": _dim(2, mode="except"), "norm_except_dim": _dim(2, 0, mode="except"),
    "diagonal": ("dim", (("dim1", 2, 0), ("dim2", 3, 1)), _IN, ""),
    "diagonal_copy": ("dim", (("dim1", 2, 0), ("dim2", 3, 1)), _IN, ""),
    "linalg_diagonal": ("dim", (("dim1", None, -2), ("dim2", None, -1)), _IN, ""),
    "diag_embed": ("dim", (("dim1", 2, -2), ("dim2", 3, -1)), _IN, "new"),
    "transpose": ("swap", ("dim0", 1), ("dim1", 2)), "transpose_copy": ("swap", ("dim0", 1), ("dim1", 2)),
    "swapaxes": ("swap", ("axis0", 1), ("axis1", 2)), "swapdims": ("swap", ("dim0", 1), ("dim1", 2)),
    "movedim": ("movedim",), "moveaxis": ("movedim",), "permute": ("permute",), "permute_copy": ("permute",),
    "reshape": ("reshape",), "view_copy": ("reshape",), "flatten": ("reshape",), "unflatten": ("reshape",),
    "ravel": ("reshape",),
    "squeeze": ("reshape",), "squeeze_copy": ("reshape",), "unsqueeze": ("reshape",), "unsqueeze_copy": ("reshape",),
    "atleast_1d": ("reshape",), "atleast_2d": ("reshape",), "atleast_3d": ("reshape",),
    "view_as_real": ("reshape",), "view_as_complex": ("reshape",),
    "layer_norm": ("trailing", "normalized_shape", 1, 1), "rms_norm": ("trailing", "normalized_shape", 1, 1),
    "pad": ("pad",), "constant_pad_nd": ("pad",),
    "group_norm": ("map", _IN, 0), "instance_norm": ("map", _IN, 0),
    # updates at given places that leave every row where it was: row i stays a function of input row i
    "index_add": _WRITES, "index_copy": _WRITES, "index_fill": _WRITES, "index_reduce": _WRITES,
    "scatter": _WRITES, "scatter_add": _WRITES, "scatter_reduce": _WRITES, "select_scatter": _WRITES,
    "slice_scatter": _WRITES, "diagonal_scatter": _WRITES, "tril": _WRITES, "triu": _WRITES,
    "diag": ("map", _IN, None), "diagflat": ("map", _IN, None),
    "batch_norm": ("flag", "training", 5),
    "linear": ("map", (("input", 0), ("bias", 2)), 0),
    "bilinear": ("map", (("input1", 0), ("input2", 1), ("bias", 3)), 0),
    "embedding_bag": ("batched", 0),  # a 2-D input: one bag per row; 1-D with offsets: bags across rows
    "one_hot": ("map", (("tensor", 0),), 1), "bucketize": ("map", _IN, 0), "isin": ("map", (("elements", 0),), 0),
    "outer": ("map", _IN, 1), "cdist": ("map", (("x1", 0),), 0),
    "mm": ("map", _IN, 0), "addmm": ("map", (("input", 0), ("mat1", 1)), 0),
    "bmm": ("map", (("input", 0), ("mat2", 1)), 0), "baddbmm": ("map", (("input", 0), ("batch1", 1), ("batch2", 2)), 0),
    "matmul": ("matmul", 0, 1), "linalg_matmul": ("matmul", 0, 1), "__rmatmul__": ("matmul", 1, 0),
})  # fmt: skip
for _k in (1, 2, 3):
    RULES.update({f"conv{_k}d": ("batched", _k), f"conv_transpose{_k}d": ("batched", _k)})
    for _pool in ("max_pool", "avg_pool", "lp_pool", "adaptive_max_pool", "adaptive_avg_pool"):
        RULES[f"{_pool}{_k}d"] = ("map", _IN, 0)  # pooling is per channel, and per sample when batched
    RULES[f"max_pool{_k}d_with_indices"] = RULES[f"adaptive_max_pool{_k}d_with_indices"] = ("map", _IN, 0)

#: (module, name) -> rule, where a module's function of that name takes other arguments; None: unknown
QUALIFIED = {
    ("torch.nn.functional", "embedding"): ("map", _IN, 1),  # F.embedding(input, weight)
    ("torch", "embedding"): ("map", (("indices", 1),), 1),  # torch.embedding(weight, indices)
    ("torch.nn.functional", "unfold"): None,  # im2col, not Tensor.unfold(dimension, size, step)
}

_SEQ = "lodtensor.sequence"
_POOL = f"{_SEQ}.sequence_pool(t, pool_type)"
_NESTED = "t.to_nested() and the lodtensor.nested reduction with dim=1"
_SOFTMAX = f"{_SEQ}.sequence_softmax(t)"
_CAT = f"{_SEQ}.sequence_concat([...]) to join sequences, or t.data"
#: mixing calls of these raise a TypeError naming the per-sequence op (the others give plain torch data)
ADVICE = {
    "softmax": _SOFTMAX, "special_softmax": _SOFTMAX, "softmin": f"{_SOFTMAX} of -t",
    "log_softmax": f"{_SOFTMAX} (then log), or t.to_nested() and ln.log_softmax(nt, 1)",
    "special_log_softmax": f"{_SOFTMAX} (then log)",
    "sum": f"{_POOL} with pool_type='sum'", "nansum": f"{_POOL} with pool_type='sum'",
    "mean": f"{_POOL} with pool_type='average'", "nanmean": f"{_POOL} with pool_type='average'",
    "max": f"{_POOL} with pool_type='max'", "amax": f"{_POOL} with pool_type='max'",
    "min": f"{_POOL} with pool_type='min'", "amin": f"{_POOL} with pool_type='min'",
    "cumsum": f"t.to_nested() (a running sum within each sequence) or {_SEQ} ops",
    "flip": f"{_SEQ}.sequence_reverse(t)", "flipud": f"{_SEQ}.sequence_reverse(t)",
    "reshape": "t.to_nested() and ln.reshape, or t.data.reshape(...) for a plain tensor",
    "flatten": "t.to_nested() and ln.flatten (dims from 1 on), or t.data",
    "transpose": "t.to_nested() and ln.transpose (dims from 1 on), or t.data",
    "permute": "t.to_nested(), or t.data", "t": "t.data.t()",
    "cat": _CAT, "concat": _CAT, "concatenate": _CAT, "hstack": _CAT, "vstack": _CAT, "row_stack": _CAT,
    "dstack": _CAT, "stack": "t.to_nested(), or t.data",
    "squeeze": "t.to_nested() and ln.squeeze (dims from 1 on)",
    "unsqueeze": "t.to_nested() and ln.unsqueeze (dims from 1 on)",
    "matmul": "t.to_nested() and ln.matmul / ln.bmm", "__rmatmul__": "t.to_nested() and ln.matmul / ln.bmm",
}  # fmt: skip
for _name in ("prod any all argmax argmin std var std_mean var_mean logsumexp special_logsumexp median nanmedian "
              "norm linalg_norm linalg_vector_norm count_nonzero aminmax mode kthvalue quantile nanquantile").split():
    ADVICE[_name] = _NESTED
for _name in "cumprod cummax cummin logcumsumexp sort argsort msort topk roll rot90 movedim moveaxis".split():
    ADVICE[_name] = "t.to_nested()"
