"""The QCN Reaction Point: the rate rules (:mod:`qcn.reaction_point.rules`) applied at the host."""
