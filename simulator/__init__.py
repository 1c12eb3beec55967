"""The packet-level simulator backend of `qcn run` (same CP model, same RP rules)."""

# Only ever qcn.simulator: a checkout puts its root on the import path, where this folder is
# importable by its own name too, which would make every module in it a second copy.
if __name__ == "simulator":
    raise ImportError("import qcn.simulator: simulator/ is its folder (docs/layout.md)")
