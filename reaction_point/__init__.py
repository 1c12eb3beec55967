"""The QCN Reaction Point: the rate rules (:mod:`qcn.reaction_point.rules`) applied at the host."""

# Only ever qcn.reaction_point: a checkout puts its root on the import path, where this folder is
# importable by its own name too, which would make every module in it a second copy.
if __name__ == "reaction_point":
    raise ImportError("import qcn.reaction_point: reaction_point/ is its folder (docs/layout.md)")
