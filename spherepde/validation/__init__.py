"""Validation: metrics, exact solutions, standard test cases, paper experiments, studies.

Nothing in the package imports this sub-package except the command line and the tests.
"""
