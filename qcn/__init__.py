"""qcn-p4: IEEE 802.1Qau Quantized Congestion Notification on P4/BMv2.

The shared core lives here: parameters (:mod:`qcn.core.params`), the congestion-point
reference model (:mod:`qcn.core.cp_model`), the frame layouts (:mod:`qcn.core.frames`) and the
``qcn`` command line (:mod:`qcn.cli`).  The reaction point is :mod:`reaction_point`,
the data plane ``p4src/``.
"""

__version__ = "0.1.0"
