//! RC QPs whose state is in their type: each transition exists only in the state it leaves
//! and takes exactly its attributes.

use core::marker::PhantomData;

use super::{Endpoint, InitAttr, LocalPath, RtrAttr, RtsAttr};
use crate::Provider;

/// What a provider implements for an RC QP; callers use it through [`RcQp`], whose
/// transitions call these in the order the QP state machine allows.
pub trait RawRcQp: Send {
    /// The provider whose device functions write this QP's queues.
    type Provider: Provider;
    /// The provider's error.
    type Error;
    /// QP number.
    fn qpn(&self) -> u32;
    /// The first PSN this QP will send: what its [`Endpoint`] advertises and what RTS must set.
    fn send_psn(&self) -> u32;
    /// The send queue's handle for the provider's device functions.
    fn sq_handle(&self) -> Result<<Self::Provider as Provider>::Sq, Self::Error>;
    /// The receive queue's handle.
    fn rq_handle(&self) -> Result<<Self::Provider as Provider>::Rq, Self::Error>;
    /// RESET → INIT (called by [`RcQp::init`] only).
    fn modify_init(&mut self, attr: &InitAttr) -> Result<(), Self::Error>;
    /// INIT → RTR (called by [`RcQp::rtr`] only).
    fn modify_rtr(&mut self, attr: &RtrAttr) -> Result<(), Self::Error>;
    /// RTR → RTS (called by [`RcQp::rts`] only).
    fn modify_rts(&mut self, attr: &RtsAttr) -> Result<(), Self::Error>;
    /// Any state → ERROR: outstanding and later work completes flushed.
    fn modify_error(&mut self) -> Result<(), Self::Error>;
}

mod sealed {
    pub trait Sealed {}
}

/// A QP state marker ([`Reset`], [`Init`], [`Rtr`], [`Rts`]).
pub trait QpStage: sealed::Sealed {
    /// The state's name in the verbs spelling.
    const NAME: &'static str;
}

macro_rules! stage {
    ($($(#[$m:meta])* $name:ident = $text:literal),*) => {$(
        $(#[$m])*
        #[derive(Debug)]
        pub enum $name {}
        impl sealed::Sealed for $name {}
        impl QpStage for $name {
            const NAME: &'static str = $text;
        }
    )*};
}

stage! {
    /// Created or reset: no traffic.
    Reset = "RESET",
    /// Port and access set: receives may be posted.
    Init = "INIT",
    /// Connected to a peer: receives complete.
    Rtr = "RTR",
    /// Ready to send.
    Rts = "RTS"
}

/// A transition the provider refused: the QP, still in its earlier state, and why.
#[derive(Debug)]
pub struct Refused<T, E> {
    /// The QP, unchanged.
    pub qp: T,
    /// The provider's error.
    pub error: E,
}

impl<T, E: core::fmt::Display> core::fmt::Display for Refused<T, E> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        self.error.fmt(f)
    }
}

impl<Q, S: QpStage, E> Refused<RcQp<Q, S>, E> {
    /// The provider's QP, untyped (its state is `S`).
    pub fn into_raw(self) -> Refused<Q, E> {
        Refused {
            qp: self.qp.raw,
            error: self.error,
        }
    }
}

/// An RC QP in state `S`.
#[derive(Debug)]
pub struct RcQp<Q, S: QpStage> {
    raw: Q,
    _state: PhantomData<fn() -> S>,
}

impl<Q: RawRcQp, S: QpStage> RcQp<Q, S> {
    /// QP number.
    pub fn qpn(&self) -> u32 {
        self.raw.qpn()
    }

    /// The state's name.
    pub fn state(&self) -> &'static str {
        S::NAME
    }

    /// The provider's QP (for provider-specific calls).
    pub fn raw(&self) -> &Q {
        &self.raw
    }

    /// The send queue's handle (in any state: device code may build WQEs early, the NIC
    /// executes them once the QP is in RTS).
    pub fn sq_handle(&self) -> Result<<Q::Provider as Provider>::Sq, Q::Error> {
        self.raw.sq_handle()
    }

    /// The receive queue's handle.
    pub fn rq_handle(&self) -> Result<<Q::Provider as Provider>::Rq, Q::Error> {
        self.raw.rq_handle()
    }

    /// What a peer needs to connect to this QP over `path`.
    pub fn endpoint(&self, path: &LocalPath) -> Endpoint {
        Endpoint {
            qpn: self.raw.qpn(),
            psn: self.raw.send_psn(),
            lid: path.lid,
            gid: path.gid.gid,
            mtu: path.mtu,
            port: path.port,
            link_layer: path.link_layer,
        }
    }

    /// Moves to ERROR: outstanding work completes flushed. The QP stays usable for its
    /// handles (to drain completions) and is destroyed by dropping it.
    pub fn into_error(mut self) -> Result<Q, Refused<Self, Q::Error>> {
        match self.raw.modify_error() {
            Ok(()) => Ok(self.raw),
            Err(error) => Err(Refused { qp: self, error }),
        }
    }

    fn step<T: QpStage>(
        mut self,
        f: impl FnOnce(&mut Q) -> Result<(), Q::Error>,
    ) -> Result<RcQp<Q, T>, Refused<Self, Q::Error>> {
        match f(&mut self.raw) {
            Ok(()) => Ok(RcQp {
                raw: self.raw,
                _state: PhantomData,
            }),
            Err(error) => Err(Refused { qp: self, error }),
        }
    }
}

impl<Q: RawRcQp> RcQp<Q, Reset> {
    /// Wraps a provider's QP that is in RESET (providers call this from
    /// [`super::Device::create_rc_qp`]).
    pub fn from_raw(raw: Q) -> Self {
        Self {
            raw,
            _state: PhantomData,
        }
    }

    /// RESET → INIT.
    pub fn init(self, attr: &InitAttr) -> Result<RcQp<Q, Init>, Refused<Self, Q::Error>> {
        self.step(|q| q.modify_init(attr))
    }

    /// RESET → INIT → RTR → RTS with the attributes for `path` and `remote` (defaults of
    /// [`InitAttr::new`], [`RtrAttr::new`], [`RtsAttr::new`]). A refusal returns the
    /// provider's QP, in whatever state it reached, and the error.
    pub fn connect(
        self,
        path: &LocalPath,
        remote: &Endpoint,
    ) -> Result<RcQp<Q, Rts>, Refused<Q, Q::Error>>
    where
        Q::Error: From<super::ControlError>,
    {
        let rtr = match RtrAttr::new(path, remote) {
            Ok(a) => a,
            Err(e) => {
                return Err(Refused {
                    qp: self.raw,
                    error: e.into(),
                });
            }
        };
        let psn = self.raw.send_psn();
        let qp = self.init(&InitAttr::new(path)).map_err(Refused::into_raw)?;
        let qp = qp.rtr(&rtr).map_err(Refused::into_raw)?;
        qp.rts(&RtsAttr::new(psn)).map_err(Refused::into_raw)
    }
}

impl<Q: RawRcQp> RcQp<Q, Init> {
    /// INIT → RTR.
    pub fn rtr(self, attr: &RtrAttr) -> Result<RcQp<Q, Rtr>, Refused<Self, Q::Error>> {
        self.step(|q| q.modify_rtr(attr))
    }
}

impl<Q: RawRcQp> RcQp<Q, Rtr> {
    /// RTR → RTS.
    pub fn rts(self, attr: &RtsAttr) -> Result<RcQp<Q, Rts>, Refused<Self, Q::Error>> {
        self.step(|q| q.modify_rts(attr))
    }
}
