//! Thor2 (bnxt): the doorbell regions of its direct verbs (`bnxt_re_dv_*`, whose C API is
//! `crate::bnxtdv`) — state only that family's direct verbs have; its queues need nothing here
//! (see the parent module).
//!
//! **Doorbells.** On Thor2 every doorbell of the queues using a doorbell region — SQ, RQ and CQ,
//! told apart by type and queue id — is a 64-bit store to the first word of its page. The
//! software NIC's device model reads each queue's doorbell from a word of its own, so before
//! each scan the fabric's engine looks at every region's page and copies a new value to the
//! word of the queue it names (`Fabric::add_scan_hook`). Like the device model itself it sees
//! the page by polling: two stores to one page between two looks leave only the second,
//! which for cumulative producer and consumer indices delays a queue until its next doorbell.
//! gda's control path gives each QP a region of its own to keep that rare; hardware takes
//! every store.
//!
//! A queue's route goes when the queue is destroyed and a context's regions when it is closed
//! ([`super::forget`]), so the generic destroy paths need not know regions exist.

use std::ffi::c_void;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, Once};

use gda_bnxt::host::dv;
use gda_bnxt::wire::doorbell::{DbType, DoorbellRepr};
use gda_sim::Fabric;

use super::{ContextKey, Gone};
use crate::abi::Errno;

/// Forgets the doorbell routes of `gone` (a queue's, or a context's regions).
pub(crate) fn forget(ctx: ContextKey, gone: Gone) {
    match gone {
        Gone::Cq(cqn) => forget_route(ctx, DbType::Cq, cqn),
        Gone::Qp(qpn) => {
            forget_route(ctx, DbType::Sq, qpn);
            forget_route(ctx, DbType::Rq, qpn);
        }
        Gone::Context => regions().retain(|r| r.ctx != ctx),
    }
}

/// The bytes of a doorbell page.
pub(crate) const PAGE: u64 = 4096;
const REGION_MAGIC: u64 = 0x6764_6176_5f64_6200; // "gdav_db"

/// One doorbell page.
#[repr(C, align(4096))]
struct Page([AtomicU64; 512]);

/// Where a doorbell for a queue goes.
pub(crate) struct Route {
    db_type: DbType,
    xid: u32,
    /// The software NIC's doorbell word of that queue.
    dest: usize,
    /// The user count of the umem holding the queue's ring (released with the route).
    umem_users: *const AtomicU32,
}

impl Route {
    /// Doorbells of type `db_type` for queue `queue` (a QP or CQ number) go to the word at
    /// `dest`; `umem_users` counts the route until it is forgotten.
    ///
    /// # Safety
    /// `dest` is the queue's doorbell word and `umem_users` a counter, both alive until the
    /// route is forgotten (the queue's destruction, or its context's close, forgets it).
    pub(crate) unsafe fn new(
        db_type: DbType,
        queue: u32,
        dest: u64,
        umem_users: &AtomicU32,
    ) -> Self {
        umem_users.fetch_add(1, Ordering::AcqRel);
        Self {
            db_type,
            xid: xid(queue),
            dest: dest as usize,
            umem_users,
        }
    }
}

// SAFETY: the pointers are to a doorbell word and a counter, both accessed only atomically and
// alive while the route is (the contract of `Route::new`).
unsafe impl Send for Route {}

/// The queue id a doorbell carries (20 bits).
fn xid(queue: u32) -> u32 {
    queue & 0xf_ffff
}

/// A doorbell region: the attributes the program reads come first.
#[repr(C)]
pub(crate) struct Region {
    attr: dv::DbRegionAttr,
    magic: u64,
    ctx: ContextKey,
    default: bool,
    page: Box<Page>,
    last: AtomicU64,
    routes: Mutex<Vec<Route>>,
}

// SAFETY: `attr.dbr` points into `page`, owned by the region; all else is atomics or locked.
unsafe impl Send for Region {}
// SAFETY: as above.
unsafe impl Sync for Region {}

impl Region {
    /// What the program reads (`bnxt_re_dv_get_default_db_region`).
    pub(crate) fn attr(&self) -> dv::DbRegionAttr {
        self.attr
    }

    /// Adds the routes of a queue using this region.
    pub(crate) fn add(&self, routes: impl IntoIterator<Item = Route>) {
        self.routes
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .extend(routes);
    }
}

static REGIONS: Mutex<Vec<Arc<Region>>> = Mutex::new(Vec::new());
static NEXT_DPI: AtomicU32 = AtomicU32::new(1);

fn regions() -> MutexGuard<'static, Vec<Arc<Region>>> {
    REGIONS.lock().unwrap_or_else(|e| e.into_inner())
}

/// A new region of context `ctx`, whose doorbells `fabric`'s engine forwards.
pub(crate) fn new_region(ctx: ContextKey, fabric: &Fabric) -> Arc<Region> {
    make_region(ctx, fabric, false)
}

fn make_region(ctx: ContextKey, fabric: &Fabric, default: bool) -> Arc<Region> {
    let page = Box::new(Page([const { AtomicU64::new(0) }; 512]));
    let dpi = NEXT_DPI.fetch_add(1, Ordering::Relaxed);
    let r = Arc::new(Region {
        attr: dv::DbRegionAttr {
            handle: dpi,
            dpi,
            umdbr: u64::from(dpi) * PAGE,
            dbr: page.0.as_ptr().cast_mut().cast(),
        },
        magic: REGION_MAGIC,
        ctx,
        default,
        page,
        last: AtomicU64::new(0),
        routes: Mutex::new(Vec::new()),
    });
    regions().push(r.clone());
    start_forwarder(fabric);
    r
}

/// The context's default region (made on first use).
pub(crate) fn default_region(ctx: ContextKey, fabric: &Fabric) -> Arc<Region> {
    if let Some(r) = regions().iter().find(|r| r.ctx == ctx && r.default) {
        return r.clone();
    }
    make_region(ctx, fabric, true)
}

/// The region behind a handle the program holds, of context `ctx`.
pub(crate) fn region_of(ctx: ContextKey, h: *mut c_void) -> Result<Arc<Region>, Errno> {
    regions()
        .iter()
        .find(|r| std::ptr::eq(Arc::as_ptr(r).cast::<c_void>(), h) && r.magic == REGION_MAGIC)
        .filter(|r| r.ctx == ctx)
        .cloned()
        .ok_or_else(|| Errno::inval("dbr_handle is not a doorbell region of this context"))
}

/// Frees a region no queue uses (`bnxt_re_dv_free_db_region`): `EBUSY` while one does.
pub(crate) fn free_region(reg: &Arc<Region>) -> Result<(), Errno> {
    if reg.default {
        return Err(Errno::inval("the default doorbell region is not freed"));
    }
    let n = reg.routes.lock().unwrap_or_else(|e| e.into_inner()).len();
    if n > 0 {
        return Err(Errno::new(
            libc::EBUSY,
            format!("doorbell region used by {n} queues"),
        ));
    }
    regions().retain(|r| !Arc::ptr_eq(r, reg));
    Ok(())
}

/// Copies each new doorbell to the queue it names.
fn forward(r: &Region) -> bool {
    let v = r.page.0[0].load(Ordering::Acquire);
    if v == r.last.swap(v, Ordering::AcqRel) {
        return false;
    }
    let Ok(db) = DoorbellRepr::parse(v) else {
        return true;
    };
    let routes = r.routes.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(route) = routes
        .iter()
        .find(|x| x.db_type == db.db_type && x.xid == db.xid)
    {
        // SAFETY: the queue's doorbell word, alive while its route is (routes are removed,
        // under this lock, before a queue is destroyed).
        unsafe { gda_hal::mmio::store_u64_release(route.dest as *mut u64, v) };
    }
    true
}

/// Routes doorbells from the engine of the process's fabric, before each of its scans (no
/// thread of its own: the doorbell reaches its queue in the same pass that executes it).
fn start_forwarder(fabric: &Fabric) {
    static START: Once = Once::new();
    START.call_once(|| {
        fabric.add_scan_hook(Arc::new(|| {
            let all: Vec<Arc<Region>> = regions().clone();
            let mut moved = false;
            for r in &all {
                moved |= forward(r);
            }
            moved
        }));
    });
}

/// Removes the route of a queue being destroyed (any region of `ctx`), releasing its umem.
fn forget_route(ctx: ContextKey, db_type: DbType, queue: u32) {
    let xid = xid(queue);
    for r in regions().iter().filter(|r| r.ctx == ctx) {
        let mut routes = r.routes.lock().unwrap_or_else(|e| e.into_inner());
        routes.retain(|x| {
            let gone = x.db_type == db_type && x.xid == xid;
            if gone {
                // SAFETY: the counter outlives every route that counts it (the contract of
                // `Route::new`).
                unsafe { &*x.umem_users }.fetch_sub(1, Ordering::AcqRel);
            }
            !gone
        });
    }
}
