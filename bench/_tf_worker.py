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


def main(spec):
    try:
        import tensorflow as tf  # noqa: PLC0415
    except Exception as err:  # noqa: BLE001
        return {"installed": False, "error": f"{type(err).__name__}: {err}"}
    out = {"installed": True, "version": tf.__version__, "cpu_count": os.cpu_count(),
           "intra_op_threads": tf.config.threading.get_intra_op_parallelism_threads() or os.cpu_count(),
           "cases": []}
    budget = spec.get("budget", _common.BUDGET)
    for case in spec["cases"]:
        out["cases"].append(run_case(tf, case, budget))
    return out


if __name__ == "__main__":
    print(json.dumps(main(json.loads(sys.argv[1]))))
