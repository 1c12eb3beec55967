"""The front door: the ``qcn`` command (:mod:`qcn.cli.main`) and what its commands share.

It stands on top of everything and nothing imports it: the core (:mod:`qcn.core`) at the
bottom, then the layers (``qcn.controller``, ``qcn.reaction_point``, ``qcn.simulator``,
``qcn.topologies``), then these commands.  A run reaches a backend only through
:mod:`qcn.lab.backends` (``tests/test_structure.py`` holds both rules).
"""
