"""PTF tests of the CP pipeline on BMv2 (run them with ``python -m ptf_tests.run``)."""
