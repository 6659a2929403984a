//! ConnectX (mlx5): a ConnectX-6 Dx's ids, WQEs of 64-byte WQEBBs sized by their limits, and
//! WQEs a program posted itself (through `mlx5dv_init_obj`), found in the doorbell record.

use gda_mlx5::{Mlx5, Mlx5Sq};

use super::{SqH, VendorQueue};

/// Mellanox's PCI vendor id and the ConnectX-6 Dx part number.
const MELLANOX_VENDOR_ID: u32 = 0x02c9;
const CX6DX_PART_ID: u32 = 4125;

impl VendorQueue for Mlx5 {
    const IDS: (u32, u32) = (MELLANOX_VENDOR_ID, CX6DX_PART_ID);

    fn wqe_units(max_sge: u32, max_inline: u32) -> u32 {
        // ctrl + raddr (or ctrl + raddr + atomic + data), then data segments or inline.
        let sges = 32 + 16 * max_sge.max(1);
        let inline = 32 + (4 + max_inline).div_ceil(16) * 16;
        sges.max(inline).max(64).div_ceil(64)
    }

    fn wrap(sq: Mlx5Sq) -> SqH {
        SqH::mlx5(sq)
    }

    fn sq_of(h: &SqH) -> Option<&Mlx5Sq> {
        match h {
            SqH::mlx5(s) => Some(s),
            _ => None,
        }
    }

    unsafe fn posted_directly(sq: &Mlx5Sq, head: u64) -> u64 {
        // SAFETY: the caller's contract: the doorbell record is the live QP's, its word 1 the
        // send counter (big-endian) a program posting directly moves, written only atomically.
        let dbr = unsafe { gda_hal::mmio::load_u32_acquire((sq.wq.dbrec as *const u32).add(1)) };
        // ORDERING: Acquire pairs with the program's Release store of the record
        // (`store_be32_release`): the WQEs it covers are written before it.
        let theirs = u32::from_be(dbr) & 0xffff;
        u64::from(theirs.wrapping_sub(head as u32) & 0xffff)
    }
}
