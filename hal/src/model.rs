//! The device-model seam: how the software NIC's engine reads one vendor's queues and writes its
//! completions (feature `model`).
//!
//! A NIC vendor's crate implements [`DeviceModel`] next to its device functions (behind its own
//! `model` feature), so the format's encoder and the model's decoder live side by side and share
//! one `Repr` per structure. The engine in `gda-sim` is written once against this trait: it
//! fetches a WQE into an [`WqeOp`], executes it with RC semantics and hands a [`Cpl`] back to the
//! model to write as that vendor's CQE. It never names a vendor.
//!
//! Queue memory is reached through [`Region`]s: bounds-checked raw views of buffers the engine
//! owns. Producers write other slots of the same ring concurrently, so no reference to the
//! memory is ever formed; WQEs are decoded from private copies, so their bytes cannot change
//! between a check and a use.

use std::fmt::Debug;
use std::vec::Vec;

use crate::handle::CqHandle;
use crate::mmio;
use crate::op::{AtomicOp, Remote, Sge};
use crate::provider::Provider;
use crate::status::{WcOpcode, WcStatus};

/// What a WQE asks for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OpKind {
    /// No operation (completes in order).
    Nop,
    /// RDMA WRITE (with or without immediate).
    Write,
    /// SEND (with or without immediate).
    Send,
    /// RDMA READ.
    Read,
    /// An atomic.
    Atomic,
}

/// A decoded send WQE (reused between WQEs to avoid allocation).
#[derive(Clone, Debug, Default)]
pub struct WqeOp {
    /// The operation; `None` until decoded.
    pub kind: Option<OpKind>,
    /// A CQE is requested.
    pub signaled: bool,
    /// Wait for earlier READs and atomics first.
    pub fence: bool,
    /// Solicited event.
    pub solicited: bool,
    /// Units the WQE occupies.
    pub units: u32,
    /// The counter its CQE reports (mlx5: 16-bit wqe_index; native: producer position).
    pub counter: u32,
    /// Raw hardware opcode (mlx5 CQEs carry it).
    pub hw_opcode: u8,
    /// Remote address and key.
    pub remote: Remote,
    /// Immediate data.
    pub imm: Option<u32>,
    /// Gather (or, for READ and atomics, scatter) entries.
    pub sges: Vec<Sge>,
    /// Inline payload, when the WQE carries one.
    pub inline: Option<Vec<u8>>,
    /// The atomic and its width in bytes.
    pub atomic: Option<(AtomicOp, u32)>,
    /// Packets on the wire (PSN accounting).
    pub packets: u32,
}

impl WqeOp {
    /// Clears the decoded fields (keeping allocations).
    pub fn reset(&mut self) {
        self.kind = None;
        self.signaled = false;
        self.fence = false;
        self.solicited = false;
        self.imm = None;
        self.sges.clear();
        if let Some(v) = self.inline.as_mut() {
            v.clear();
        }
        self.atomic = None;
        self.packets = 0;
    }

    /// Sets the inline payload (reusing its buffer).
    pub fn set_inline(&mut self, bytes: &[u8]) {
        let v = self.inline.get_or_insert_with(Vec::new);
        v.clear();
        v.extend_from_slice(bytes);
    }

    /// Payload length in bytes.
    #[must_use]
    pub fn length(&self) -> u64 {
        match &self.inline {
            Some(v)
                if self.kind != Some(OpKind::Read)
                    && self.kind != Some(OpKind::Atomic)
                    && !v.is_empty() =>
            {
                v.len() as u64
            }
            _ => self.sges.iter().map(|s| u64::from(s.length)).sum(),
        }
    }
}

/// A malformed WQE: the status to report and how many units to skip.
#[derive(Clone, Copy, Debug)]
pub struct Malformed {
    /// The error completion's status (`LOC_QP_OP_ERR`, `LOC_LEN_ERR`, …).
    pub status: WcStatus,
    /// Units to consume.
    pub units: u32,
    /// The counter its CQE reports.
    pub counter: u32,
}

/// A completion the engine asks a model to write.
#[derive(Clone, Copy, Debug)]
pub struct Cpl {
    /// Outcome.
    pub status: WcStatus,
    /// What completed.
    pub opcode: WcOpcode,
    /// The model's counter ([`DeviceModel::counter_for`] or the receive WQE's index).
    pub counter: u32,
    /// Bytes transferred.
    pub byte_len: u32,
    /// Immediate data.
    pub imm: Option<u32>,
    /// QP number.
    pub qpn: u32,
    /// A receive-side completion.
    pub is_recv: bool,
    /// The WQE's raw hardware opcode.
    pub hw_opcode: u8,
}

/// The engine's running RC sequence of a send queue: messages and PSNs consumed so far.
#[derive(Clone, Copy, Debug, Default)]
pub struct Seq {
    /// Messages (WQEs) consumed.
    pub msg: u32,
    /// Packets since the QP's first PSN, modulo 2^24.
    pub psn: u32,
}

impl Seq {
    /// Advances past a message of `packets` packets.
    pub fn advance(&mut self, packets: u32) {
        self.msg = self.msg.wrapping_add(1);
        self.psn = self.psn.wrapping_add(packets) & crate::handle::PSN_MASK;
    }
}

/// A buffer of device-visible memory the engine owns (ring, doorbell record, doorbell page),
/// reached only through bounds-checked raw accesses.
#[derive(Clone, Copy, Debug)]
pub struct Region {
    addr: u64,
    len: usize,
}

impl Region {
    /// A view of `len` bytes at `addr`.
    ///
    /// # Safety
    /// `[addr, addr + len)` must stay valid for reads and writes for as long as the view (or a
    /// copy of it) is used, and be aligned to 8 bytes.
    #[must_use]
    pub const unsafe fn new(addr: u64, len: usize) -> Self {
        Self { addr, len }
    }

    /// An empty view (every access is out of range).
    #[must_use]
    pub const fn empty() -> Self {
        Self { addr: 0, len: 0 }
    }

    /// Address of the first byte.
    #[must_use]
    pub const fn addr(&self) -> u64 {
        self.addr
    }

    /// Length in bytes.
    #[must_use]
    pub const fn len(&self) -> usize {
        self.len
    }

    /// Whether the view is empty.
    #[must_use]
    pub const fn is_empty(&self) -> bool {
        self.len == 0
    }

    fn fits(&self, off: usize, n: usize, align: usize) -> bool {
        off.checked_add(n).is_some_and(|e| e <= self.len) && off % align == 0
    }

    /// Copies `out.len()` bytes from `off` (a raw copy: producers may be writing other bytes).
    /// `false`, with `out` untouched, if the range is outside the view.
    pub fn read(&self, off: usize, out: &mut [u8]) -> bool {
        if !self.fits(off, out.len(), 1) {
            return false;
        }
        // SAFETY: in range of the view (checked), whose memory is valid (constructor contract).
        unsafe {
            mmio::dma_copy(
                out.as_mut_ptr(),
                (self.addr as usize + off) as *const u8,
                out.len(),
            )
        };
        true
    }

    /// Copies `data` to `off`; `false` if the range is outside the view.
    pub fn write(&self, off: usize, data: &[u8]) -> bool {
        if !self.fits(off, data.len(), 1) {
            return false;
        }
        // SAFETY: as in `read`.
        unsafe {
            mmio::dma_copy(
                (self.addr as usize + off) as *mut u8,
                data.as_ptr(),
                data.len(),
            )
        };
        true
    }

    /// An acquire load of the 8-byte word at `off` (aligned).
    #[must_use]
    pub fn load_u64(&self, off: usize) -> Option<u64> {
        // SAFETY: in range and aligned (checked); valid memory (constructor contract).
        self.fits(off, 8, 8)
            .then(|| unsafe { mmio::load_u64_acquire((self.addr as usize + off) as *const u64) })
    }

    /// An acquire load of the 4-byte word at `off` (aligned), in memory order.
    #[must_use]
    pub fn load_u32(&self, off: usize) -> Option<u32> {
        // SAFETY: as in `load_u64`.
        self.fits(off, 4, 4)
            .then(|| unsafe { mmio::load_u32_acquire((self.addr as usize + off) as *const u32) })
    }

    /// Atomically takes the 8-byte word at `off`, leaving 0 (a doorbell register: every store
    /// is noticed, even of an equal value).
    #[must_use]
    pub fn take_u64(&self, off: usize) -> Option<u64> {
        // SAFETY: as in `load_u64`.
        self.fits(off, 8, 8)
            .then(|| unsafe { mmio::take_u64((self.addr as usize + off) as *mut u64) })
    }

    /// A release store of the byte at `off`; `false` if out of range.
    pub fn store_u8(&self, off: usize, v: u8) -> bool {
        if !self.fits(off, 1, 1) {
            return false;
        }
        // SAFETY: as in `load_u64`.
        unsafe { mmio::store_u8_release((self.addr as usize + off) as *mut u8, v) };
        true
    }

    /// A release store of the 8-byte word at `off`; `false` if out of range.
    pub fn store_u64(&self, off: usize, v: u64) -> bool {
        if !self.fits(off, 8, 8) {
            return false;
        }
        // SAFETY: as in `load_u64`.
        unsafe { mmio::store_u64_release((self.addr as usize + off) as *mut u64, v) };
        true
    }

    /// Writes a CQE the way a device's single write lands: the body `bytes[..tail]` first, then
    /// the aligned tail word `bytes[tail..]` (8 bytes, which holds the ownership bits) in one
    /// release store, so a poller that sees the tail sees the body. `false` if out of range or
    /// the tail is not the last aligned 8 bytes.
    pub fn publish_cqe(&self, off: usize, bytes: &[u8]) -> bool {
        let Some(tail) = bytes.len().checked_sub(8) else {
            return false;
        };
        if !self.fits(off, bytes.len(), 8) || tail % 8 != 0 {
            return false;
        }
        let mut word = [0u8; 8];
        word.copy_from_slice(&bytes[tail..]);
        // SAFETY: as in `write`.
        unsafe { mmio::dma_copy((self.addr as usize + off) as *mut u8, bytes.as_ptr(), tail) };
        self.store_u64(off + tail, u64::from_ne_bytes(word))
    }
}

/// What a QP is created with.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct QpGeometry {
    /// Send-queue units (a power of two).
    pub sq_units: u32,
    /// Receive WQEs (a power of two).
    pub rq_wqes: u32,
    /// Most gather entries per WQE.
    pub max_sge: u32,
    /// Largest inline payload.
    pub max_inline: u32,
    /// Path MTU in bytes.
    pub path_mtu: u32,
}

/// How a model lays a QP's queues out in memory.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct QpLayout {
    /// Bytes of the send buffer (the ring and any side table after it).
    pub sq_bytes: usize,
    /// Bytes of one receive WQE.
    pub rq_stride: u32,
}

/// A QP's memory, as a model sees it.
#[derive(Clone, Copy, Debug)]
pub struct QpView {
    /// QP number.
    pub qpn: u32,
    /// The first send PSN.
    pub start_psn: u32,
    /// What the QP was created with.
    pub geometry: QpGeometry,
    /// Bytes of one receive WQE.
    pub rq_stride: u32,
    /// The send buffer ([`QpLayout::sq_bytes`]).
    pub sq: Region,
    /// The receive ring.
    pub rq: Region,
    /// A 64-byte doorbell-record page.
    pub dbrec: Region,
    /// A 1 KiB doorbell page (the UAR stand-in).
    pub db: Region,
}

impl QpView {
    /// Copies `units` ring units of `unit_bytes` starting at free-running unit `pos` of the send
    /// ring into `out` (resized), unwrapping at the ring's end: the private copy a WQE is
    /// decoded from.
    pub fn copy_sq_units(&self, pos: u64, units: u32, unit_bytes: usize, out: &mut Vec<u8>) {
        let entries = u64::from(self.geometry.sq_units);
        out.clear();
        out.resize(units as usize * unit_bytes, 0);
        for (i, chunk) in out.chunks_exact_mut(unit_bytes).enumerate() {
            let slot = (pos + i as u64) & (entries - 1);
            self.sq.read(slot as usize * unit_bytes, chunk);
        }
    }

    /// The receive queue's common handle: ring, entries, stride and limits, with the doorbell
    /// record and register the model names (0 for none).
    #[must_use]
    pub fn rq_wq(&self, dbrec: u64, db: u64) -> crate::handle::WqHandle {
        crate::handle::WqHandle {
            buf: self.rq.addr(),
            dbrec,
            db,
            entries: self.geometry.rq_wqes,
            stride: self.rq_stride,
            qpn: self.qpn,
            max_inline: 0,
            max_sge: self.geometry.max_sge,
        }
    }
}

/// A CQ's memory, as a model sees it.
#[derive(Clone, Copy, Debug)]
pub struct CqView {
    /// CQ number.
    pub cqn: u32,
    /// CQEs (a power of two; 1 when collapsed).
    pub entries: u32,
    /// Every CQE goes to slot 0.
    pub collapsed: bool,
    /// The CQE ring (`entries × cqe_bytes`).
    pub buf: Region,
    /// A 64-byte consumer-record page.
    pub dbrec: Region,
}

/// A malformed receive WQE (the responder reports `LOC_QP_OP_ERR`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BadRecv;

/// Why a model refuses a QP or CQ.
pub type ModelError = std::string::String;

/// One vendor's queue formats, as the software NIC executes them. Object-safe: the engine holds
/// `Arc<dyn DeviceModel>` per NIC, so NICs of different vendors share a fabric.
pub trait DeviceModel: Debug + Send + Sync + 'static {
    /// Name as tools spell it (`"mlx5"`, `"bnxt"`, `"native"`).
    fn name(&self) -> &'static str;

    /// Bytes per CQE.
    fn cqe_bytes(&self) -> u32;

    /// Checks a new QP's sizes against the format and lays its queues out.
    fn layout(&self, geometry: &QpGeometry) -> Result<QpLayout, ModelError>;

    /// Prepares a new CQ's ring (e.g. mlx5's invalid opcodes). Default: all zero.
    fn init_cq(&self, cq: &CqView) {
        let _ = cq;
    }

    /// The handle device code polls the CQ with.
    fn cq_handle(&self, cq: &CqView) -> CqHandle;

    /// Notices SQ doorbells; returns the widened producer position they publish (`pos` is the
    /// engine's consumer position), or `None`.
    fn sq_doorbell(&self, qp: &QpView, pos: u64) -> Option<u64>;

    /// Decodes the WQE at unit `pos` into `op` (reset first). A malformed WQE yields the error
    /// the hardware would report and the units to skip.
    fn fetch(
        &self,
        qp: &QpView,
        pos: u64,
        op: &mut WqeOp,
        scratch: &mut Vec<u8>,
    ) -> Result<(), Malformed>;

    /// Checks what the format asks software to record per WQE against the engine's RC sequence
    /// (bnxt: the PSN-table entry). `Err` names the mismatch; the WQE fails.
    fn check_sequence(
        &self,
        qp: &QpView,
        pos: u64,
        seq: &Seq,
        op: &WqeOp,
    ) -> Result<(), ModelError> {
        let _ = (qp, pos, seq, op);
        Ok(())
    }

    /// The counter a completion for the WQE at `start` of `units` reports.
    fn counter_for(&self, qp: &QpView, start: u64, units: u32) -> u32;

    /// Whether one requester CQE retires every earlier WQE (bnxt), so WQEs that completed without
    /// a CQE are retired by a success CQE before an error CQE.
    fn coalesces_completions(&self) -> bool {
        false
    }

    /// The widened receive producer position.
    fn rq_producer(&self, qp: &QpView, pos: u64) -> u64;

    /// Reads the receive WQE at `pos` into `out`; `Err` if malformed.
    fn fetch_recv(&self, qp: &QpView, pos: u64, out: &mut Vec<Sge>) -> Result<(), BadRecv>;

    /// CQEs the consumer has not released, from its (untrusted) consumer index, for a CQ that
    /// has produced `prod`. Must not fail on any value.
    fn cq_outstanding(&self, cq: &CqView, prod: u64) -> u32;

    /// Writes completion `c` as the `prod`-th CQE (slot 0 if collapsed), publishing it as the
    /// device does.
    fn write_cqe(&self, cq: &CqView, c: &Cpl, prod: u64);

    /// The bytes an atomic's old value is returned in, and how many.
    fn atomic_result(&self, old: u64, width: u32) -> ([u8; 8], usize) {
        let w = width.min(8) as usize;
        let mut b = [0u8; 8];
        if w == 4 {
            b[..4].copy_from_slice(&(old as u32).to_le_bytes());
        } else {
            b.copy_from_slice(&old.to_le_bytes());
        }
        (b, w)
    }

    /// For downcasting to the concrete model ([`ModelFor`]).
    fn as_any(&self) -> &dyn core::any::Any;
}

/// The typed half of a model: the queue handles of provider `P` that drive it.
pub trait ModelFor<P: Provider>: DeviceModel {
    /// The send queue's handle (`Err` if the format cannot describe the QP).
    fn sq_handle(&self, qp: &QpView) -> Result<P::Sq, ModelError>;
    /// The receive queue's handle.
    fn rq_handle(&self, qp: &QpView) -> P::Rq;
}

/// A provider whose queues a device model executes: the one line that registers a vendor with
/// the software NIC.
pub trait Modeled: Provider {
    /// The model.
    type Model: ModelFor<Self> + Clone;
    /// The model in its default configuration (bnxt: Thor2's static WQEs and MSN table).
    fn model() -> Self::Model;

    /// The PCI vendor and part id of the device the model stands for, as a verbs library that
    /// runs it reports them (`ibv_query_device`): by default the provider's first PCI vendor id
    /// (0 without one) and part 0.
    const DEVICE_IDS: (u32, u32) = (
        if Self::PCI_VENDOR_IDS.is_empty() {
            0
        } else {
            Self::PCI_VENDOR_IDS[0]
        },
        0,
    );

    /// Send units one WQE with up to `max_sge` gather entries or `max_inline` inline bytes
    /// takes at most: what a verbs library reserves per WQE (by default the largest WQE).
    fn wqe_units(max_sge: u32, max_inline: u32) -> u32 {
        let _ = (max_sge, max_inline);
        Self::MAX_WQE_UNITS
    }

    /// Send units a program posted on `sq` itself (through the vendor's direct verbs, on the
    /// rings) past `head`, the unit after the newest one the verbs library posted (unwrapped),
    /// as the queue's doorbell state shows them; 0 when the format shows none (the default).
    ///
    /// # Safety
    /// `sq` addresses a live send queue.
    unsafe fn posted_directly(sq: &Self::Sq, head: u64) -> u64 {
        let _ = (sq, head);
        0
    }
}
