"""TensorFlow contenders, run in a subprocess (TensorFlow may live in another venv).

Usage: ``python _tf_worker.py '<json spec>'``; prints one JSON line. The spec
lists the padding cases (rows, width, mean_len, seed_offset) and the time
budget; the data are regenerated here with the same seed as in the parent
(``_common.ragged_rows``), so only numbers cross the process boundary.
TensorFlow runs with its default thread pools (all cores).
"""

import json
import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import _common  # noqa: E402


def run_case(tf, case, budget):
    data, lengths = _common.ragged_rows(case["rows"], case["width"], case["mean_len"], case["seed_offset"])
    values = tf.constant(data)
    row_lengths = tf.constant(lengths)
    res = {"name": case["name"]}

    def to_padded():
        return tf.RaggedTensor.from_row_lengths(values, row_lengths).to_tensor()

    padded = to_padded()
    res["padded_shape"] = list(padded.shape)
    res["padded_sum"] = float(tf.reduce_sum(tf.cast(padded, tf.float64)))
    res["to_padded"] = _common.timeit(to_padded, budget=budget)
    ragged = tf.RaggedTensor.from_row_lengths(values, row_lengths)
    res["to_tensor_only"] = _common.timeit(ragged.to_tensor, budget=budget)

    def from_padded():
        return tf.RaggedTensor.from_tensor(padded, lengths=row_lengths).flat_values

    flat = from_padded()
    res["flat_shape"] = list(flat.shape)
    res["flat_sum"] = float(tf.reduce_sum(tf.cast(flat, tf.float64)))
    res["from_padded"] = _common.timeit(from_padded, budget=budget)
    return res


def run_cpu_ops(tf, spec, budget):
    """Timings of TensorFlow's ops on the ``_cpudata`` workloads (for ``bench/cpu.py``).

    Reductions take the best of ``tf.math.segment_*`` (row ids, sorted) and the
    RaggedTensor reduction over the ragged dim; ``relu`` and ``linear`` act on the
    flat values; ``unpad`` is ``RaggedTensor.from_tensor(padded, lengths).flat_values``.
    """
    return {name: _cpu_workload(tf, name, spec["ops"].get(name, []), budget) for name in spec["workloads"]}


def _cpu_workload(tf, name, ops, budget):
    import _cpudata  # noqa: PLC0415 - only this mode needs it
    import numpy as np  # noqa: PLC0415

    data, offsets = _cpudata.WORKLOADS[name]()
    lengths = np.diff(offsets)
    values = tf.constant(data)
    row_lengths = tf.constant(lengths)
    ids = tf.constant(np.repeat(np.arange(lengths.size, dtype=np.int64), lengths))
    ragged = tf.RaggedTensor.from_row_lengths(values, row_lengths)
    res = {}
    for op in ops:
        if op in ("sum", "mean", "max"):
            seg = {"sum": tf.math.segment_sum, "mean": tf.math.segment_mean, "max": tf.math.segment_max}[op]
            red = {"sum": tf.reduce_sum, "mean": tf.reduce_mean, "max": tf.reduce_max}[op]
            a = _common.timeit(lambda seg=seg: seg(values, ids), budget=budget)
            b = _common.timeit(lambda red=red: red(ragged, axis=1), budget=budget)
            res[op] = min(a, b, key=lambda t: t["best"])
            res[op]["how"] = "tf.math.segment_" + op if res[op] is a else "RaggedTensor reduce_" + op
        elif op == "relu":
            res[op] = _common.timeit(lambda: tf.nn.relu(values), budget=budget)
        elif op == "linear":
            w, bias = _cpudata.linear_weights(data.shape[1])
            tw, tb = tf.constant(w), tf.constant(bias)
            res[op] = _common.timeit(lambda tw=tw, tb=tb: tf.nn.bias_add(tf.matmul(values, tw, transpose_b=True), tb),
                                     budget=budget)
        elif op == "unpad":
            padded = tf.constant(_cpudata.padded_of(data, offsets)[0])
            res[op] = _common.timeit(lambda padded=padded: tf.RaggedTensor.from_tensor(padded, lengths=row_lengths)
                                     .flat_values, budget=budget)
        elif op == "pad":
            res[op] = _common.timeit(lambda: tf.RaggedTensor.from_row_lengths(values, row_lengths).to_tensor(),
                                     budget=budget)
    return res


def main(spec):
    try:
        import tensorflow as tf  # noqa: PLC0415
    except Exception as err:  # noqa: BLE001
        return {"installed": False, "error": f"{type(err).__name__}: {err}"}
    out = {"installed": True, "version": tf.__version__, "cpu_count": os.cpu_count(),
           "intra_op_threads": tf.config.threading.get_intra_op_parallelism_threads() or os.cpu_count(),
           "cases": []}
    budget = spec.get("budget", _common.BUDGET)
    if "cpu" in spec:
        out["cpu"] = run_cpu_ops(tf, spec["cpu"], budget)
    for case in spec.get("cases", []):
        out["cases"].append(run_case(tf, case, budget))
    return out


if __name__ == "__main__":
    print(json.dumps(main(json.loads(sys.argv[1]))))
