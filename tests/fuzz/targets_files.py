"""Fuzz targets for model files and saved tensors: .pdparams pickles, Paddle binary files, lt.load headers."""

from .targets import target  # noqa: F401 - the registry these targets join
