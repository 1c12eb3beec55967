"""Mininet topologies of BMv2 switches running the congestion-point pipeline."""

# Only ever qcn.topologies: a checkout puts its root on the import path, where this folder is
# importable by its own name too, which would make every module in it a second copy.
if __name__ == "topologies":
    raise ImportError("import qcn.topologies: topologies/ is its folder (docs/layout.md)")
