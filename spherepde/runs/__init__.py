"""The run pipeline: configuration → built model → every representation in step → run.nc.

config (sections, rules, files) → initial → build → outputs → execute → restart; sweep and
ensemble run many configurations on dask.  Below it: solvers, dynamics, noise, io; above it:
experiments (the paper studies) and the command line."""
