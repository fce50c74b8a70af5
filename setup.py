"""The compiled kernels of the NumPy backend; all other metadata is in setup.cfg.

The extensions are optional: where no C compiler is found, the package installs
without them and the NumPy backend uses its NumPy-only kernels.
"""

from setuptools import Extension, setup

KERNELS = ("_csegment", "_cpointwise")  # segment sum, max, min and softmax backward; GELU and relu

setup(
    ext_modules=[
        Extension(f"lodtensor.backend.numpy.{name}", [f"lodtensor/backend/numpy/{name}.c"], extra_compile_args=["-O3"],
                  depends=["lodtensor/backend/numpy/_csimd.h"], optional=True)  # the instruction-set dispatch
        for name in KERNELS
    ]
)
