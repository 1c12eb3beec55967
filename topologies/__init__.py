"""Mininet topologies of BMv2 switches running the congestion-point pipeline."""
