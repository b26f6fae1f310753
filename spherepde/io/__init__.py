"""Input/output: CF-1.8 NetCDF files (incremental writer, the run loop's NetCDF tracker,
xarray readers).

Sits on top of the package: it may import grids and solvers (the Tracker base); nothing below
imports it.
"""
from __future__ import annotations

from spherepde.io.netcdf import open_dataset, read_config
from spherepde.io.netcdf_layout import config_to_json
from spherepde.io.netcdf_writer import NetCDFTracker, NetCDFWriter, write_dataset

__all__ = ["NetCDFTracker", "NetCDFWriter", "config_to_json", "open_dataset", "read_config", "write_dataset"]
