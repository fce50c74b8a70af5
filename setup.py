"""The compiled segment kernel; all other metadata is in setup.cfg.

The extension is optional: where no C compiler is found, the package installs
without it and the NumPy backend uses its NumPy-only kernels.
"""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "lodtensor.backend._csegment",
            ["lodtensor/backend/_csegment.c"],
            extra_compile_args=["-O3"],
            optional=True,
        )
    ]
)
