"""``fluid.nets``: Paddle's composite networks, built from the fluid layer calls.

>>> import numpy as np
>>> import lodtensor as lt
>>> import lodtensor.fluid as fluid
>>> net = fluid.Program(lambda x: fluid.nets.sequence_conv_pool(x, num_filters=3, filter_size=2, act="tanh"))
>>> out = net(lt.LoDTensor(np.ones((5, 4), "float32"), [[0, 2, 5]]))
>>> tuple(out.data.shape), net.paddle_names()
((2, 3), ['sequence_conv_0.w_0', 'sequence_conv_0.b_0'])
"""

from ..sequence import sequence_pool
from ._model_layers import sequence_conv

__all__ = ["sequence_conv_pool"]


def sequence_conv_pool(input, num_filters, filter_size, param_attr=None, act="sigmoid", pool_type="max",  # noqa: A002
                       bias_attr=None):
    """``fluid.nets.sequence_conv_pool``: :func:`~lodtensor.fluid.layers.sequence_conv` (parameters
    ``sequence_conv_k.w_0``, ``sequence_conv_k.b_0``) then ``sequence_pool(pool_type)``: one row per
    sequence, ``[num_sequences, num_filters]``.

    >>> import numpy as np
    >>> import lodtensor as lt
    >>> import lodtensor.fluid as fluid
    >>> def net(x):
    ...     return sequence_conv_pool(x, num_filters=2, filter_size=3, param_attr=fluid.initializer.Constant(1.0),
    ...                               act=None, pool_type="sum")
    >>> fluid.Program(net)(lt.LoDTensor(np.ones((3, 1), "float32"), [[0, 1, 3]])).data.tolist()
    [[1.0, 1.0], [4.0, 4.0]]
    """
    conv = sequence_conv(input=input, num_filters=num_filters, filter_size=filter_size, param_attr=param_attr,
                         bias_attr=bias_attr, act=act)
    return sequence_pool(conv, pool_type)
