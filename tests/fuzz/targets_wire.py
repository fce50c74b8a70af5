"""Fuzz targets for collectives and deep LoDs: the 2-rank operation matrix, LoDs of many levels, Arrow/Parquet export."""

from .targets import target  # noqa: F401 - the registry these targets join
