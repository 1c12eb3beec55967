"""bench/pipeline_bench.py's own logic: reading callgrind's dump (no switch needed)."""

from __future__ import annotations

from bench.pipeline_bench import PARSE, calls_to
from qcn.core.pipeline import OCCUPANCY_FRAMES_SHIFT, split_occupancy

# A callgrind dump in its compressed form: the parser is named in an fn= line first, and
# only referred to by id where it is called; another callee is named in its cfn= line.
DUMP = """\
fn=(7) bm::Parser::parse(bm::Packet*) const
0 40
fn=(3) SimpleSwitch::ingress_thread()
cfn=(7)
calls=3 0
0 120
cfn=(9) bm::Deparser::deparse(bm::Packet*) const
calls=5 0
0 50
fn=(4) bm::packet_handler(int, char const*, int, void*)
cfn=(7)
calls=2 0
0 80
"""


def test_calls_are_counted_by_name_through_compressed_ids() -> None:
    assert calls_to(DUMP, PARSE) == 5
    assert calls_to(DUMP, "bm::Deparser::deparse(") == 5
    assert calls_to(DUMP, "bm::Pipeline::apply(") == 0


def test_occupancy_word_holds_frames_above_bytes() -> None:
    """p4src/control/admission.p4 adds 1 << 32 | length per frame into one register cell."""
    word = (3 << OCCUPANCY_FRAMES_SHIFT) + 3 * 1500
    assert split_occupancy(word) == (3, 4500)
    assert split_occupancy(0) == (0, 0)
    assert split_occupancy((1 << OCCUPANCY_FRAMES_SHIFT) - 1) == (0, 2**32 - 1)
