"""Fingerprints of what a caller can observe of an object, and bad values derived from a good one.

Used by tests/_error_paths.py (the error-path sweep): :func:`fingerprint` before and after a call,
:func:`diff` between them, :func:`bad_variants` of each argument.
"""

import sys
import types

import numpy as np


# -- fingerprints ---------------------------------------------------------------------------------
def _torch():
    return sys.modules.get("torch")


def _tensor_bytes(t):
    try:
        return _dense_bytes(t)
    except (RuntimeError, TypeError, NotImplementedError):  # sparse and other layouts: their values as text
        return repr(t)


def _dense_bytes(t):
    torch = _torch()
    flat = t.detach()
    if flat.is_nested:
        return ("nested", tuple(_dense_bytes(c) for c in flat.unbind()))
    flat = flat.cpu().contiguous().reshape(-1)
    if flat.is_complex():
        flat = torch.view_as_real(flat).reshape(-1)
    try:
        return flat.view(torch.uint8).numpy().tobytes()
    except (RuntimeError, TypeError):
        return repr(flat.tolist())


def fingerprint(obj, _memo=None, _depth=0):
    """A comparable picture of everything reachable from ``obj`` that a caller could observe."""
    memo = {} if _memo is None else _memo
    key = id(obj)
    if key in memo:
        return ("seen", memo[key])
    if obj is None or isinstance(obj, (bool, int, float, complex, str, bytes, type, types.FunctionType,
                                        types.BuiltinFunctionType, types.ModuleType, np.dtype)):
        return obj if not isinstance(obj, float) or not np.isnan(obj) else "nan"
    memo[key] = len(memo)
    if _depth > 12:
        return ("deep", type(obj).__name__, key)
    rec = lambda v: fingerprint(v, memo, _depth + 1)  # noqa: E731
    if isinstance(obj, np.generic):
        return ("npscalar", obj.dtype.str, obj.tobytes())
    if isinstance(obj, np.ndarray):
        data = obj.tobytes() if obj.dtype != object else repr(obj.tolist())
        return ("ndarray", key, obj.shape, obj.strides, obj.dtype.str, obj.flags.writeable, data)
    torch = _torch()
    if torch is not None:
        if isinstance(obj, torch.nn.Module):
            state = tuple((k, key_, rec(v)) for k, v in obj.state_dict(keep_vars=True).items() for key_ in [id(v)])
            extra = tuple((k, rec(v)) for k, v in vars(obj).items() if not k.startswith("_"))
            return ("module", key, type(obj).__name__, obj.training, state, extra)
        if isinstance(obj, torch.Tensor):
            grad = obj.grad if obj.is_leaf else None
            shape = ("nested",) if obj.is_nested else (tuple(obj.shape), obj.stride(), obj.storage_offset())
            return ("tensor", key, shape, str(obj.dtype), str(obj.device), obj.requires_grad,
                    _tensor_bytes(obj), None if grad is None else rec(grad))
        if isinstance(obj, (torch.dtype, torch.device, torch.Size)):
            return repr(obj)
    if isinstance(obj, (list, tuple)):
        return (type(obj).__name__, key if isinstance(obj, list) else None, tuple(rec(v) for v in obj))
    if isinstance(obj, dict):
        return ("dict", key, tuple((repr(k), rec(v)) for k, v in obj.items()))
    if isinstance(obj, (set, frozenset)):
        return ("set", key, tuple(sorted(map(repr, obj))))
    module = type(obj).__module__ or ""
    if not module.startswith("lodtensor"):
        if hasattr(obj, "__array_interface__") or hasattr(obj, "__cuda_array_interface__"):
            return ("array", key, repr(obj))
        return ("opaque", type(obj).__name__, key)
    return ("obj", type(obj).__name__, key, tuple((name, _attr(obj, name, rec)) for name in _attr_names(obj)))


#: Attributes that are caches (filled lazily by a successful read), per class: only the entries they
#: held before the call are compared, so a call may add entries but never change or drop one.
CACHE_ATTRS = {
    "LoD": {"_cache", "_plans", "_top"},
    "NestedTensor": {"_logical", "_dense"},
    "Structure": {"_sizes", "_offsets", "_regular", "_rows", "_lists", "_lod", "_dims"},
}


def _attr_names(obj):
    names = []
    for klass in type(obj).__mro__:
        names += [s for s in klass.__dict__.get("__slots__", ()) if s not in ("__weakref__", "__dict__")]
    names += list(getattr(obj, "__dict__", {}))
    return sorted(set(names))


def _attr(obj, name, rec):
    cache = name in CACHE_ATTRS.get(type(obj).__name__, ())
    try:
        value = object.__getattribute__(obj, name)
    except AttributeError:
        return ("cache", {}) if cache else "<unset>"
    if cache:
        return ("cache", _cache_entries(value))
    if name.startswith("__") or isinstance(value, (types.FunctionType, types.MethodType, types.BuiltinFunctionType)):
        return ("callable", type(value).__name__)
    return rec(value)


def _cache_entries(value):
    """A cache as ``{key: id(entry)}`` (None / False / a list: itself)."""
    if isinstance(value, dict):
        return {repr(k): id(v) for k, v in value.items()}
    if value is None or value is False:
        return {}
    return {"<value>": id(value)}


def diff(before, after):
    """Where two fingerprints differ (a short path), or None; a cache may gain entries."""
    return _diff(before, after, "")


def _diff(a, b, path):
    if isinstance(a, tuple) and isinstance(b, tuple) and len(a) == 2 and a and a[0] == "cache" and b[0] == "cache":
        for k, v in a[1].items():
            if k not in b[1]:
                return f"{path}: cache entry {k} dropped"
            if b[1][k] != v:
                return f"{path}: cache entry {k} replaced"
        return None
    if type(a) is not type(b):
        return f"{path}: {_short(a)} -> {_short(b)}"
    if isinstance(a, tuple):
        if len(a) != len(b):
            return f"{path}: {_short(a)} -> {_short(b)}"
        label = a[1] if len(a) > 1 and a[0] == "obj" else (a[0] if a and isinstance(a[0], str) else "")
        for i, (x, y) in enumerate(zip(a, b)):
            if isinstance(x, tuple) and len(x) == 2 and isinstance(x[0], str) and a and a[0] != "dict":
                sub = f"{path}.{x[0]}" if a[0] == "obj" or path.endswith("]") else f"{path}[{i}]"
            else:
                sub = f"{path}/{label}[{i}]" if label else f"{path}[{i}]"
            found = _diff(x, y, sub)
            if found:
                return found
        return None
    if a != b:
        return f"{path}: {_short(a)} -> {_short(b)}"
    return None


def _short(v, n=80):
    text = repr(v)
    return text if len(text) <= n else text[:n] + "..."


# -- bad variants of a good value -----------------------------------------------------------------
def bad_variants(value):
    """``[(label, bad value)]`` derived from the good ``value`` by its kind."""
    from lodtensor import LoDTensor
    from lodtensor.nested import NestedTensor

    out = [("None", None), ("a str", "bogus")]
    if isinstance(value, LoDTensor):
        out += _lodtensor_variants(value)
    elif isinstance(value, NestedTensor):
        out += _nested_variants(value)
    elif isinstance(value, np.ndarray):
        out += _array_variants(value, np)
    elif _torch() is not None and isinstance(value, _torch().Tensor):
        out += _tensor_variants(value)
    elif isinstance(value, bool):
        out += [("bool as 2", 2)]
    elif isinstance(value, (int, np.integer)):
        out += [("-1", -1), ("-100", -100), ("huge int", 10**6), ("float", float(value) + 0.5), ("int 0", 0)]
    elif isinstance(value, float):
        out += [("nan", float("nan")), ("negative", -1.5), ("inf", float("inf"))]
    elif isinstance(value, str):
        out += [("int for str", 3), ("other str", value + "_nope")]
    elif isinstance(value, (list, tuple)):
        out += _sequence_variants(value)
    elif isinstance(value, dict):
        out += _dict_variants(value)
    return out


def _lodtensor_variants(t):
    from lodtensor import LoDTensor

    out = []
    data = t.data
    if data is None:
        return out
    lib = np if isinstance(data, np.ndarray) else _torch()
    rows = int(data.shape[0])
    lod = t.lod()
    out.append(("plain array", data))
    if lod:
        n, below = len(lod[0]) - 1, lod[0][-1]
        out.append(("no lod", LoDTensor(data)))
        out.append(("one more lod level", LoDTensor(data, [[0, n]] + lod)))
        if len(lod) > 1:
            out.append(("one lod level less", LoDTensor(data, lod[1:])))
        out.append(("one sequence more", LoDTensor(data, [[0] * (n + 1) + [below]] + lod[1:])))
        out.append(("one sequence", LoDTensor(data, [[0, below]] + lod[1:])))
        out.append(("no rows", LoDTensor(data[:0], [[0] * (n + 1)] + [[0]] * (len(lod) - 1))))
    else:
        out.append(("with a lod", LoDTensor(data, [[0, rows]])))
        out.append(("no rows", LoDTensor(data[:0])))
    for label, other in _data_variants(data, lib):
        if int(other.shape[0]) == rows:
            out.append((label, LoDTensor(other, lod or None)))
    other_backend = _other_backend(data)
    if other_backend is not None:
        out.append(("other backend", LoDTensor(other_backend, lod or None)))
    return out


def _data_variants(data, lib):
    """Same rows, another dtype or row shape (and a non-contiguous view)."""
    out = []
    if lib is np:
        kind = data.dtype.kind
        other = np.float32 if kind != "f" else np.int64
        out.append(("int64 data" if kind == "f" else "float32 data", data.astype(other)))
        out.append(("bool data", data.astype(bool)))
        out.append(("extra dim", data[..., None] if data.ndim else data))
        if data.ndim >= 2:
            out.append(("1-d data", data.reshape(data.shape[0], -1)[:, 0].copy()))
            out.append(("wider rows", np.concatenate([data, data], axis=-1)))
        else:
            out.append(("2-d data", np.stack([data, data], axis=1)))
        return out
    torch = lib
    fl = data.is_floating_point()
    out.append(("int64 data" if fl else "float32 data", data.detach().to(torch.int64 if fl else torch.float32)))
    out.append(("float64 data", data.detach().to(torch.float64)))
    out.append(("bool data", data.detach().to(torch.bool)))
    out.append(("extra dim", data.detach().unsqueeze(-1)))
    if data.dim() >= 2:
        out.append(("1-d data", data.detach().reshape(data.shape[0], -1)[:, 0].clone()))
        out.append(("wider rows", torch.cat([data.detach(), data.detach()], dim=-1)))
    else:
        out.append(("2-d data", torch.stack([data.detach(), data.detach()], dim=1)))
    return out


def _other_backend(data):
    torch = _torch()
    if torch is None:
        return None
    if isinstance(data, np.ndarray):
        return torch.from_numpy(data.copy()) if data.dtype != object else None
    return data.detach().cpu().numpy().copy()


def _array_variants(a, lib):
    out = _data_variants(a, lib) if a.ndim else []
    if a.ndim:
        more = np.concatenate([a, a[:1]]) if a.shape[0] else np.zeros((1,) + a.shape[1:], a.dtype)
        out.append(("one row more", more))
        out.append(("no rows", a[:0]))
        if a.shape[0] > 1:
            out.append(("strided view", a[::2]))
    out.append(("0-d", np.asarray(a.reshape(-1)[0] if a.size else 0)))
    out.append(("complex", a.astype(np.complex64)))
    other = _other_backend(a)
    if other is not None:
        out.append(("other backend", other))
    return out


def _tensor_variants(t):
    torch = _torch()
    out = _data_variants(t, torch) if t.dim() else []
    d = t.detach()
    if d.dim():
        out.append(("one row more", torch.cat([d, d[:1]]) if d.shape[0] else torch.zeros((1,) + tuple(d.shape[1:]),
                                                                                          dtype=d.dtype)))
        out.append(("no rows", d[:0]))
        if d.shape[0] > 1:
            out.append(("strided view", d[::2]))
    out.append(("0-d", d.reshape(-1)[0].clone() if d.numel() else torch.tensor(0)))
    out.append(("other backend", d.cpu().numpy().copy()))
    if t.requires_grad:
        out.append(("no grad", d.clone()))
    return out


def _nested_variants(nt):
    import lodtensor.nested as ln

    out = []
    comps = [c for c in nt.unbind()]
    if not comps:
        return out
    lib = np if isinstance(comps[0], np.ndarray) else _torch()
    cat = np.concatenate if lib is np else _torch().cat
    out.append(("one component less", ln.nested_tensor(list(comps[:-1]) or [comps[0][:0]], layout=nt.layout)
                if len(comps) > 1 else ln.nested_tensor([comps[0], comps[0]], layout=nt.layout)))
    try:
        grown = [cat([c, c[:1]]) if c.ndim and c.shape[0] else c for c in comps]
        out.append(("longer components", ln.nested_tensor(grown, layout=nt.layout)))
    except Exception:  # noqa: BLE001
        pass
    try:
        if lib is np:
            cast = [c.astype(np.int64 if c.dtype.kind == "f" else np.float32) for c in comps]
        else:
            cast = [c.detach().to(_torch().int64 if c.is_floating_point() else _torch().float32) for c in comps]
        out.append(("other dtype", ln.nested_tensor(cast, layout=nt.layout)))
        out.append(("extra dim", ln.nested_tensor([c[..., None] for c in comps], layout=nt.layout)))
    except Exception:  # noqa: BLE001
        pass
    first = comps[0]
    out.append(("dense component", first))
    return out


def _sequence_variants(seq):
    out = [("empty", type(seq)())]
    if not seq:
        return out
    flat_ints = all(isinstance(v, (int, np.integer)) and not isinstance(v, bool) for v in seq)
    if flat_ints:
        out += [("negative entry", type(seq)([-1, *seq[1:]])),
                ("one more entry", type(seq)([*seq, seq[-1]])),
                ("last entry + 1", type(seq)([*seq[:-1], seq[-1] + 1])),
                ("float entry", type(seq)([0.5, *seq[1:]])),
                ("decreasing", type(seq)(list(seq)[::-1]) if len(seq) > 1 and seq[0] != seq[-1] else type(seq)([1, 0]))]
    elif all(isinstance(v, (list, tuple)) for v in seq):
        inner = [list(v) for v in seq]
        if inner and inner[-1] and all(isinstance(x, (int, np.integer)) for x in inner[-1]):
            out += [("last level ends one later", [*inner[:-1], [*inner[-1][:-1], inner[-1][-1] + 1]]),
                    ("negative in last level", [*inner[:-1], [-1, *inner[-1][1:]]]),
                    ("one level more", [[0, 1], *inner]),
                    ("flat list", inner[-1])]
        out.append(("one item less", type(seq)(seq[:-1])))
    else:
        out.append(("one item less", type(seq)(seq[:-1])))
        out.append(("one item more", type(seq)([*seq, seq[-1]])))
    return out


def _dict_variants(d):
    out = [("empty dict", {})]
    if not d:
        return out
    keys = list(d)
    out.append(("one key less", {k: d[k] for k in keys[1:]}))
    out.append(("unknown key", {**d, "no_such_key__": d[keys[0]]}))
    first = d[keys[0]]
    torch = _torch()
    if isinstance(first, np.ndarray) and first.ndim:
        out.append(("wrong shape value", {**d, keys[0]: np.concatenate([first, first[:1]])}))
    elif torch is not None and isinstance(first, torch.Tensor) and first.dim():
        wrong = {**d, keys[0]: torch.cat([first.detach(), first.detach()[:1]])}
        out.append(("wrong shape value", wrong))
        out.append(("wrong shape last value", {**d, keys[-1]: torch.zeros(3, 5, 7)}))
    return out
