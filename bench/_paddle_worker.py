"""Real PaddlePaddle 2.6.2 sequence ops, timed in a subprocess (Paddle needs its own venv, numpy<2).

Usage: ``python _paddle_worker.py '<json spec>'``; prints one JSON line. The spec
names the workloads of ``_seqdata`` and the ops; the data are rebuilt here from
the same seeds, so only numbers cross the process boundary. Each op is one
static Program run by an Executor on the CPU with LoDTensor feeds (what Paddle
users pay per call: feed, kernel, fetch with ``return_numpy=False``).
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


def main(spec):
    try:
        import paddle  # noqa: PLC0415
        from paddle.base import core  # noqa: PLC0415
    except Exception as err:  # noqa: BLE001
        return {"installed": False, "error": f"{type(err).__name__}: {err}"}
    paddle.enable_static()
    out = {"installed": True, "version": paddle.__version__, "cases": []}
    budget = spec.get("budget", _common.BUDGET)
    place = core.CPUPlace()
    exe = paddle.static.Executor(place)
    for name in spec["workloads"]:
        data, lengths = _seqdata.WORKLOADS[name]()
        x = core.LoDTensor()
        x.set(data, place)
        x.set_recursive_sequence_lengths(lengths)
        scores = core.LoDTensor()
        scores.set(data[:, :1].copy(), place)
        scores.set_recursive_sequence_lengths(lengths)
        case = {"name": name, "ops": {}}
        for op in spec["ops"]:
            main_prog, start = paddle.static.Program(), paddle.static.Program()
            with paddle.static.program_guard(main_prog, start):
                feed_tensor = scores if op == "softmax" else x
                var = paddle.static.data("x", shape=[-1, feed_tensor.shape()[1]], dtype="float32",
                                         lod_level=len(lengths))
                if op == "softmax":
                    result = paddle.static.nn.sequence_softmax(var)
                elif op == "pad":
                    pad = paddle.static.data("p", shape=[1], dtype="float32")
                    result = paddle.static.nn.sequence_pad(var, pad)[0]
                else:
                    result = paddle.static.nn.sequence_pool(var, op)
            exe.run(start)
            feed = {"x": feed_tensor}
            if op == "pad":
                p = core.LoDTensor()
                p.set(__import__("numpy").zeros(1, "float32"), place)
                feed["p"] = p

            def call(main_prog=main_prog, feed=feed, result=result):
                return exe.run(main_prog, feed=feed, fetch_list=[result], return_numpy=False)

            try:
                check = __import__("numpy").array(call()[0])
                case["ops"][op] = {"time": _common.timeit(call, budget=budget), "checksum": float(check.sum())}
            except Exception as err:  # noqa: BLE001
                case["ops"][op] = {"error": f"{type(err).__name__}: {str(err).strip().splitlines()[-1][:200]}"}
        out["cases"].append(case)
    return out


if __name__ == "__main__":
    print(json.dumps(main(json.loads(sys.argv[1]))))
