"""The P4Runtime controller that programs the congestion points."""

# Only ever qcn.controller: a checkout puts its root on the import path, where this folder is
# importable by its own name too, which would make every module in it a second copy.
if __name__ == "controller":
    raise ImportError("import qcn.controller: controller/ is its folder (docs/layout.md)")
