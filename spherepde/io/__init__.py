"""Input/output: CF-1.8 NetCDF files (incremental writer, xarray readers).

Sits on top of the package: it may import grids (and anything below), nothing below imports
it at module level.
"""
from __future__ import annotations

from spherepde.io.netcdf import (
    NetCDFWriter,
    config_to_json,
    open_dataset,
    read_config,
    write_dataset,
)

__all__ = ["NetCDFWriter", "config_to_json", "open_dataset", "read_config", "write_dataset"]
