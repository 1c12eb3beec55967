"""The QCN Reaction Point: the rate rules (:mod:`reaction_point.rules`) applied at the host."""
