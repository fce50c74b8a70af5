"""The compiled kernels of the NumPy backend; all other metadata is in setup.cfg.

The extensions are optional: where no C compiler is found, the package installs
without them and the NumPy backend uses its NumPy-only kernels.
"""

from setuptools import Extension, setup

KERNELS = ("_csegment", "_cpointwise")  # segment sum, max, min, backward of softmax, max, min; GELU, relu

setup(
    ext_modules=[
        Extension(f"lodtensor.backend.numpy.{name}", [f"lodtensor/backend/numpy/{name}.c"], extra_compile_args=["-O3"],
                  # the instruction sets, the kernels' thread pool, _csegment.c's backward kernels and checks
                  depends=["lodtensor/backend/numpy/_csimd.h", "lodtensor/backend/numpy/_cbackward.h",
                           "lodtensor/backend/numpy/_cparallel.h", "lodtensor/backend/numpy/_cargs.h"], optional=True)
        for name in KERNELS
    ]
)
