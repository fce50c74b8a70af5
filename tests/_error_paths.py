"""The error-path sweep behind tests/test_error_paths_hunt.py: a call that raises changes nothing.

The charter (docs, API.md "Conventions"): bad input raises ``ValueError``, ``TypeError`` or
``IndexError`` (lodtensor.errors subclass them) whose message names the argument, and "a call that
raises leaves every object it was given exactly as it was". This module checks both halves over
every exported callable without a hand-written table of valid calls:

1. :func:`recorded_calls` runs each exported callable's own doctest (tests/test_docs_examples.py
   guarantees one) under ``sys.setprofile`` and keeps the arguments of every call the example makes
   directly (a deep copy taken on entry): a valid call of that callable, as its author wrote it.
2. :func:`bad_variants` derives bad values from a good one by its kind (a LoDTensor with another lod
   depth, batch size, dtype, row shape or backend; an array with a wrong shape or dtype; a negative,
   huge or non-integer int; lengths that do not add up; ...).
3. :func:`check_call` replays a recorded call with one argument replaced, :func:`fingerprint` of
   every argument taken before and after: data bytes, shape, strides, dtype, ``writeable``, the LoD
   object and its offsets, torch ``requires_grad`` / ``grad``, a NestedTensor's buffer and
   structure, a module's parameters, and the entries a LoD's caches already held. A call that
   raises must leave the fingerprint as it was and raise one of :data:`ALLOWED`.

A call that succeeds is not judged (a "bad" variant may be valid input), except that a callable
that is not a mutator (:func:`is_mutator`) must leave its arguments unchanged then too.
"""

import copy
import doctest
import importlib
import os
import sys
import traceback
import types
import warnings

from tests._fingerprints import bad_variants, diff, fingerprint
from tests.test_docs_examples import _resolve as resolve_name

#: Error types a bad input may raise (lodtensor.errors subclass the first two); ImportError is a
#: missing optional library, OSError a file that is not there (the recorded paths are gone).
ALLOWED = (ValueError, TypeError, IndexError, ImportError, OSError, NotImplementedError)

#: Methods that change ``self`` (or their first argument) when they succeed, besides ``*_`` names.
MUTATOR_NAMES = {
    "set", "set_lod", "set_recursive_sequence_lengths", "append", "extend", "resize", "load_state_dict",
    "set_epoch", "load_program_state", "set_program_state", "set_state_dict", "load_state", "train", "eval",
    "update", "add", "insert", "pop", "clear", "to", "cuda", "cpu", "put", "set_value", "load_dict",
    "zero_grad", "register_buffer", "register_parameter", "apply", "requires_grad_", "share_memory_",
    "add_tokens", "add_special_tokens", "backward", "retain_grad", "step", "fit", "reset",
    "load_vars", "load_params", "load_persistables", "load", "reverse", "sort", "create_parameter",
    "reset_parameters", "setitem",
}


def is_mutator(qualname):
    name = qualname.rsplit(".", 1)[-1]
    return (name.endswith("_") and not name.endswith("__")) or name in MUTATOR_NAMES



# -- recording valid calls from the doctests ------------------------------------------------------
def _targets(exported):
    """``{code object: [(qualname, function or class)]}`` for every exported callable."""
    targets = {}
    for _, qualname, obj in exported:
        if qualname.startswith("lodtensor.backend."):
            continue  # the backend contract: what op code calls, never user input (tests/backend/ check it)
        if isinstance(obj, type):
            if issubclass(obj, BaseException):
                continue
            for klass in obj.__mro__:
                init = klass.__dict__.get("__init__")
                if isinstance(init, types.FunctionType):
                    targets.setdefault(init.__code__, []).append((qualname, obj, init))
                    break
            continue
        func = inner = getattr(obj, "__func__", obj)
        seen = set()
        while inner is not None and id(inner) not in seen:  # a wrapper's doctest runs the wrapped function
            seen.add(id(inner))
            code = getattr(inner, "__code__", None)
            if code is not None:
                targets.setdefault(code, []).append((qualname, func, inner))
            inner = getattr(inner, "__wrapped__", None)
    return targets


def _outermost(frame, targets):
    """Whether the call whose caller is ``frame`` comes from a doctest with no exported callable in between."""
    while frame is not None:
        if frame.f_code.co_filename.startswith("<doctest"):
            return True
        if frame.f_code in targets:
            return False
        frame = frame.f_back
    return False


def _which(candidates, frame):
    """The candidate whose closure holds what ``frame``'s free variables hold (table-made functions share code)."""
    if len(candidates) == 1:
        return candidates[0]
    free = frame.f_code.co_freevars
    values = frame.f_locals
    for _qualname, func, inner in candidates:
        closure = getattr(inner, "__closure__", None) or ()
        try:
            if all(values.get(n) is cell.cell_contents for n, cell in zip(free, closure)):
                return _qualname, func, inner
        except ValueError:  # an empty cell
            continue
    return None


def _arguments(frame):
    """``(positional, keyword)`` arguments of the call that ``frame`` starts."""
    code, values = frame.f_code, frame.f_locals
    names = code.co_varnames
    npos, nkw = code.co_argcount, code.co_kwonlyargcount
    args = [values[n] for n in names[:npos]]
    kwargs = {n: values[n] for n in names[npos:npos + nkw]}
    at = npos + nkw
    if code.co_flags & 0x04:  # *args
        args += list(values[names[at]])
        at += 1
    if code.co_flags & 0x08:  # **kwargs
        kwargs.update(values[names[at]])
    return args, kwargs


def _resolve(dotted):
    """The object a dotted public name refers to (None if it names nothing)."""
    try:
        return resolve_name(dotted)
    except ImportError:
        return None


class Call:
    """One recorded valid call: ``target(*args, **kwargs)``; ``positional`` names the positional slots."""

    def __init__(self, qualname, target, args, kwargs, names, is_init):
        self.qualname, self.target, self.args, self.kwargs = qualname, target, args, kwargs
        self.names, self.is_init = names, is_init
        owner = qualname.rsplit(".", 1)[0]
        self.is_method = not is_init and isinstance(_resolve(owner), type)

    def slots(self):
        """``[(slot, parameter name)]`` for every argument: an int (positional) or a str (keyword)."""
        out = [(i, self.names[i] if i < len(self.names) else f"args[{i}]") for i in range(len(self.args))]
        return out + [(k, k) for k in self.kwargs]

    def fresh(self):
        """A deep copy of the arguments (each replay gets its own objects)."""
        return copy.deepcopy((self.args, self.kwargs))

    def __repr__(self):
        return f"{self.qualname}({', '.join(n for _, n in self.slots())})"


_RECORDED = {}


def recorded_calls(exported, *, per_callable=2):
    """``{qualname: [Call]}``: up to ``per_callable`` valid calls of each exported callable, from its doctest."""
    if per_callable in _RECORDED:
        return _RECORDED[per_callable]
    from tests.test_docs_examples import _own_doc

    targets = _targets(exported)
    found = {}

    pending = {}

    def profile(frame, event, arg):
        if event == "return":
            waiting = pending.pop(id(frame), None)
            if waiting is not None and waiting[0] is frame:
                _, candidates, entry = waiting
                hit = _which(candidates, frame)  # the free variables are set once the body ran
                if hit is not None:
                    keep(hit[0], hit[1], *entry)
            return
        if event != "call":
            return
        code = frame.f_code
        candidates = targets.get(code)
        if candidates is None or not _outermost(frame.f_back, targets):
            return
        is_init = code.co_name == "__init__"
        if is_init:
            cls = type(frame.f_locals.get("self"))
            candidates = [(q, c, i) for q, c, i in candidates if c is cls]
            if not candidates:
                return
        if len(found.get(candidates[0][0], ())) >= per_callable and len(candidates) == 1:
            return
        args, kwargs = _arguments(frame)
        names = list(code.co_varnames[:code.co_argcount])
        if is_init:
            args, names = args[1:], names[1:]  # self: not built yet
        try:
            args, kwargs = copy.deepcopy((args, kwargs))
        except Exception:  # noqa: BLE001 - an argument that cannot be copied: that call is not replayable
            return
        entry = (args, kwargs, names, is_init)
        if len(candidates) == 1:
            keep(*candidates[0][:2], *entry)
        else:
            pending[id(frame)] = (frame, candidates, entry)

    def keep(qualname, func, args, kwargs, names, is_init):
        calls = found.setdefault(qualname, [])
        if len(calls) < per_callable:
            calls.append(Call(qualname, func, args, kwargs, names, is_init))

    docs = {}
    for _, _name, obj in exported:
        doc = _own_doc(obj)
        module = getattr(obj, "__module__", None)
        if isinstance(doc, str) and ">>>" in doc and module:
            docs.setdefault(module, set()).add(doc)
    finder = doctest.DocTestFinder(exclude_empty=True)
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    cwd = os.getcwd()
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        os.chdir(tmp)
        try:
            for module_name, wanted in sorted(docs.items()):
                module = importlib.import_module(module_name)
                for test in finder.find(module, module_name):
                    if test.docstring not in wanted or not test.examples:
                        continue
                    sys.setprofile(profile)
                    try:
                        runner.run(test, out=lambda s: None, clear_globs=True)
                    finally:
                        sys.setprofile(None)
        finally:
            os.chdir(cwd)
    _RECORDED[per_callable] = found
    return found


# -- replaying ------------------------------------------------------------------------------------
class Finding:
    def __init__(self, kind, call, slot, label, detail):
        self.kind, self.call, self.slot, self.label, self.detail = kind, call, slot, label, detail

    @property
    def key(self):
        return (self.kind, self.call.qualname, str(self.slot), self.label)

    def __repr__(self):
        return f"[{self.kind}] {self.call.qualname} {self.slot}={self.label}: {self.detail}"


def _raised_inside(err):
    """Whether ``err`` was raised by lodtensor's own code (else by NumPy, torch or Python itself)."""
    frames = traceback.extract_tb(err.__traceback__)
    if not frames:
        return False
    return f"{os.sep}lodtensor{os.sep}" in frames[-1].filename


def check_call(call, slot=None, label="valid", bad=None):
    """Replay ``call`` with ``slot`` replaced by ``bad``; the findings (empty: fine)."""
    args, kwargs = call.fresh()
    if slot is not None:
        if isinstance(slot, int):
            args[slot] = bad
        else:
            kwargs[slot] = bad
    before = [fingerprint(a) for a in args], {k: fingerprint(v) for k, v in kwargs.items()}
    findings = []
    try:
        with warnings.catch_warnings():  # (a bad value's warnings are not what the sweep judges)
            warnings.simplefilter("ignore")
            call.target(*args, **kwargs)
    except ALLOWED as err:
        where = _changed(before, args, kwargs)
        if where:
            findings.append(Finding("mutated on error", call, slot, label, f"{type(err).__name__}: "
                                    f"{str(err)[:120]} ... and changed {where}"))
        return findings, err
    except Exception as err:  # noqa: BLE001 - the sweep reports every other type
        where = _changed(before, args, kwargs)
        findings.append(Finding("error type", call, slot, label, f"{type(err).__name__}: {str(err)[:160]}"
                                + (f" (and changed {where})" if where else "")))
        return findings, err
    if not is_mutator(call.qualname):
        where = _changed(before, args, kwargs)
        if where:
            findings.append(Finding("mutated on success", call, slot, label, f"changed {where}"))
    return findings, None


def _changed(before, args, kwargs):
    for i, a in enumerate(args):
        found = diff(before[0][i], fingerprint(a))
        if found:
            return f"args[{i}]{found}"
    for k, v in kwargs.items():
        found = diff(before[1][k], fingerprint(v))
        if found:
            return f"{k}{found}"
    return None


def sweep(calls, *, skip=()):
    """Every recorded call, as is and with each argument replaced by each of its bad variants (run in a
    temporary directory: a bad path such as ``"bogus"`` is a file some calls write)."""
    import tempfile

    cwd = os.getcwd()
    with tempfile.TemporaryDirectory() as tmp:
        os.chdir(tmp)
        try:
            return _sweep(calls, skip)
        finally:
            os.chdir(cwd)


def _sweep(calls, skip):
    findings, leaked, unreplayable = [], [], []
    for qualname, recorded in calls.items():
        if any(qualname.startswith(s) for s in skip):
            continue
        for call in recorded:
            found, err = check_call(call)
            if err is not None:  # the valid call needs a context the replay lacks (a fluid.Program's forward),
                unreplayable.append((call, err))  # or the doctest showed an error: only a write is a finding
                findings += [f for f in found if f.kind != "error type"]
                continue
            findings += found
            for slot, name in call.slots():
                value = call.args[slot] if isinstance(slot, int) else call.kwargs[slot]
                try:
                    variants = bad_variants(value)
                except Exception:  # noqa: BLE001 - a value the generators cannot vary
                    continue
                if name == "inplace":
                    continue  # any true value asks for the in-place form
                if slot == 0 and call.is_method:  # only another object of its class is a fair self
                    variants = [(label, bad) for label, bad in variants if type(bad) is type(value)]
                for label, bad in variants:
                    found, err = check_call(call, slot, label, bad)
                    findings += found
                    if err is not None and not found and isinstance(err, (ValueError, TypeError, IndexError)) \
                            and not _raised_inside(err):
                        leaked.append(Finding("raised by a library", call, name, label,
                                              f"{type(err).__name__}: {str(err)[:120]}"))
    return findings, leaked, unreplayable
