"""Real PaddlePaddle 2.6.2 layers (``lstm``, ``gru``, ``sequence_conv`` operators), timed in a
subprocess (Paddle needs its own venv, numpy<2).

Usage: ``python _paddle_layers_worker.py '<json spec>'``; prints one JSON line. The data and
weights are rebuilt from ``_seqdata``'s seeds. Each case is one static Program run by an
Executor on the CPU with a LoDTensor feed: forward (fetch the output) and forward+backward
(``paddle.static.gradients`` of the output's sum with respect to the input and every
parameter, all fetched).
"""

import json
import os
import sys
import warnings

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
warnings.filterwarnings("ignore")
os.environ.setdefault("GLOG_minloglevel", "3")

import _common  # noqa: E402
import _seqdata  # noqa: E402


def build(paddle, kind, width, hidden, backward):
    """The Program for ``kind``; returns ``(main, startup, fetch_list, param_names)``."""
    main, startup = paddle.static.Program(), paddle.static.Program()
    with paddle.static.program_guard(main, startup):
        block = main.global_block()
        x = paddle.static.data("x", shape=[-1, width], dtype="float32", lod_level=1)
        x.stop_gradient = False
        weights = _seqdata.layer_weights(kind, width, hidden)
        params = {n: paddle.static.create_parameter(list(a.shape), "float32", name=n) for n, a in weights.items()}

        def var(dtype="float32"):
            return block.create_var(name=paddle.utils.unique_name.generate(kind), dtype=dtype)

        if kind == "sequence_conv":
            out = var()
            block.append_op(type="sequence_conv", inputs={"X": x, "Filter": params["filter"]}, outputs={"Out": out},
                            attrs={"contextLength": 3, "contextStart": -1, "contextStride": 1,
                                   "paddingTrainable": False})
        else:
            proj = var()
            block.append_op(type="mul", inputs={"X": x, "Y": params["w_ih"]}, outputs={"Out": proj},
                            attrs={"x_num_col_dims": 1, "y_num_col_dims": 1})
            out = var()
            if kind == "lstm":
                block.append_op(type="lstm", inputs={"Input": proj, "Weight": params["w_hh"], "Bias": params["bias"]},
                                outputs={"Hidden": out, "Cell": var(), "BatchGate": var(), "BatchCellPreAct": var()},
                                attrs={"use_peepholes": False, "is_reverse": False, "gate_activation": "sigmoid",
                                       "cell_activation": "tanh", "candidate_activation": "tanh"})
            else:
                block.append_op(type="gru", inputs={"Input": proj, "Weight": params["w_hh"], "Bias": params["bias"]},
                                outputs={"Hidden": out, "BatchGate": var(), "BatchResetHiddenPrev": var(),
                                         "BatchHidden": var()},
                                attrs={"activation": "tanh", "gate_activation": "sigmoid", "is_reverse": False,
                                       "origin_mode": False})
        fetch = [out]
        if backward:
            fetch += paddle.static.gradients([paddle.sum(out)], [x] + list(params.values()))
    return main, startup, fetch, weights


def main(spec):
    try:
        import numpy as np  # noqa: PLC0415
        import paddle  # noqa: PLC0415
        from paddle.base import core  # noqa: PLC0415
    except Exception as err:  # noqa: BLE001
        return {"installed": False, "error": f"{type(err).__name__}: {err}"}
    paddle.enable_static()
    place = core.CPUPlace()
    exe = paddle.static.Executor(place)
    out = {"installed": True, "version": paddle.__version__, "cases": {}}
    data, lengths = _seqdata.sentences(spec["width"], spec.get("sentences", 2266))
    x = core.LoDTensor()
    x.set(data, place)
    x.set_recursive_sequence_lengths(lengths)
    for kind in spec["ops"]:
        for backward in (False, True):
            key = f"{kind} {'forward+backward' if backward else 'forward'}"
            try:
                prog, startup, fetch, weights = build(paddle, kind, spec["width"], spec["hidden"], backward)
                scope = paddle.static.Scope()
                exe.run(startup, scope=scope)
                for name, value in weights.items():
                    scope.var(name).get_tensor().set(value, place)

                def call(prog=prog, fetch=fetch, scope=scope):
                    return exe.run(prog, feed={"x": x}, fetch_list=fetch, scope=scope, return_numpy=False)

                result = call()
                checksums = [float(np.array(r, dtype=np.float64).sum()) for r in result]
                timing = _common.timeit(call, budget=spec.get("budget", _common.BUDGET),
                                        min_repeat=spec.get("min_repeat", 2), warmup=1)
                out["cases"][key] = {"time": timing, "checksums": checksums}
            except Exception as err:  # noqa: BLE001
                out["cases"][key] = {"error": f"{type(err).__name__}: {str(err).strip().splitlines()[-1][:200]}"}
    return out


if __name__ == "__main__":
    print(json.dumps(main(json.loads(sys.argv[1]))))
