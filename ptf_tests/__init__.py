"""PTF tests of the CP pipeline on BMv2 (run them with ``python -m qcn.ptf_tests.run``)."""
