"""The lab: running scenarios on a backend, and the studies made of many runs (sweeps,
tuning, comparisons of backends and of schemes), below the front doors.

The ``qcn`` command (:mod:`qcn.cli`) parses its arguments and prints; the Python API
(:mod:`qcn.api`), ``bench/`` and the tests call what they call here.  Nothing here
imports either front door.
"""
