"""qcn-p4: IEEE 802.1Qau Quantized Congestion Notification on P4/BMv2.

One namespace, from the bottom up: the shared core (:mod:`qcn.core`: parameters, the
congestion point's reference model, the frame layouts, scenarios); the layers on it, whose
sources sit at the top of the checkout where the design card puts them and which this
package names (:mod:`qcn.controller`, :mod:`qcn.reaction_point`, :mod:`qcn.simulator`,
:mod:`qcn.topologies`, :mod:`qcn.ptf_tests`; docs/layout.md says why); and the ``qcn``
command on top (:mod:`qcn.cli`).  The data plane is ``p4src/``.
"""

__version__ = "0.1.0"
