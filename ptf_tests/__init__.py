"""PTF tests of the CP pipeline on BMv2 (run them with ``python -m qcn.ptf_tests.run``)."""

# Only ever qcn.ptf_tests: a checkout puts its root on the import path, where this folder is
# importable by its own name too, which would make every module in it a second copy.  (PTF
# loads each file of its --test-dir by the file's name, this one as ``__init__``: let it.)
if __name__ == "ptf_tests":
    raise ImportError("import qcn.ptf_tests: ptf_tests/ is its folder (docs/layout.md)")
