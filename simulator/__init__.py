"""The packet-level simulator backend of `qcn run` (same CP model, same RP rules)."""
