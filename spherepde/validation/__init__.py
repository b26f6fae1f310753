"""Validation: what a run is measured against and how — metrics of measures, exact solutions,
the standard transport cases, fits, the cluster count on S¹.

Pure functions and small classes on arrays and grids: nothing here runs a model, writes a file
or imports :mod:`spherepde.io` or :mod:`spherepde.experiments` (the runs that use these are
assembled in :mod:`spherepde.experiments`; ``tests/test_layers.py`` checks it).
"""
