//! gda-bnxt's wire layer against rdma-core's own bnxt_re provider (v55, compiled from the source
//! vendored in ibverbs-sys): doorbell words for every type, and the header, extended header,
//! SGE, PSN entry and doorbell of posted WQEs (static mode, the fact sheet's reference case and
//! random WRITE/READ requests).

use gda_bnxt::wire::{
    BnxtSge, DbType, DoorbellRepr, PsnRepr, RdmaExt, SqeHdrRepr, WqeType, psn, sqe,
};
use gda_hal::{Remote, Sge};
use gda_rdma_ref::bnxt::{self, BrefQpCfg, BrefSge, BrefWr};
use proptest::prelude::*;

proptest! {
    #![proptest_config(ProptestConfig { cases: 2000, ..ProptestConfig::default() })]

    #[test]
    fn doorbells_match_db_c(t in proptest::sample::select(vec![0u32, 1, 2, 4, 5, 6]), xid in 0u32..1 << 20, index in 0u32..1 << 24, epoch in 0u32..2) {
        let ours = DoorbellRepr {
            db_type: DbType::from_raw(t as u8).unwrap(),
            xid,
            index,
            epoch: epoch == 1,
            toggle: false,
        }
        .value();
        prop_assert_eq!(ours, bnxt::doorbell(t, xid, index, epoch, 0));
    }

    /// Random signalled RDMA WRITE/READ with one SGE, static mode, legacy PSN entries.
    #[test]
    fn static_rdma_wqes_match_bnxt_re_post_send(read: bool, len in 0u32..1 << 20, raddr: u64, rkey: u32, laddr: u64, lkey: u32, qp_id in 1u32..1 << 20, wqe in 0u32..64, psn0 in 0u32..1 << 24, mtu_enum in 1u32..6, fence: bool) {
        let sq_slots = 8 * 1024; // rdma-core keeps 128 WQEs free; a big ring never looks full
        let cfg = BrefQpCfg { qp_id, wqe_mode: 0, sq_slots, sq_tail: wqe * 8, sq_psn: psn0, mtu_enum, max_inline: 96, max_sge: 6, ..Default::default() };
        let mut wr = BrefWr { opcode: if read { 4 } else { 0 }, send_flags: 2 | u32::from(fence), rkey, remote_addr: raddr, num_sge: 1, ..Default::default() };
        wr.sg_list[0] = BrefSge { addr: laddr, length: len, lkey };
        let mut sq = vec![0u8; sq_slots as usize * 16 + (sq_slots as usize / 8) * 8];
        let out = bnxt::post_send(&cfg, &wr, &mut sq);
        prop_assert_eq!(out.ret, 0);
        let at = wqe as usize * 128;
        let flags = sqe::flags::SIGNALED | if fence { sqe::flags::UC_FENCE } else { 0 };
        let hdr = SqeHdrRepr { wqe_type: if read { WqeType::RdmaRead } else { WqeType::RdmaWrite }, flags, wqe_size: 3, key_immd: 0, lhdr: u64::from(len) };
        let (h, x, g) = (hdr.emit(), RdmaExt::emit(Remote { addr: raddr, rkey }), BnxtSge::emit(&Sge { addr: laddr, length: len, lkey }));
        // rdma-core leaves `key_immd` of a WRITE/READ and the extended header's reserved word
        // unwritten (stale); the ring starts zeroed, and gda writes zeros.
        prop_assert_eq!(&sq[at..at + 16], bytemuck::bytes_of(&h), "header");
        prop_assert_eq!(&sq[at + 16..at + 32], bytemuck::bytes_of(&x), "RDMA extended header");
        prop_assert_eq!(&sq[at + 32..at + 48], bytemuck::bytes_of(&g), "SGE");
        let mtu = 128u32 << mtu_enum;
        let next = psn::psn_add(psn0, psn::packets(u64::from(len), mtu));
        let entry = PsnRepr { start: psn0, next, opcode: if read { 2 } else { 1 }, flags: 0, start_slot: 0 };
        let pt = sq_slots as usize * 16 + wqe as usize * 8;
        let e = entry.emit_legacy();
        prop_assert_eq!(&sq[pt..pt + 8], bytemuck::bytes_of(&e), "PSN entry");
        prop_assert_eq!(out.sq_psn_after, next);
        let db = DoorbellRepr { db_type: DbType::Sq, xid: qp_id, index: wqe + 1, epoch: false, toggle: false };
        prop_assert_eq!(out.doorbell, db.value(), "doorbell (static mode: WQE index after the post)");
    }
}
