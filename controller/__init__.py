"""The P4Runtime controller that programs the congestion points."""
