//! The attributes of control-path calls: access rights, queue sizes and where queue memory
//! lives, memory to register, and each QP transition's attributes with their valid ranges.

use core::ptr::NonNull;
use std::sync::Arc;

use super::{ControlError, Endpoint, LinkLayer, LocalPath, Mtu};

bitflags::bitflags! {
    /// Access rights of a memory region or a QP's responder (`enum ibv_access_flags` values).
    #[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
    pub struct Access: u32 {
        /// The local NIC may write (receive targets, READ and atomic results).
        const LOCAL_WRITE = 1 << 0;
        /// Remote peers may RDMA WRITE.
        const REMOTE_WRITE = 1 << 1;
        /// Remote peers may RDMA READ.
        const REMOTE_READ = 1 << 2;
        /// Remote peers may perform atomics.
        const REMOTE_ATOMIC = 1 << 3;
    }
}

impl Access {
    /// Every right.
    pub const ALL: Access = Access::all();

    /// Rights that let the NIC write the memory, which verbs only grants together with
    /// `LOCAL_WRITE` (a kernel driver refuses them alone with `EINVAL`).
    pub const NEEDS_LOCAL_WRITE: Access = Access::REMOTE_WRITE.union(Access::REMOTE_ATOMIC);

    /// Checks the rule above for a memory registration.
    pub fn check_registration(self) -> Result<Self, ControlError> {
        if self.intersects(Self::NEEDS_LOCAL_WRITE) && !self.contains(Self::LOCAL_WRITE) {
            return Err(ControlError::Invalid(std::format!(
                "access {self:?} grants remote write or atomics without LOCAL_WRITE"
            )));
        }
        Ok(self)
    }
}

/// Which queue buffer a [`QueueAllocator`] is asked for (as rdma-core's parent-domain
/// allocator is told the resource type).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum QueueBuffer {
    /// A send queue ring.
    SendQueue,
    /// A receive queue ring.
    RecvQueue,
    /// A completion queue ring.
    CompletionQueue,
    /// A doorbell record (the consumer/producer counters the device reads).
    DoorbellRecord,
    /// A send queue's posting-protocol state (`gda_hal::SqShared`), which device code
    /// posting to the same queue updates with atomics.
    SendState,
    /// A device-API context (gda-shmem's `DeviceCtx` and the arrays it points at), which
    /// device code reads.
    DeviceContext,
}

/// Memory for queue rings chosen by the caller: device memory, host-pinned memory, a pool.
///
/// The provider asks for each ring and doorbell record with its size and alignment and
/// initializes the contents itself (owner bits, zeroed records) through the host mapping, so
/// the memory must be writable by the host as well as reachable by the NIC; the provider
/// frees it through [`QueueAllocator::free`] when the queue is destroyed.
pub trait QueueAllocator: Send + Sync + core::fmt::Debug {
    /// `len` bytes aligned to `align` (a power of two) for `what`, or `None` (the create fails
    /// with an error naming the buffer).
    fn alloc(&self, what: QueueBuffer, len: usize, align: usize) -> Option<NonNull<u8>>;

    /// Returns memory from [`QueueAllocator::alloc`].
    ///
    /// # Safety
    /// `ptr` came from `self.alloc(what, len, _)` and is not used any more.
    unsafe fn free(&self, what: QueueBuffer, ptr: NonNull<u8>, len: usize);

    /// The address device code stores to for the doorbell register this process reaches at
    /// `db` (a UAR/BlueFlame register, a Thor2 doorbell page, the software NIC's doorbell
    /// page), mapping its page for the device, or `None` (the error is reported by the
    /// allocator). Every successful call is ended by one [`QueueAllocator::unmap_doorbell`].
    ///
    /// The default is `db` itself: device code of this allocator runs in this address space
    /// (CPU threads).
    fn map_doorbell(&self, db: u64) -> Option<u64> {
        Some(db)
    }

    /// Ends one [`QueueAllocator::map_doorbell`] of `db` (the host address it was given).
    ///
    /// # Safety
    /// Device code no longer stores to the address `map_doorbell(db)` returned.
    unsafe fn unmap_doorbell(&self, db: u64) {
        let _ = db;
    }
}

/// Where a queue's rings and doorbell records live.
#[derive(Clone, Debug, Default)]
pub enum QueueMemory {
    /// Wherever the provider puts them (host memory).
    #[default]
    Provider,
    /// From the caller's allocator (e.g. GPU memory, so device code polls without crossing
    /// the bus).
    Caller(Arc<dyn QueueAllocator>),
}

/// A completion queue's size and memory.
#[derive(Clone, Debug)]
pub struct CqAttr {
    /// CQEs (a power of two; providers may round up).
    pub entries: u32,
    /// Every CQE overwrites slot 0 (mlx5's collapsed CQ): progress comes from its counter.
    pub collapsed: bool,
    /// Where the ring and doorbell record live.
    pub memory: QueueMemory,
}

impl CqAttr {
    /// A normal CQ of `entries` CQEs in provider memory.
    #[must_use]
    pub fn new(entries: u32) -> Self {
        Self {
            entries,
            collapsed: false,
            memory: QueueMemory::Provider,
        }
    }
}

/// An RC QP's queue sizes and memory (`struct ibv_qp_cap` plus placement).
#[derive(Clone, Debug)]
pub struct QpCaps {
    /// Send work requests the ring holds (of one 64-byte unit each; larger WQEs take more of
    /// the ring). Providers round up to a power of two.
    pub send_wr: u32,
    /// Receive work requests.
    pub recv_wr: u32,
    /// Gather entries per send and scatter entries per receive.
    pub max_sge: u32,
    /// Largest inline payload.
    pub max_inline: u32,
    /// Where the rings and doorbell record live.
    pub memory: QueueMemory,
}

impl Default for QpCaps {
    fn default() -> Self {
        Self {
            send_wr: 256,
            recv_wr: 256,
            max_sge: 4,
            max_inline: 256,
            memory: QueueMemory::Provider,
        }
    }
}

/// Memory to register, described by where it lives.
#[derive(Clone, Copy, Debug)]
pub enum MemoryDesc<'a> {
    /// Host virtual memory of this process.
    Host {
        /// First byte.
        addr: *mut u8,
        /// Length.
        len: usize,
    },
    /// Host memory inside a named POSIX shared-memory object other processes of the host
    /// can map (a NIC that is itself software reaches it there; a real NIC treats it as
    /// [`MemoryDesc::Host`]).
    SharedHost {
        /// First byte (`object`'s mapping + `offset`).
        addr: *mut u8,
        /// Length.
        len: usize,
        /// The object's name (`/dev/shm` name, with its leading `/`).
        object: &'a str,
        /// Offset of `addr` in the object.
        offset: usize,
        /// The object's size.
        object_len: usize,
    },
    /// A dma-buf (GPU memory exported by its driver).
    DmaBuf {
        /// The dma-buf file descriptor.
        fd: i32,
        /// Offset in the dma-buf.
        offset: u64,
        /// Length.
        len: usize,
        /// The I/O virtual address remote peers use.
        iova: u64,
    },
}

impl MemoryDesc<'_> {
    /// Length in bytes.
    #[must_use]
    pub fn len(&self) -> usize {
        match *self {
            Self::Host { len, .. } | Self::SharedHost { len, .. } | Self::DmaBuf { len, .. } => len,
        }
    }

    /// Whether the range is empty.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// A QP attribute that a transport header or the QP context holds in a field of its own
/// width: the one table of their ranges. Every check of them uses it — [`RtrAttr::validate`],
/// [`RtsAttr::validate`] (so every provider's transitions) and the verbs-compatible library's
/// `ibv_modify_qp`, which refuses what a ConnectX would silently truncate.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum QpField {
    /// `dest_qp_num`: the BTH's 24-bit destination QP.
    DestQpn,
    /// `rq_psn`: a 24-bit PSN.
    RqPsn,
    /// `sq_psn`: a 24-bit PSN.
    SqPsn,
    /// `retry_cnt`: 3 bits.
    RetryCnt,
    /// `rnr_retry`: 3 bits (7 retries forever).
    RnrRetry,
    /// `timeout`: 5 bits (4.096 µs · 2^timeout).
    Timeout,
    /// `min_rnr_timer`: 5 bits (the IB spec's encoded timer).
    MinRnrTimer,
}

impl QpField {
    /// Every field, for tables and tests.
    pub const ALL: [QpField; 7] = [
        Self::DestQpn,
        Self::RqPsn,
        Self::SqPsn,
        Self::RetryCnt,
        Self::RnrRetry,
        Self::Timeout,
        Self::MinRnrTimer,
    ];

    /// The attribute's name in `struct ibv_qp_attr`.
    #[must_use]
    pub const fn name(self) -> &'static str {
        match self {
            Self::DestQpn => "dest_qp_num",
            Self::RqPsn => "rq_psn",
            Self::SqPsn => "sq_psn",
            Self::RetryCnt => "retry_cnt",
            Self::RnrRetry => "rnr_retry",
            Self::Timeout => "timeout",
            Self::MinRnrTimer => "min_rnr_timer",
        }
    }

    /// The largest value the field holds.
    #[must_use]
    pub const fn max(self) -> u32 {
        match self {
            Self::DestQpn | Self::RqPsn | Self::SqPsn => 0x00ff_ffff,
            Self::RetryCnt | Self::RnrRetry => 7,
            Self::Timeout | Self::MinRnrTimer => 31,
        }
    }

    /// `value`, or an error naming the field and its range.
    pub fn check(self, value: u32) -> Result<u32, ControlError> {
        if value > self.max() {
            return Err(ControlError::Invalid(std::format!(
                "{} {value:#x} does not fit its field (at most {:#x})",
                self.name(),
                self.max()
            )));
        }
        Ok(value)
    }
}

/// RESET → INIT: the port, partition and the rights this QP's responder grants.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct InitAttr {
    /// Port number.
    pub port: u8,
    /// Partition-key index (below the port's `pkeys`).
    pub pkey_index: u16,
    /// What remote peers may do through this QP (`qp_access_flags`).
    pub access: Access,
}

impl InitAttr {
    /// INIT on the port of `path`, pkey index 0, with remote read, write and atomics.
    #[must_use]
    pub fn new(path: &LocalPath) -> Self {
        Self {
            port: path.port,
            pkey_index: 0,
            access: Access::REMOTE_READ | Access::REMOTE_WRITE | Access::REMOTE_ATOMIC,
        }
    }
}

/// INIT → RTR: who the peer is and how to reach it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RtrAttr {
    /// The peer.
    pub remote: Endpoint,
    /// The path MTU (no larger than either end's).
    pub path_mtu: Mtu,
    /// The source GID's index (`ah_attr.grh.sgid_index`).
    pub sgid_index: u32,
    /// Whether packets carry a GRH (`ah_attr.is_global`): always on Ethernet (RoCE).
    pub is_global: bool,
    /// GRH hop limit: 1 keeps packets on the local subnet, so routed RoCE v2 needs more.
    pub hop_limit: u8,
    /// GRH traffic class (DSCP/ECN on RoCE v2).
    pub traffic_class: u8,
    /// Static rate (`enum ibv_rate`; 0: the port's full rate).
    pub static_rate: u8,
    /// READs and atomics the peer may have outstanding at this responder.
    pub max_dest_rd_atomic: u8,
    /// Minimal RNR NAK timer (`0..=31`, the IB spec's encoded value).
    pub min_rnr_timer: u8,
}

impl RtrAttr {
    /// The RTR attributes from the local path and the peer's endpoint: path MTU the smaller
    /// of both ends', GRH on RoCE with a hop limit of 64, full rate, 16 outstanding READs or
    /// atomics, RNR timer 12 (0.64 ms). Both ends must be on the same link layer.
    pub fn new(local: &LocalPath, remote: &Endpoint) -> Result<Self, ControlError> {
        if local.link_layer != remote.link_layer {
            return Err(ControlError::Invalid(std::format!(
                "local port is {:?}, the peer's {:?}",
                local.link_layer,
                remote.link_layer
            )));
        }
        let a = Self {
            remote: *remote,
            path_mtu: local.mtu.path(remote.mtu),
            sgid_index: local.gid.index,
            is_global: local.link_layer == LinkLayer::Ethernet,
            hop_limit: 64,
            traffic_class: 0,
            static_rate: 0,
            max_dest_rd_atomic: 16,
            min_rnr_timer: 12,
        };
        a.validate()?;
        Ok(a)
    }

    /// The checks every provider applies (and a kernel driver would): PSN and QPN in 24
    /// bits, RNR timer ≤ 31, a GRH on Ethernet with a hop limit above 0, no MTU above the
    /// peer's.
    pub fn validate(&self) -> Result<(), ControlError> {
        let bad = |s: std::string::String| Err(ControlError::Invalid(s));
        QpField::DestQpn.check(self.remote.qpn)?;
        QpField::RqPsn.check(self.remote.psn)?;
        QpField::MinRnrTimer.check(self.min_rnr_timer.into())?;
        if self.remote.link_layer == LinkLayer::Ethernet && !self.is_global {
            return bad("RoCE needs is_global (a GRH on every packet)".into());
        }
        if self.is_global && self.hop_limit == 0 {
            return bad("hop_limit 0 with a GRH".into());
        }
        if self.path_mtu > self.remote.mtu {
            return bad(std::format!(
                "path MTU {} above the peer's {}",
                self.path_mtu.bytes(),
                self.remote.mtu.bytes()
            ));
        }
        Ok(())
    }
}

/// RTR → RTS: the send side's PSN and retry behaviour.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RtsAttr {
    /// The first PSN this QP sends (24 bits; the value its endpoint advertised).
    pub sq_psn: u32,
    /// Local ACK timeout (`0..=31`: 4.096 µs · 2^timeout; 0 waits forever).
    pub timeout: u8,
    /// Transport retries (`0..=7`).
    pub retry_cnt: u8,
    /// RNR retries (`0..=7`; 7 retries forever).
    pub rnr_retry: u8,
    /// READs and atomics this QP may have outstanding as requester.
    pub max_rd_atomic: u8,
}

impl RtsAttr {
    /// RTS sending from `sq_psn`: timeout 14 (~67 ms), 7 retries, RNR retry forever, 16
    /// outstanding READs or atomics.
    #[must_use]
    pub fn new(sq_psn: u32) -> Self {
        Self {
            sq_psn,
            timeout: 14,
            retry_cnt: 7,
            rnr_retry: 7,
            max_rd_atomic: 16,
        }
    }

    /// PSN in 24 bits, timeout ≤ 31, retry counts ≤ 7 ([`QpField`]).
    pub fn validate(&self) -> Result<(), ControlError> {
        QpField::SqPsn.check(self.sq_psn)?;
        QpField::Timeout.check(self.timeout.into())?;
        QpField::RetryCnt.check(self.retry_cnt.into())?;
        QpField::RnrRetry.check(self.rnr_retry.into())?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::super::{Gid, GidEntry, GidType};
    use super::*;

    fn path() -> LocalPath {
        LocalPath {
            port: 1,
            link_layer: LinkLayer::Ethernet,
            lid: 0,
            gid: GidEntry {
                index: 3,
                gid: Gid([1; 16]),
                kind: GidType::RoceV2,
            },
            mtu: Mtu::B4096,
        }
    }
    fn remote(mtu: Mtu) -> Endpoint {
        Endpoint {
            qpn: 0x123,
            psn: 0x456,
            lid: 0,
            gid: Gid([2; 16]),
            mtu,
            port: 1,
            link_layer: LinkLayer::Ethernet,
        }
    }

    #[test]
    fn rtr_takes_the_smaller_mtu_and_a_grh_on_roce() {
        let a = RtrAttr::new(&path(), &remote(Mtu::B1024)).unwrap();
        assert_eq!(
            (a.path_mtu, a.is_global, a.sgid_index, a.hop_limit > 1),
            (Mtu::B1024, true, 3, true)
        );
        let mut ib = remote(Mtu::B4096);
        ib.link_layer = LinkLayer::InfiniBand;
        assert!(RtrAttr::new(&path(), &ib).is_err());
        let mut cases = 0;
        for f in [
            |a: &mut RtrAttr| a.is_global = false,
            |a: &mut RtrAttr| a.hop_limit = 0,
            |a: &mut RtrAttr| a.min_rnr_timer = 32,
            |a: &mut RtrAttr| a.remote.qpn = 1 << 24,
            |a: &mut RtrAttr| a.remote.psn = u32::MAX,
            |a: &mut RtrAttr| a.path_mtu = Mtu::B4096,
        ] {
            let mut a = RtrAttr::new(&path(), &remote(Mtu::B2048)).unwrap();
            f(&mut a);
            assert!(a.validate().is_err(), "{a:?}");
            cases += 1;
        }
        assert_eq!(cases, 6);
    }

    #[test]
    fn rts_ranges() {
        assert!(RtsAttr::new(0xff_ffff).validate().is_ok());
        assert!(RtsAttr::new(1 << 24).validate().is_err());
        for f in [
            |a: &mut RtsAttr| a.timeout = 32,
            |a: &mut RtsAttr| a.retry_cnt = 8,
            |a: &mut RtsAttr| a.rnr_retry = 8,
        ] {
            let mut a = RtsAttr::new(1);
            f(&mut a);
            assert!(a.validate().is_err());
        }
    }

    #[test]
    fn remote_write_needs_local_write() {
        assert!(Access::REMOTE_WRITE.check_registration().is_err());
        assert!(Access::REMOTE_ATOMIC.check_registration().is_err());
        assert!(Access::REMOTE_READ.check_registration().is_ok());
        assert!(Access::ALL.check_registration().is_ok());
    }
}
