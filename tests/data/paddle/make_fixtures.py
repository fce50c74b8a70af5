"""Write the .pdparams fixtures of tests/test_pdparams.py with real Paddle (2.6.2).

    .venv-paddle/bin/python tests/data/paddle/make_fixtures.py

Every array is ``expected(name, dtype, shape)``, so the tests know the values
without Paddle. Files: ``layer_p{2,3,4}.pdparams`` (``paddle.save`` of a layer's
``state_dict()`` at each protocol Paddle offers), ``dtypes.pdparams`` (one
tensor of each dtype Paddle saves; bfloat16 comes out as uint16),
``static.pdparams`` (``paddle.static.save`` of an fc program), ``tensor.pdtensor``
(``paddle.save`` of one Tensor: a ``(name, array)`` tuple, not a state dict).
"""

import os
import shutil
import sys
import tempfile

import numpy as np
import paddle

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(os.path.dirname(HERE)))
from data.paddle.values import expected  # noqa: E402

paddle.disable_static()
paddle.seed(0)
layer = paddle.nn.Sequential(paddle.nn.Linear(3, 2), paddle.nn.Embedding(5, 2))
for name, p in layer.named_parameters():
    p.set_value(expected(name, p.numpy().dtype, tuple(p.shape)))
for protocol in (2, 3, 4):
    paddle.save(layer.state_dict(), os.path.join(HERE, f"layer_p{protocol}.pdparams"), protocol=protocol)

names = ["bool", "int8", "uint8", "int16", "int32", "int64", "float16", "float32", "float64", "complex64"]
state = {n: paddle.to_tensor(expected(n, n, (2, 3))) for n in names}
state["bfloat16"] = paddle.to_tensor(expected("bfloat16", "float32", (4,))).astype("bfloat16")
state["scalar"] = paddle.to_tensor(expected("scalar", "float32", ()))
state["empty"] = paddle.to_tensor(np.zeros((0, 3), "float32"))
paddle.save(state, os.path.join(HERE, "dtypes.pdparams"))
paddle.save(paddle.to_tensor(expected("t", "float16", (2, 3))), os.path.join(HERE, "tensor.pdtensor"))

paddle.enable_static()
main, start = paddle.static.Program(), paddle.static.Program()
with paddle.static.program_guard(main, start):
    x = paddle.static.data("x", [None, 3], "float32")
    paddle.static.nn.fc(x, 4)
exe = paddle.static.Executor(paddle.CPUPlace())
exe.run(start)
scope = paddle.static.global_scope()
for var in main.list_vars():
    if var.persistable:
        t = scope.find_var(var.name).get_tensor()
        t.set(expected(var.name, np.array(t).dtype, tuple(np.array(t).shape)), paddle.CPUPlace())
tmp = tempfile.mkdtemp()
paddle.static.save(main, os.path.join(tmp, "model"))
shutil.copy(os.path.join(tmp, "model.pdparams"), os.path.join(HERE, "static.pdparams"))
shutil.rmtree(tmp)
