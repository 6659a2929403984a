// gda device API: Broadcom NetXtreme-E / Thor2 (bnxt_re) send and receive WQEs, the PSN/MSN
// table, doorbells and CQE polling — what gda_bnxt's device functions do
// (providers/bnxt/src/device/mod.rs, mode.rs, wire/*.rs), for HIP, CUDA and host C++.
// Byte-for-byte equal to them, and to rdma-core v55's bnxt_re_post_send, on random requests
// (testing/rdma-ref tests/device_bnxt.rs). Formats: providers/bnxt/src/wire.
//
// | step      | here                                                                          |
// |-----------|-------------------------------------------------------------------------------|
// | position  | SqPos: unit (slot, or WQE in static/fixed-3), message number, PSN             |
// | WQE       | payload slots (SGEs / inline, or the fixed form's empty third slot), then the |
// |           | extended-header slot, the header slot last; variable-mode WQEs wrap per slot  |
// | PSN table | one entry per WQE: legacy 8 B, P5/P7 16 B, Thor2 MSN 8 B (Sq::mode.psn)        |
// | doorbell  | no record: one 64-bit release store of index | epoch | xid | valid | type     |
// | CQE       | 32 bytes, valid while its phase bit equals the pass parity (first pass: 1)    |
//
// A post writes one WQE at the reserved position (the caller reserved it: the posting
// protocol) and its PSN-table entry, and returns a Posted; ring_sq then publishes it. The epoch
// is the parity of the pass of the free-running unit counter, so concurrent producers never
// disagree about it. Nothing here allocates, loops without a bound, or checks a request: the
// caller posts only requests the queue can hold (gda's host side checks them, as Bnxt::check
// does: at most MAX_SGE entries, MAX_INLINE bytes — 1 entry and 16 bytes in the fixed form —,
// no masked atomics). All fields are little-endian, as every target gda supports.
#pragma once

#include "abi.hpp"
#include "arch.hpp"

namespace gda {
namespace bnxt {

// How send WQEs occupy the ring (gda_bnxt::WqeMode).
enum class WqeMode : uint8_t {
    Static = 0,    // every WQE 8 slots; unit = WQE; doorbell and PSN index = WQE index
    Variable = 1,  // a WQE takes the slots it uses and may wrap; unit = slot
    Fixed3 = 2,    // every WQE 3 slots (one SGE or up to 16 inline bytes); unit = WQE,
                   // doorbell index = slot index
};

// Which PSN-table entries software fills per WQE (gda_bnxt::PsnForm).
enum class PsnForm : uint8_t {
    Legacy = 0,  // 8-byte bnxt_re_psns, indexed by the doorbell index
    Ext = 1,     // 16-byte bnxt_re_psns_ext (P5/P7), same index
    Msn = 2,     // 8-byte bnxt_re_msns (Thor2), indexed by the message number mod the table
};

// gda_bnxt::Mode (#[repr(C)]).
struct Mode {
    WqeMode wqe;
    PsnForm psn;
};

// A Thor2 send queue: the C layout of gda_bnxt::BnxtSq (#[repr(C)]), built and validated on
// the host by BnxtSq::new (ring of `wq.entries` units, a power of two of at most 65536; PSN
// table at `psn_table` of `psn_entries` entries; path MTU 256..4096; first PSN).
struct Sq {
    WqHandle wq;
    uint64_t psn_table;
    uint32_t psn_entries;
    uint32_t path_mtu;
    uint32_t start_psn;
    Mode mode;
};
static_assert(sizeof(Mode) == 2 && offsetof(Mode, psn) == 1, "bnxt::Mode layout");
static_assert(sizeof(Sq) == 72 && offsetof(Sq, psn_table) == 48 &&
                  offsetof(Sq, psn_entries) == 56 && offsetof(Sq, path_mtu) == 60 &&
                  offsetof(Sq, start_psn) == 64 && offsetof(Sq, mode) == 68,
              "bnxt::Sq layout");

constexpr uint32_t SLOT_BYTES = 16;
constexpr uint32_t HDR_SLOTS = 2;
constexpr uint32_t MAX_INLINE = 96;        // BNXT_RE_MAX_INLINE_SIZE
constexpr uint32_t MAX_SGE = 6;
constexpr uint32_t FIXED3_MAX_INLINE = 16;
constexpr uint32_t PSN_MASK = 0xffffffu;
constexpr uint32_t CQE_BYTES = 32;
constexpr bool INITIAL_PHASE = true;       // BNXT_QPLIB_QUEUE_START_PERIOD

// WQE types (rsv_ws_fl_wt bits 7..0; nic-formats.md §E.3).
namespace wqe_type {
constexpr uint8_t SEND = 0x00, SEND_IMM = 0x01, RDMA_WRITE = 0x04, RDMA_WRITE_IMM = 0x05,
                  RDMA_READ = 0x06, ATOMIC_CS = 0x08, ATOMIC_FA = 0x0b, RECV = 0x80,
                  INVALID = 0xff;
}
// Header flag bits (rsv_ws_fl_wt bits 15..8).
namespace wqe_flag {
constexpr uint8_t SIGNALED = 0x01, RD_FENCE = 0x02, UC_FENCE = 0x04, SE = 0x08, INLINE = 0x10;
}
// Doorbell types (bits 63..60) and fields (nic-formats.md §E.5).
namespace db_type {
constexpr uint64_t SQ = 0x0, RQ = 0x1, CQ = 0x4;
}
constexpr uint64_t DB_INDEX_MASK = 0xffffffu;
constexpr uint32_t DB_EPOCH_SHIFT = 24;
constexpr uint32_t DB_XID_SHIFT = 32;
constexpr uint64_t DB_XID_MASK = 0xfffffu;
constexpr uint64_t DB_VALID = uint64_t(1) << 58;
constexpr uint32_t DB_TYPE_SHIFT = 60;
// CQE types (bcqe bits 4..1).
namespace cqe_type {
constexpr uint8_t REQ = 0x0, RECV_RC = 0x1;
}
// RC receive CQE flag bits.
namespace rc_flag {
constexpr uint16_t IMM = 1u << 1, RDMA = 1u << 3;
}
// gda_hal::WcOpcode numbering (what a work completion's `opcode` holds; the legacy and P5/P7
// PSN entries carry it in their opcode byte, as rdma-core records the ibv_wc_opcode).
namespace wc_opcode {
constexpr uint32_t SEND = 0, RDMA_WRITE = 1, RDMA_READ = 2, COMP_SWAP = 3, FETCH_ADD = 4,
                   RECV = 128, RECV_RDMA_WITH_IMM = 129, OTHER = 0xffffffffu;
}

// Trailing zero bits (32 for 0).
GDA_FN uint32_t ctz32(uint32_t x) {
    if (x == 0) return 32;
#if defined(GDA_DEVICE_PASS) && defined(GDA_TARGET_CUDA)
    return uint32_t(__ffs(int(x)) - 1);
#else
    return uint32_t(__builtin_ctz(x));
#endif
}

GDA_FN uint32_t slots_per_unit(WqeMode m) {
    return m == WqeMode::Static ? 8u : m == WqeMode::Variable ? 1u : 3u;
}
GDA_FN uint32_t entry_bytes(PsnForm f) { return f == PsnForm::Ext ? 16u : 8u; }

// Slots in the send ring.
GDA_FN uint32_t ring_slots(const Sq& sq) { return sq.wq.entries * slots_per_unit(sq.mode.wqe); }

// The doorbell index of free-running unit position `unit`: the WQE index (static), the slot
// index (variable, fixed-3).
GDA_FN uint32_t db_index(WqeMode m, uint32_t entries, uint32_t unit) {
    const uint32_t idx = unit & (entries - 1);
    return m == WqeMode::Fixed3 ? idx * 3 : idx;
}

// The epoch bit of free-running position `unit` of a ring of `entries` (a power of two): the
// parity of its pass.
GDA_FN bool epoch(uint32_t entries, uint32_t unit) {
    const uint32_t s = ctz32(entries);
    return s < 32 && ((unit >> s) & 1) != 0;
}

// The 64-bit doorbell value (stored little-endian).
GDA_FN uint64_t doorbell(uint64_t type, uint32_t xid, uint32_t index, bool ep) {
    return (uint64_t(index) & DB_INDEX_MASK) | (uint64_t(ep) << DB_EPOCH_SHIFT) |
           ((uint64_t(xid) & DB_XID_MASK) << DB_XID_SHIFT) | DB_VALID | (type << DB_TYPE_SHIFT);
}

// The SQ doorbell value for producer position `next`.
GDA_FN uint64_t sq_doorbell(const Sq& sq, uint32_t next) {
    return doorbell(db_type::SQ, sq.wq.qpn, db_index(sq.mode.wqe, sq.wq.entries, next),
                    epoch(sq.wq.entries, next));
}

// Packets of a message of `len` bytes at `mtu` bytes each: ceil(len / mtu), at least one, at
// most 2^24 - 1 (an mtu of 0 counts one). `mtu` is a power of two (BnxtSq::new accepts 256 to
// 4096 only), so the division is a shift: a GPU has no 64-bit divide instruction.
GDA_FN uint32_t packets(uint64_t len, uint32_t mtu) {
    if (mtu == 0 || len == 0) return 1;
    const uint64_t p = (len + (mtu - 1)) >> ctz32(mtu);
    return p > PSN_MASK ? PSN_MASK : uint32_t(p);
}

// One 16-byte slot, as two 8-byte halves in memory order; one 16-byte store where the target
// has one (slots are 16-byte aligned in a page-aligned ring). Plain stores: the WQE is
// published by ring_sq's release.
struct alignas(16) Unit {
    uint64_t lo, hi;
};

GDA_FN void put_slot(uint8_t* p, uint64_t lo, uint64_t hi) {
    *reinterpret_cast<Unit*>(p) = Unit{lo, hi};
}

// A gather entry: address, lkey, length.
GDA_FN Unit sge_unit(Sge s) { return Unit{s.addr, uint64_t(s.lkey) | (uint64_t(s.length) << 32)}; }

// A WQE being written: where its slots are and what its header says.
struct Wqe {
    uint8_t* base;   // the ring
    uint32_t first;  // its first slot
    uint32_t slots;  // slots in the ring
    uint32_t k;      // next payload slot
    GDA_FN uint8_t* at(uint32_t slot) const {
        uint32_t s = first + slot;
        if (s >= slots) s -= slots;
        return base + uint64_t(s) * SLOT_BYTES;
    }
};

GDA_FN Wqe begin(const Sq& sq, SqPos pos) {
    const uint32_t idx = pos.unit & (sq.wq.entries - 1);
    return Wqe{reinterpret_cast<uint8_t*>(sq.wq.buf), idx * slots_per_unit(sq.mode.wqe),
               ring_slots(sq), HDR_SLOTS};
}

GDA_FN uint8_t hdr_flags(uint32_t flags) {
    return uint8_t(((flags & send::SIGNALED) ? wqe_flag::SIGNALED : 0) |
                   ((flags & send::FENCE) ? wqe_flag::UC_FENCE : 0) |
                   ((flags & send::SOLICITED) ? wqe_flag::SE : 0));
}

// The PSN-table entry of the WQE at `pos` (`pkts` packets, opcode byte `opcode`), stored at its
// index: legacy/ext by doorbell index, MSN by message number modulo the table.
GDA_FN void put_psn_entry(const Sq& sq, SqPos pos, uint32_t pkts, uint32_t opcode) {
    const WqeMode m = sq.mode.wqe;
    const uint32_t start = (sq.start_psn + pos.psn) & PSN_MASK;
    const uint32_t next = (start + pkts) & PSN_MASK;
    const uint32_t idx = pos.unit & (sq.wq.entries - 1);
    const uint32_t first_slot = idx * slots_per_unit(m);
    const uint32_t dbi = db_index(m, sq.wq.entries, pos.unit);
    // psns_ext: the WQE's first slot; MSN: the doorbell index before the post (the WQE index in
    // static mode — rdma-core v55, testing/rdma-ref/csrc/bnxt/NOTES.md quirk 3).
    const bool msn = sq.mode.psn == PsnForm::Msn;
    const uint64_t start_slot = uint16_t(msn ? dbi : first_slot);
    const uint32_t index = msn ? (pos.msg & (sq.psn_entries - 1)) : dbi;
    uint64_t* dst = reinterpret_cast<uint64_t*>(
        sq.psn_table + uint64_t(index) * entry_bytes(sq.mode.psn));
    if (msn) {
        *dst = uint64_t(start) | (uint64_t(next) << 24) | (start_slot << 48);
    } else {
        const uint64_t legacy = uint64_t(start | ((opcode & 0xffu) << 24)) | (uint64_t(next) << 32);
        dst[0] = legacy;
        if (sq.mode.psn == PsnForm::Ext) dst[1] = start_slot;
    }
}

// Finishes a WQE: the fixed form's empty third slot, the extended header (slot 1), the header
// (slot 0) last, the PSN entry; returns the Posted (doorbell: the value for the next position).
GDA_FN Posted finish(const Sq& sq, SqPos pos, Wqe& w, uint8_t type, uint8_t fl, uint32_t key_immd,
                     uint64_t lhdr, Unit ext, uint64_t len, uint32_t opcode) {
    const WqeMode m = sq.mode.wqe;
    const uint32_t used = w.k;  // 2 + payload slots
    if (m == WqeMode::Fixed3 && w.k == HDR_SLOTS) {
        // The fixed form always has its third slot: an empty (zero-length) SGE.
        put_slot(w.at(w.k), 0, 0);
    }
    put_slot(w.at(1), ext.lo, ext.hi);
    const uint32_t wqe_size = m == WqeMode::Fixed3 ? 3u : used;
    const uint32_t word0 = uint32_t(type) | (uint32_t(fl) << 8) | ((wqe_size & 0xffu) << 16);
    put_slot(w.at(0), uint64_t(word0) | (uint64_t(key_immd) << 32), lhdr);

    const uint32_t pkts = packets(len, sq.path_mtu);
    put_psn_entry(sq, pos, pkts, opcode);
    const uint32_t units = m == WqeMode::Variable ? used : 1u;
    Posted p;
    p.start = pos;
    p.next = SqPos{pos.unit + units, pos.msg + 1, (pos.psn + pkts) & PSN_MASK};
    const uint64_t db = sq_doorbell(sq, p.next.unit);
    __builtin_memcpy(p.doorbell, &db, 8);
    return p;
}

// Gather entries from slot 2 on (zero-length ones too: each is a slot); their total length.
GDA_FN uint64_t put_sges(Wqe& w, const Sge* sges, uint32_t n) {
    uint64_t len = 0;
    for (uint32_t i = 0; i < n; ++i) {
        const Unit u = sge_unit(sges[i]);
        put_slot(w.at(w.k++), u.lo, u.hi);
        len += sges[i].length;
    }
    return len;
}

// Inline bytes from slot 2 on, 16 a slot, the last one zero-padded.
GDA_FN void put_inline(Wqe& w, const void* data, uint32_t len) {
    const uint8_t* d = static_cast<const uint8_t*>(data);
    for (uint32_t off = 0; off < len; off += 16) {
        uint8_t b[16] = {};
        const uint32_t n = len - off < 16 ? len - off : 16;
        __builtin_memcpy(b, d + off, n);
        uint64_t lo, hi;
        __builtin_memcpy(&lo, b, 8);
        __builtin_memcpy(&hi, b + 8, 8);
        put_slot(w.at(w.k++), lo, hi);
    }
}

// The RDMA extended header (WRITE, WRITE_WITH_IMM, READ).
GDA_FN Unit rdma_ext(Remote r) { return Unit{r.addr, uint64_t(r.rkey)}; }

// RDMA WRITE (WITH_IMM when `has_imm`; `imm` is the host-order value) gathering `sges`.
GDA_FN Posted post_write(const Sq& sq, SqPos pos, Remote remote, const Sge* sges, uint32_t n,
                         uint32_t flags, bool has_imm = false, uint32_t imm = 0) {
    Wqe w = begin(sq, pos);
    const uint64_t len = put_sges(w, sges, n);
    return finish(sq, pos, w, has_imm ? wqe_type::RDMA_WRITE_IMM : wqe_type::RDMA_WRITE,
                  hdr_flags(flags), has_imm ? imm : 0, len, rdma_ext(remote), len,
                  wc_opcode::RDMA_WRITE);
}

// RDMA WRITE (WITH_IMM when `has_imm`) of `len` inline bytes.
GDA_FN Posted post_write_inline(const Sq& sq, SqPos pos, Remote remote, const void* data,
                                uint32_t len, uint32_t flags, bool has_imm = false,
                                uint32_t imm = 0) {
    Wqe w = begin(sq, pos);
    put_inline(w, data, len);
    return finish(sq, pos, w, has_imm ? wqe_type::RDMA_WRITE_IMM : wqe_type::RDMA_WRITE,
                  uint8_t(hdr_flags(flags) | wqe_flag::INLINE), has_imm ? imm : 0, len,
                  rdma_ext(remote), len, wc_opcode::RDMA_WRITE);
}

// RDMA WRITE of a 4- or 8-byte value held in a register, inline: the same bytes as
// post_write_inline of its bytes, with no load of the payload.
template <class T>
GDA_FN Posted post_write_value(const Sq& sq, SqPos pos, Remote remote, T value, uint32_t flags) {
    static_assert(sizeof(T) == 4 || sizeof(T) == 8, "a 4- or 8-byte value");
    uint64_t bits = 0;
    __builtin_memcpy(&bits, &value, sizeof(T));
    Wqe w = begin(sq, pos);
    put_slot(w.at(w.k++), bits, 0);
    return finish(sq, pos, w, wqe_type::RDMA_WRITE, uint8_t(hdr_flags(flags) | wqe_flag::INLINE),
                  0, sizeof(T), rdma_ext(remote), sizeof(T), wc_opcode::RDMA_WRITE);
}

// SEND (WITH_IMM when `has_imm`) gathering `sges`.
GDA_FN Posted post_send(const Sq& sq, SqPos pos, const Sge* sges, uint32_t n, uint32_t flags,
                        bool has_imm = false, uint32_t imm = 0) {
    Wqe w = begin(sq, pos);
    const uint64_t len = put_sges(w, sges, n);
    return finish(sq, pos, w, has_imm ? wqe_type::SEND_IMM : wqe_type::SEND, hdr_flags(flags),
                  has_imm ? imm : 0, len, Unit{0, 0}, len, wc_opcode::SEND);
}

// SEND (WITH_IMM when `has_imm`) of `len` inline bytes.
GDA_FN Posted post_send_inline(const Sq& sq, SqPos pos, const void* data, uint32_t len,
                               uint32_t flags, bool has_imm = false, uint32_t imm = 0) {
    Wqe w = begin(sq, pos);
    put_inline(w, data, len);
    return finish(sq, pos, w, has_imm ? wqe_type::SEND_IMM : wqe_type::SEND,
                  uint8_t(hdr_flags(flags) | wqe_flag::INLINE), has_imm ? imm : 0, len,
                  Unit{0, 0}, len, wc_opcode::SEND);
}

// RDMA READ into `sges`.
GDA_FN Posted post_read(const Sq& sq, SqPos pos, Remote remote, const Sge* sges, uint32_t n,
                        uint32_t flags) {
    Wqe w = begin(sq, pos);
    const uint64_t len = put_sges(w, sges, n);
    return finish(sq, pos, w, wqe_type::RDMA_READ, hdr_flags(flags), 0, len, rdma_ext(remote),
                  len, wc_opcode::RDMA_READ);
}

// An 8-byte compare-swap or fetch-add on `remote`, its result to `local` (the entry as given).
// Thor2 has no masked atomics: the host check refuses them; given one anyway, the WQE has the
// invalid type, as gda_bnxt writes it.
GDA_FN Posted post_atomic(const Sq& sq, SqPos pos, Remote remote, Sge local, const Atomic& a,
                          uint32_t flags) {
    Wqe w = begin(sq, pos);
    const Unit l = sge_unit(local);
    put_slot(w.at(w.k++), l.lo, l.hi);
    uint8_t type = wqe_type::INVALID;
    Unit ext{0, 0};
    uint32_t opcode = wc_opcode::FETCH_ADD;
    if (a.kind == Atomic::CompareSwap) {
        type = wqe_type::ATOMIC_CS;
        ext = Unit{a.swap, a.compare};
        opcode = wc_opcode::COMP_SWAP;
    } else if (a.kind == Atomic::FetchAdd) {
        type = wqe_type::ATOMIC_FA;
        ext = Unit{a.add, 0};
    }
    return finish(sq, pos, w, type, hdr_flags(flags), remote.rkey, remote.addr, ext, 8, opcode);
}

// A NOP: bnxt has no NOP type, so a zero-length RDMA WRITE (remote address and key unused) —
// what quiet posts to get a signalled completion.
GDA_FN Posted post_nop(const Sq& sq, SqPos pos, uint32_t flags) {
    Wqe w = begin(sq, pos);
    return finish(sq, pos, w, wqe_type::RDMA_WRITE, hdr_flags(flags), 0, 0, Unit{0, 0}, 0,
                  wc_opcode::RDMA_WRITE);
}

// Slots a request of `payload_slots` slots after the header takes in the ring (Posted tells the
// same after a post): the unit count the posting protocol reserves.
GDA_FN uint32_t units_for(WqeMode m, uint32_t payload_slots) {
    return m == WqeMode::Variable ? HDR_SLOTS + payload_slots : 1u;
}

// Publishes posted WQEs: release fence, then one 64-bit release store of the doorbell (pairs
// with the NIC's — or the software NIC's acquire — read of the doorbell word: the WQE and
// PSN-table stores before it are visible first; one store, so two producers' halves never
// mix), then a flush so later stores do not pass it. One lane per QP per call.
GDA_FN void ring_sq(const Sq& sq, const Posted& p) {
    arch::wqe_to_dbrec_fence();
    uint64_t v;
    __builtin_memcpy(&v, p.doorbell, 8);
    arch::store_u64_release(reinterpret_cast<uint64_t*>(sq.wq.db), v);
    arch::wc_flush();
}

// A receive WQE at free-running position `at` of `rq` (`stride` bytes a WQE): header slot
// (type RECV, slots used, tag = ring slot), a reserved slot, then the entries that fit the
// stride (a zero-entry receive carries one empty entry).
GDA_FN void post_recv(const WqHandle& rq, uint32_t at, const Sge* sges, uint32_t n) {
    const uint32_t slot = at & (rq.entries - 1);
    uint8_t* base = reinterpret_cast<uint8_t*>(rq.buf + uint64_t(slot) * rq.stride);
    const uint32_t cap = rq.stride / 16;
    const uint32_t room = cap > 2 ? cap - 2 : 0;
    const uint32_t m = n < room ? n : room;
    put_slot(base + 16, 0, 0);
    for (uint32_t i = 0; i < m; ++i) {
        const Unit u = sge_unit(sges[i]);
        put_slot(base + 16 * (2 + i), u.lo, u.hi);
    }
    if (m == 0 && cap > 2) put_slot(base + 32, 0, 0);
    const uint32_t word0 = uint32_t(wqe_type::RECV) | ((2 + (m == 0 ? 1 : m)) << 16);
    put_slot(base, uint64_t(word0), uint64_t(slot));
}

// The RQ doorbell for producer position `next`: fences as ring_sq.
GDA_FN void ring_rq(const WqHandle& rq, uint32_t next) {
    const uint64_t v =
        doorbell(db_type::RQ, rq.qpn, next & (rq.entries - 1), epoch(rq.entries, next));
    arch::wqe_to_dbrec_fence();
    arch::store_u64_release(reinterpret_cast<uint64_t*>(rq.db), v);
    arch::wc_flush();
}

// The CQ doorbell: consumer index `ci` (type CQ, index = new head, epoch = its pass parity).
// Release: the CQEs read before it are consumed (pairs with the NIC's read before it reuses
// their slots). Nothing when the CQ has no doorbell.
GDA_FN void update_cq_ci(const CqHandle& cq, uint32_t ci) {
    if (cq.db == 0) return;
    const uint64_t v = doorbell(db_type::CQ, cq.cqn, ci & (cq.entries - 1),
                                epoch(cq.entries ? cq.entries : 1, ci));
    arch::store_u64_release(reinterpret_cast<uint64_t*>(cq.db), v);
}

// ---------------------------------------------------------------------------------------------
// Completions.

// A work completion (gda_hal::WorkCompletion): `opcode` in wc_opcode numbering.
struct Wc {
    WcStatus status;
    uint32_t opcode;
    uint32_t wqe_counter;  // requester: con_indx mod 2^16 (after the retired WQEs); RC recv: tag
    uint32_t byte_len;
    uint32_t imm;          // valid when has_imm
    uint32_t qpn;
    uint8_t vendor_err;    // the raw status, 0 on success
    bool has_imm;
    bool is_recv;
};

// The ibv_wc_status of a requester CQE's status (bnxt_re_to_ibv_wc_status).
GDA_FN WcStatus req_status(uint8_t s) {
    switch (s) {
        case 0x00: return WcStatus::Success;
        case 0x01: return WcStatus::BadRespErr;
        case 0x02: return WcStatus::LocLenErr;
        case 0x03: return WcStatus::LocQpOpErr;
        case 0x04: return WcStatus::LocProtErr;
        case 0x05: return WcStatus::MwBindErr;
        case 0x06: return WcStatus::RemInvReqErr;
        case 0x07: return WcStatus::RemAccessErr;
        case 0x08: return WcStatus::RemOpErr;
        case 0x09: return WcStatus::RnrRetryExcErr;
        case 0x0a: return WcStatus::RetryExcErr;
        case 0x0b: return WcStatus::WrFlushErr;
        default: return WcStatus::GeneralErr;
    }
}

// The ibv_wc_status of a responder CQE's status (the table differs from the requester's).
GDA_FN WcStatus resp_status(uint8_t s) {
    switch (s) {
        case 0x00: return WcStatus::Success;
        case 0x01: return WcStatus::LocAccessErr;
        case 0x02: return WcStatus::LocLenErr;
        case 0x03: return WcStatus::LocProtErr;
        case 0x04: return WcStatus::LocQpOpErr;
        case 0x05: return WcStatus::MwBindErr;
        case 0x06: return WcStatus::RemInvReqErr;
        case 0x07: return WcStatus::WrFlushErr;
        case 0x08: return WcStatus::FatalErr;
        default: return WcStatus::GeneralErr;
    }
}

// Decodes a CQE, given as its four 8-byte words in memory order, as gda_bnxt's Bnxt::decode:
// QP number from the qp_handle (the control path sets it to the QP number); requester CQEs
// carry no opcode (OTHER) or length, and their wqe_counter is con_indx, in doorbell units,
// pointing after the retired WQEs.
GDA_FN Wc decode(const uint64_t c[4]) {
    const uint32_t w = uint32_t(c[3]);
    const uint32_t q = uint32_t(c[3] >> 32);
    const uint8_t type = uint8_t((w >> 1) & 0xf);
    const uint8_t status = uint8_t(w >> 8);
    const uint16_t fl = uint16_t(w >> 16);
    // A requester body is qp_handle (bytes 0..8), con_indx (8..12) and zeros (12..24).
    const bool req_body = type == cqe_type::REQ && (c[1] >> 32) == 0 && c[2] == 0;
    const bool rc_body = type == cqe_type::RECV_RC;
    Wc wc{};
    wc.status = WcStatus::Success;
    wc.opcode = wc_opcode::OTHER;
    wc.vendor_err = status;
    // QP number: the qp_handle's low 24 bits (requester: bytes 0..8, RC receive: 8..16);
    // for any other CQE, bytes 0..3.
    wc.qpn = uint32_t(rc_body ? c[1] : c[0]) & 0xffffffu;
    if (type == cqe_type::REQ) {
        wc.status = req_status(status);
        if (req_body) wc.wqe_counter = uint32_t(c[1]) & 0xffffu;
    } else if (rc_body) {
        wc.is_recv = true;
        wc.status = resp_status(status);
        wc.byte_len = uint32_t(c[0]);
        wc.wqe_counter = q & 0xfffffu;
        wc.opcode = (fl & rc_flag::RDMA) ? wc_opcode::RECV_RDMA_WITH_IMM : wc_opcode::RECV;
        wc.has_imm = (fl & rc_flag::IMM) != 0;
        wc.imm = wc.has_imm ? uint32_t(c[0] >> 32) : 0;
    } else {
        wc.status = WcStatus::GeneralErr;
    }
    if (wc.status == WcStatus::Success) wc.vendor_err = 0;
    return wc;
}

// Decodes a CQE's 32 bytes.
GDA_FN Wc decode(const uint8_t* bytes) {
    uint64_t c[4];
    __builtin_memcpy(c, bytes, sizeof c);
    return decode(c);
}

// The CQE at free-running consumer position `ci`, if the device has written it: its status
// word (offset 24) read with acquire, valid while its phase bit equals INITIAL_PHASE flipped
// once per pass; then the whole CQE (ordered after that load by the acquire). False for a ring
// that is not a power of two.
GDA_FN bool poll_cq(const CqHandle& cq, uint32_t ci, Wc* out) {
    if (cq.entries == 0 || (cq.entries & (cq.entries - 1)) != 0) return false;
    const uint32_t log2 = ctz32(cq.entries);
    const uint32_t slot = ci & (cq.entries - 1);
    const uint32_t stride = cq.cqe_bytes > CQE_BYTES ? cq.cqe_bytes : CQE_BYTES;
    const uint64_t addr = cq.buf + uint64_t(slot) * stride;
    // Acquire pairs with the device's CQE write: the words read below are those it wrote
    // before it set the phase bit.
    const uint32_t w = arch::load_u32_acquire(reinterpret_cast<const uint32_t*>(addr + 24));
    const uint32_t expected = uint32_t(INITIAL_PHASE) ^ ((ci >> log2) & 1);
    if ((w & 1) != expected) return false;
    const volatile uint64_t* src = reinterpret_cast<const volatile uint64_t*>(addr);
    const uint64_t c[4] = {src[0], src[1], src[2], src[3]};
    *out = decode(c);
    return true;
}

// Bits of the requester's consumer index that are valid for this queue (log2 of the ring,
// 1..16): what the posting protocol widens.
GDA_FN uint32_t completion_bits(const Sq& sq) {
    const uint32_t b = ctz32(sq.wq.entries);
    return b < 1 ? 1 : b > 16 ? 16 : b;
}

// The unit of the newest WQE a requester CQE retires: con_indx is in doorbell units (slots in
// the fixed form) and points after the retired WQEs; the unit before it lies in the newest.
GDA_FN uint32_t completed_unit(const Sq& sq, uint32_t wqe_counter) {
    const uint32_t units = sq.mode.wqe == WqeMode::Fixed3 ? wqe_counter / 3 : wqe_counter;
    return units - 1;
}

}  // namespace bnxt
}  // namespace gda
