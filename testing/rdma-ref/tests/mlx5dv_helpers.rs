//! gda's mlx5 structures against rdma-core's own headers: the public inline helpers of
//! `mlx5dv.h` (`mlx5dv_set_ctrl_seg`, `mlx5dv_set_data_seg`, the CQE getters) on random inputs,
//! and every size, offset and constant gda encodes (including `wqe.h`'s masked-atomic segment,
//! which rdma-core declares but never posts).

use core::mem::{offset_of, size_of};

use gda_hal::Sge;
use gda_mlx5::wire::{self, Cqe64, CtrlRepr, DataSeg, Opcode};
use gda_rdma_ref::{mlx5_layout, mlx5dv_cqe_fields, mlx5dv_set_ctrl_seg, mlx5dv_set_data_seg};
use proptest::prelude::*;

proptest! {
    #![proptest_config(ProptestConfig { cases: 3000, ..ProptestConfig::default() })]

    #[test]
    fn ctrl_seg_matches_mlx5dv_set_ctrl_seg(pi: u16, op: u8, opmod: u8, qpn in 0u32..1 << 24, fm: u8, ds in 1u8..64, sig: u8, imm: u32) {
        // The helper leaves bytes 9–10 untouched; start from zero as gda writes them as 0.
        let mut theirs = [0u8; 16];
        mlx5dv_set_ctrl_seg(&mut theirs, pi, op, opmod, qpn, fm, ds, sig, imm);
        let ours = CtrlRepr {
            opcode: Opcode::from_raw(op), opmod, wqe_index: pi, qpn, ds, signature: sig, dci_stream: 0, fm_ce_se: fm,
            // mlx5dv takes the immediate as the already-big-endian wire value.
            imm: u32::from_be(imm),
        }.emit();
        prop_assert_eq!(bytemuck::bytes_of(&ours), &theirs[..]);
    }

    #[test]
    fn data_seg_matches_mlx5dv_set_data_seg(length: u32, lkey: u32, addr: u64) {
        let mut theirs = [0xa5u8; 16];
        mlx5dv_set_data_seg(&mut theirs, length, lkey, addr);
        let ours = DataSeg::emit(&Sge { addr, length, lkey });
        prop_assert_eq!(bytemuck::bytes_of(&ours), &theirs[..]);
    }

    #[test]
    fn cqe_getters_match_mlx5dv(raw in proptest::array::uniform32(any::<u8>()), tail in proptest::array::uniform32(any::<u8>())) {
        let mut bytes = [0u8; 64];
        bytes[..32].copy_from_slice(&raw);
        bytes[32..].copy_from_slice(&tail);
        let c: Cqe64 = bytemuck::cast(bytes);
        let [owner, opcode, se, format] = mlx5dv_cqe_fields(&bytes);
        prop_assert_eq!(c.owner(), owner);
        prop_assert_eq!(c.opcode().raw(), opcode);
        if let Ok(r) = wire::CqeRepr::parse(&c) {
            prop_assert_eq!(u8::from(r.se), se);
            prop_assert_eq!(r.format, format);
        } else {
            prop_assert_eq!(format, 3, "only compressed CQEs are refused");
        }
    }
}

#[test]
fn layouts_and_constants_match_rdma_core() {
    use wire::*;
    let ours: Vec<u32> = [
        size_of::<CtrlSeg>(),
        offset_of!(CtrlSeg, opmod_idx_opcode),
        offset_of!(CtrlSeg, qpn_ds),
        offset_of!(CtrlSeg, signature),
        offset_of!(CtrlSeg, fm_ce_se),
        offset_of!(CtrlSeg, imm),
        size_of::<RaddrSeg>(),
        offset_of!(RaddrSeg, raddr),
        offset_of!(RaddrSeg, rkey),
        size_of::<DataSeg>(),
        offset_of!(DataSeg, byte_count),
        offset_of!(DataSeg, lkey),
        offset_of!(DataSeg, addr),
        size_of::<AtomicSeg>(),
        offset_of!(AtomicSeg, swap_add),
        offset_of!(AtomicSeg, compare),
        size_of::<MaskedCs64Seg>(),
        offset_of!(MaskedCs64Seg, swap),
        offset_of!(MaskedCs64Seg, compare),
        offset_of!(MaskedCs64Seg, swap_mask),
        offset_of!(MaskedCs64Seg, compare_mask),
        size_of::<Cqe64>(),
        offset_of!(Cqe64, srqn_uidx),
        offset_of!(Cqe64, imm_inval_pkey),
        offset_of!(Cqe64, byte_cnt),
        offset_of!(Cqe64, sop_drop_qpn),
        offset_of!(Cqe64, wqe_counter),
        offset_of!(Cqe64, signature),
        offset_of!(Cqe64, op_own),
        // The error CQE is an overlay of the same 64 bytes.
        size_of::<Cqe64>(),
        cqe64::field::VENDOR_ERR_SYND,
        cqe64::field::SYNDROME,
        cqe64::field::SOP_DROP_QPN,
        cqe64::field::WQE_COUNTER,
        cqe64::field::OP_OWN,
    ]
    .iter()
    .map(|&v| v as u32)
    .chain(
        [
            Opcode::Nop,
            Opcode::RdmaWrite,
            Opcode::RdmaWriteImm,
            Opcode::Send,
            Opcode::SendImm,
            Opcode::RdmaRead,
            Opcode::AtomicCs,
            Opcode::AtomicFa,
            Opcode::AtomicMaskedCs,
            Opcode::AtomicMaskedFa,
        ]
        .iter()
        .map(|o| u32::from(o.raw())),
    )
    .chain([
        u32::from(ctrl_seg::fm_ce_se::CQ_UPDATE),
        u32::from(ctrl_seg::fm_ce_se::SOLICITED),
        u32::from(ctrl_seg::fm_ce_se::FENCE),
        data_seg::INLINE_FLAG,
        data_seg::INVALID_LKEY,
        dbrec::SND_DBR as u32,
        dbrec::RCV_DBR as u32,
    ])
    .chain(
        [
            CqeOpcode::Req,
            CqeOpcode::RespWrImm,
            CqeOpcode::RespSend,
            CqeOpcode::RespSendImm,
            CqeOpcode::RespSendInv,
            CqeOpcode::ReqErr,
            CqeOpcode::RespErr,
            CqeOpcode::Invalid,
        ]
        .iter()
        .map(|o| u32::from(o.raw())),
    )
    .chain(
        [
            Syndrome::LocalLengthErr,
            Syndrome::LocalQpOpErr,
            Syndrome::LocalProtErr,
            Syndrome::WrFlushErr,
            Syndrome::RemoteAccessErr,
            Syndrome::RemoteOpErr,
            Syndrome::RnrRetryExcErr,
        ]
        .iter()
        .map(|s| u32::from(s.raw())),
    )
    .collect();
    assert_eq!(ours, mlx5_layout());
}
