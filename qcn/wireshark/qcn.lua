-- Wireshark dissector for IEEE 802.1Qau (QCN) frames as qcn-p4 sends them:
--   the Congestion Notification Message (CNM, EtherType 0x22E7), the CN-TAG (0x22E9), and
--   seed 003's Fb tag of three-point QCN (0x88B6; docs/qcn.md, "The Fb tag"); and what
--   follows the BTH of DCQCN's CNP (RoCEv2), which Wireshark's own dissector leaves unnamed.
--
-- Load it ad hoc with `tshark -X lua_script:qcn.lua ...` (or `wireshark -X ...`), or install it
-- into Wireshark's personal plugin folder with `qcn wireshark --install`.
--
-- The layout is the project's one definition of the CNM (qcn/core/frames.py, the CNM scapy
-- layer; p4src/include/headers.p4 on the switch's side); docs/wireshark.md lists every
-- display-filter name. Offsets below are into the 24-byte CNM PDU:
--    0  version:4 | reserved:5 | fb_positive:1 | qntz_fb:6
--    2  CPID (8 bytes: the CP switch's MAC, then its port in qcn-p4)
--   10  cnmQOffset (signed)    12  cnmQDelta (signed)
--   14  encapsulated priority:3 | reserved:13
--   16  encapsulated destination MAC      22  encapsulated MSDU length
--   24  the encapsulated MSDU: the sampled frame from its EtherType on, at most 64 bytes

local ETHERTYPE_CNM = 0x22E7
local ETHERTYPE_CNTAG = 0x22E9
local ETHERTYPE_FB_TAG = 0x88B6
local FB_TAG_BYTES = 16
local ETHERTYPE_IPV4 = 0x0800
local ETHERTYPE_IPV6 = 0x86DD
local CNM_PDU_BYTES = 24
local CNM_MAX_MSDU_BYTES = 64
local CNM_VERSION = 0

local ethertype_table = DissectorTable.get("ethertype")

-- CN-TAG ----------------------------------------------------------------------------------

local cntag = Proto("qcn.cntag", "802.1Qau Congestion Notification Tag")
local tag_fields = {
    flow_id = ProtoField.uint16("qcn.cntag.flow_id", "Flow ID", base.HEX),
    type = ProtoField.uint16("qcn.cntag.type", "Type", base.HEX),
}
cntag.fields = { tag_fields.flow_id, tag_fields.type }

function cntag.dissector(tvb, pinfo, tree)
    if tvb:len() < 4 then
        return 0
    end
    local t = tree:add(cntag, tvb(0, 4))
    t:add(tag_fields.flow_id, tvb(0, 2))
    t:add(tag_fields.type, tvb(2, 2))
    t:append_text(string.format(", Flow ID 0x%04x", tvb(0, 2):uint()))
    pinfo.cols.protocol:set("CN-TAG")
    if tvb:len() > 4 then
        ethertype_table:try(tvb(2, 2):uint(), tvb(4):tvb(), pinfo, tree)
    end
    return tvb:len()
end

-- Fb tag (qcn/core/frames.py's FbTagHeader) ----------------------------------------------
--    0  reflected:1 | reserved:9 | qntz_fb:6     2  CPID     10  qoff     12  qdelta
--   14  the frame's own EtherType

local fbtag = Proto("qcn.fbtag", "qcn-p4 three-point Fb tag")
local fb_fields = {
    reflected = ProtoField.bool("qcn.fbtag.reflected", "Reflected", 16, nil, 0x8000),
    reserved = ProtoField.uint16("qcn.fbtag.reserved", "Reserved", base.HEX, nil, 0x7FC0),
    qntzfb = ProtoField.uint16("qcn.fbtag.qntzfb", "Quantized feedback", base.DEC, nil, 0x003F),
    cpid = ProtoField.uint64("qcn.fbtag.cpid", "CPID of the CP that measured it", base.HEX),
    qoff = ProtoField.int16("qcn.fbtag.qoff", "cnmQOffset", base.DEC),
    qdelta = ProtoField.int16("qcn.fbtag.qdelta", "cnmQDelta", base.DEC),
    type = ProtoField.uint16("qcn.fbtag.type", "Type", base.HEX),
}
fbtag.fields = {
    fb_fields.reflected, fb_fields.reserved, fb_fields.qntzfb, fb_fields.cpid,
    fb_fields.qoff, fb_fields.qdelta, fb_fields.type,
}

function fbtag.dissector(tvb, pinfo, tree)
    if tvb:len() < FB_TAG_BYTES then
        return 0
    end
    local t = tree:add(fbtag, tvb(0, FB_TAG_BYTES))
    t:add(fb_fields.reflected, tvb(0, 2))
    t:add(fb_fields.reserved, tvb(0, 2))
    t:add(fb_fields.qntzfb, tvb(0, 2))
    t:add(fb_fields.cpid, tvb(2, 8))
    t:add(fb_fields.qoff, tvb(10, 2))
    t:add(fb_fields.qdelta, tvb(12, 2))
    t:add(fb_fields.type, tvb(14, 2))
    local reflected = bit.band(tvb(0, 2):uint(), 0x8000) ~= 0
    t:append_text(string.format(", QntzFb %d%s", bit.band(tvb(0, 2):uint(), 0x3F),
        reflected and ", reflected" or ""))
    if tvb:len() > FB_TAG_BYTES then
        ethertype_table:try(tvb(14, 2):uint(), tvb(FB_TAG_BYTES):tvb(), pinfo, tree)
    end
    return tvb:len()
end

-- CNM -------------------------------------------------------------------------------------

local cnm = Proto("qcn.cnm", "802.1Qau Congestion Notification Message")
local f = {
    version = ProtoField.uint16("qcn.cnm.version", "Version", base.DEC, nil, 0xF000),
    reserved = ProtoField.uint16("qcn.cnm.reserved", "Reserved", base.HEX, nil, 0x0F80),
    fb_positive = ProtoField.bool("qcn.cnm.fb_positive", "Positive feedback (ECM)", 16,
        nil, 0x0040, "qcn-p4's use of the lowest reserved bit: an ECM CP's Fb > 0"),
    qntzfb = ProtoField.uint16("qcn.cnm.qntzfb", "Quantized feedback", base.DEC, nil, 0x003F),
    cpid = ProtoField.uint64("qcn.cnm.cpid", "CPID", base.HEX),
    cpid_mac = ProtoField.ether("qcn.cnm.cpid.mac", "CP switch MAC"),
    cpid_port = ProtoField.uint16("qcn.cnm.cpid.port", "CP port", base.DEC),
    qoff = ProtoField.int16("qcn.cnm.qoff", "cnmQOffset", base.DEC),
    qdelta = ProtoField.int16("qcn.cnm.qdelta", "cnmQDelta", base.DEC),
    encap_priority = ProtoField.uint16("qcn.cnm.encap_priority", "Encapsulated priority",
        base.DEC, nil, 0xE000),
    encap_reserved = ProtoField.uint16("qcn.cnm.encap_reserved", "Encapsulated priority reserved",
        base.HEX, nil, 0x1FFF),
    encap_da = ProtoField.ether("qcn.cnm.encap_da", "Encapsulated destination MAC"),
    msdu_len = ProtoField.uint16("qcn.cnm.msdu_len", "Encapsulated MSDU length", base.DEC),
    msdu = ProtoField.bytes("qcn.cnm.msdu", "Encapsulated MSDU"),
    msdu_type = ProtoField.uint16("qcn.cnm.msdu.type", "Encapsulated EtherType", base.HEX),
}
cnm.fields = {
    f.version, f.reserved, f.fb_positive, f.qntzfb, f.cpid, f.cpid_mac, f.cpid_port, f.qoff,
    f.qdelta, f.encap_priority, f.encap_reserved, f.encap_da, f.msdu_len, f.msdu, f.msdu_type,
}

local e = {
    version = ProtoExpert.new("qcn.cnm.version.unknown", "CNM version is not 0",
        expert.group.PROTOCOL, expert.severity.WARN),
    reserved = ProtoExpert.new("qcn.cnm.reserved.set", "Reserved bits are set",
        expert.group.PROTOCOL, expert.severity.WARN),
    too_long = ProtoExpert.new("qcn.cnm.msdu_len.beyond_frame",
        "Encapsulated MSDU length is beyond the frame", expert.group.MALFORMED,
        expert.severity.WARN),
    over_max = ProtoExpert.new("qcn.cnm.msdu_len.over_max",
        "Encapsulated MSDU is longer than 802.1Qau's 64 bytes", expert.group.PROTOCOL,
        expert.severity.WARN),
    truncated = ProtoExpert.new("qcn.cnm.msdu.truncated",
        "Encapsulated MSDU is truncated (the sampled frame was longer)", expert.group.PROTOCOL,
        expert.severity.WARN),
    short = ProtoExpert.new("qcn.cnm.short", "Frame too short for a CNM PDU",
        expert.group.MALFORMED, expert.severity.ERROR),
}
cnm.experts = { e.version, e.reserved, e.too_long, e.over_max, e.truncated, e.short }

-- How long the sampled frame was from its EtherType on, read from the MSDU's own IP header
-- (past any CN-TAGs); nil when the MSDU does not say.
local function sampled_length(msdu)
    local at = 0
    while msdu:len() >= at + 2 and msdu(at, 2):uint() == ETHERTYPE_CNTAG do
        at = at + 4
    end
    if msdu:len() < at + 2 then
        return nil
    end
    local ethertype = msdu(at, 2):uint()
    if ethertype == ETHERTYPE_IPV4 and msdu:len() >= at + 6 then
        return at + 2 + msdu(at + 4, 2):uint()
    elseif ethertype == ETHERTYPE_IPV6 and msdu:len() >= at + 8 then
        return at + 2 + 40 + msdu(at + 6, 2):uint()
    end
    return nil
end

-- A MAC as six hex pairs (no vendor name: a CP's MAC is usually locally administered).
local function mac_text(range)
    local parts = {}
    for i = 0, 5 do
        parts[#parts + 1] = string.format("%02x", range(i, 1):uint())
    end
    return table.concat(parts, ":")
end

-- The frame is a CNM whatever it carries: its columns, kept after the MSDU's own dissectors
-- (and the addresses the columns are filled from at the end) have written theirs.
local function cnm_columns(pinfo, info)
    pinfo.cols.protocol:set("CNM")
    pinfo.cols.info:set(info)
    pinfo.src = pinfo.dl_src
    pinfo.dst = pinfo.dl_dst
end

function cnm.dissector(tvb, pinfo, tree)
    local t = tree:add(cnm, tvb(0, math.min(tvb:len(), CNM_PDU_BYTES)))
    if tvb:len() < CNM_PDU_BYTES then
        t:add_proto_expert_info(e.short)
        return 0
    end
    local head = tvb(0, 2)
    local version_item = t:add(f.version, head)
    local reserved_item = t:add(f.reserved, head)
    t:add(f.fb_positive, head)
    t:add(f.qntzfb, head)
    local cpid = t:add(f.cpid, tvb(2, 8))
    cpid:add(f.cpid_mac, tvb(2, 6))
    cpid:add(f.cpid_port, tvb(8, 2))
    t:add(f.qoff, tvb(10, 2))
    t:add(f.qdelta, tvb(12, 2))
    t:add(f.encap_priority, tvb(14, 2))
    local encap_reserved_item = t:add(f.encap_reserved, tvb(14, 2))
    t:add(f.encap_da, tvb(16, 6))
    local len_item = t:add(f.msdu_len, tvb(22, 2))

    local bits = head:uint()
    if bit32.rshift(bits, 12) ~= CNM_VERSION then
        version_item:add_proto_expert_info(e.version)
    end
    if bit32.band(bits, 0x0F80) ~= 0 then
        reserved_item:add_proto_expert_info(e.reserved)
    end
    if bit32.band(tvb(14, 2):uint(), 0x1FFF) ~= 0 then
        encap_reserved_item:add_proto_expert_info(e.reserved)
    end

    local qntzfb = bit32.band(bits, 0x003F)
    local positive = bit32.band(bits, 0x0040) ~= 0
    local info = string.format("CNM %sQntzFb=%d qoff=%d qdelta=%d CP %s port %d",
        positive and "positive " or "", qntzfb, tvb(10, 2):int(), tvb(12, 2):int(),
        mac_text(tvb(2, 6)), tvb(8, 2):uint())
    t:append_text(string.format(", QntzFb %d%s", qntzfb, positive and " (positive)" or ""))

    cnm_columns(pinfo, info)
    local msdu_len = tvb(22, 2):uint()
    local left = tvb:len() - CNM_PDU_BYTES
    if msdu_len > left then
        len_item:add_proto_expert_info(e.too_long,
            string.format("Encapsulated MSDU length %d is beyond the %d bytes left in the frame",
                msdu_len, left))
    end
    if msdu_len > CNM_MAX_MSDU_BYTES then
        len_item:add_proto_expert_info(e.over_max)
    end
    local carried = math.min(msdu_len, left)
    if carried > 0 then
        local msdu_range = tvb(CNM_PDU_BYTES, carried)
        local msdu_item = t:add(f.msdu, msdu_range)
        local msdu = msdu_range:tvb()
        local length = sampled_length(msdu)
        if length ~= nil and length > carried then
            msdu_item:add_proto_expert_info(e.truncated,
                string.format("Encapsulated MSDU is truncated: %d of the sampled frame's %d bytes",
                    carried, length))
        end
        if carried >= 2 then
            msdu_item:add(f.msdu_type, msdu(0, 2))
            if carried > 2 then
                -- The sampled frame, decoded as the Ethernet payload it was; a frame cut
                -- short in it is its own dissectors' finding, not the CNM's end.
                pcall(function()
                    ethertype_table:try(msdu(0, 2):uint(), msdu(2):tvb(), pinfo, msdu_item)
                end)
            end
        end
    end
    cnm_columns(pinfo, info)
    return CNM_PDU_BYTES + carried
end

ethertype_table:add(ETHERTYPE_CNM, cnm)
ethertype_table:add(ETHERTYPE_CNTAG, cntag)
ethertype_table:add(ETHERTYPE_FB_TAG, fbtag)

-- RoCEv2's CNP (DCQCN) ----------------------------------------------------------------------
-- Wireshark's own InfiniBand dissector decodes a CNP's BTH (UDP port 4791), but 4.0 knows no
-- opcode 0x81: the 16 reserved bytes and the ICRC after it are an unknown payload to it.
-- This postdissector names them (qcn/core/frames.py, scapy.contrib.roce, is the layout).

local BTH_OPCODE_CNP = 0x81
local CNP_RESERVED_BYTES = 16
local ICRC_BYTES = 4
local bth_opcode = Field.new("infiniband.bth.opcode")
local ib_unknown_payload = Field.new("infiniband.vendor")

local cnp = Proto("qcn.cnp", "RoCEv2 Congestion Notification Packet (DCQCN)")
local pf = {
    reserved = ProtoField.bytes("qcn.cnp.reserved", "Reserved"),
    icrc = ProtoField.uint32("qcn.cnp.icrc", "Invariant CRC (ICRC)", base.HEX),
}
cnp.fields = { pf.reserved, pf.icrc }
local pe = {
    reserved = ProtoExpert.new("qcn.cnp.reserved.set", "A CNP reserved byte is not zero",
        expert.group.PROTOCOL, expert.severity.WARN),
    length = ProtoExpert.new("qcn.cnp.length",
        "A CNP's BTH is followed by 16 reserved bytes and the ICRC, and nothing else",
        expert.group.MALFORMED, expert.severity.ERROR),
}
cnp.experts = { pe.reserved, pe.length }

function cnp.dissector(_tvb, pinfo, tree)
    local opcode = bth_opcode()
    if opcode == nil or opcode.value ~= BTH_OPCODE_CNP then
        return
    end
    -- The payload item appears twice (a header and its subtree): the longer is all of it.
    local payload = nil
    for _, fi in ipairs({ ib_unknown_payload() }) do
        if payload == nil or fi.range:len() > payload:len() then
            payload = fi.range
        end
    end
    if payload == nil then
        return
    end
    local t = tree:add(cnp, payload)
    pinfo.cols.protocol:set("CNP")
    if payload:len() ~= CNP_RESERVED_BYTES + ICRC_BYTES then
        t:add_proto_expert_info(pe.length,
            string.format("A CNP's BTH is followed by %d bytes, not %d", payload:len(),
                CNP_RESERVED_BYTES + ICRC_BYTES))
        return
    end
    local reserved_item = t:add(pf.reserved, payload(0, CNP_RESERVED_BYTES))
    for i = 0, CNP_RESERVED_BYTES - 1 do
        if payload(i, 1):uint() ~= 0 then
            reserved_item:add_proto_expert_info(pe.reserved)
            break
        end
    end
    -- Sent least significant byte first (RoCEv2, as scapy.contrib.roce packs it).
    t:add_le(pf.icrc, payload(CNP_RESERVED_BYTES, ICRC_BYTES))
end

register_postdissector(cnp)
