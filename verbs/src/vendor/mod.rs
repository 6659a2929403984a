//! What differs between the device families behind the verbs objects, in one place.
//!
//! Everything else in this crate is written once, over a `V:` [`VendorQueue`]: the device
//! functions of [`gda_hal::Provider`] (which encode WQEs, ring doorbells and read CQEs) plus the
//! few things a verbs library must know of a family: its PCI ids, how many send units a WQE of
//! given limits may take, how a QP keeps its send-queue handle, and hooks for state only one
//! family has (bnxt: the doorbell routes of its direct verbs; mlx5: WQEs a program posted on
//! the ring itself). Generic code runs for a family known at run time through the one `match`
//! on [`Kind`] ([`Kind::with`]) or on a QP's send-queue handle ([`SqH::with`]). Both enums are
//! generated from the vendor table's hardware vendors (`gda_providers::for_each_host_provider!`),
//! one variant per `[host]` line, named as the provider; a new family is its table line and a
//! file here implementing [`VendorQueue`] (without one, this crate does not compile).

pub(crate) mod bnxt;
mod mlx5;

use gda_hal::{Provider, WqHandle};
use gda_sim::Modeled;

/// A context, as state kept below the `device` module names it (the context's address).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct ContextKey(pub(crate) usize);

/// A verbs object going away, for the family's own bookkeeping ([`VendorQueue::forget`]).
#[derive(Clone, Copy, Debug)]
pub(crate) enum Gone {
    /// The CQ of this number is being destroyed.
    Cq(u32),
    /// The QP of this number is being destroyed.
    Qp(u32),
    /// The context is being closed.
    Context,
}

/// One device family, as the verbs objects use it.
pub(crate) trait VendorQueue: Modeled + Provider<Rq = WqHandle> + 'static {
    /// PCI vendor id and part id, as the real device reports them (`ibv_query_device`).
    const IDS: (u32, u32);

    /// Send units one WQE with up to `max_sge` gather entries or `max_inline` inline bytes
    /// takes at most (by default the family's largest WQE).
    fn wqe_units(max_sge: u32, max_inline: u32) -> u32 {
        let _ = (max_sge, max_inline);
        Self::MAX_WQE_UNITS
    }

    /// `sq` as a QP keeps it.
    fn wrap(sq: Self::Sq) -> SqH;

    /// This family's handle in `h`, or `None` when `h` is another family's.
    fn sq_of(h: &SqH) -> Option<&Self::Sq>;

    /// Send units a program posted on `sq` itself (through direct verbs) past `head`, the unit
    /// after the newest one this library posted (unwrapped): what the family's doorbell state
    /// shows, 0 when it shows nothing (the default).
    ///
    /// # Safety
    /// `sq` addresses a live send queue.
    unsafe fn posted_directly(sq: &Self::Sq, head: u64) -> u64 {
        let _ = (sq, head);
        0
    }

    /// Forgets what the family keeps about `gone` of context `ctx` (nothing by default).
    fn forget(ctx: ContextKey, gone: Gone) {
        let _ = (ctx, gone);
    }
}

/// Generic code to run for a family known at run time ([`Kind::with`]).
pub(crate) trait ForVendor {
    /// What it returns.
    type Out;
    /// Runs it for family `V`.
    fn run<V: VendorQueue>(self) -> Self::Out;
}

/// Generic code to run on a QP's send queue ([`SqH::with`]).
pub(crate) trait ForSq {
    /// What it returns.
    type Out;
    /// Runs it on `sq`, of family `V`.
    fn run<V: VendorQueue>(self, sq: &V::Sq) -> Self::Out;
}

/// Generates [`Kind`] and [`SqH`] from the table's hardware vendors.
macro_rules! families {
    ([$($name:ident => $p:ty),* $(,)?]) => {
        /// The family of a simulated device (its device model and the verbs data path's
        /// provider): one per hardware vendor of the table, named as the provider.
        #[allow(non_camel_case_types)]
        #[derive(Clone, Copy, Debug, PartialEq, Eq)]
        pub enum Kind {
            $(
                #[doc = concat!("`", stringify!($name), "`.")]
                $name,
            )*
        }

        impl Kind {
            /// Every family, in table order.
            pub const ALL: &'static [Kind] = &[$(Kind::$name),*];

            /// The name part (`gda_<kind>_<n>`): the provider's name.
            pub fn as_str(self) -> &'static str {
                match self {
                    $(Kind::$name => <$p as Provider>::NAME,)*
                }
            }

            /// Runs `f` for this family: the one place a [`Kind`] picks a provider.
            pub(crate) fn with<F: ForVendor>(self, f: F) -> F::Out {
                match self {
                    $(Kind::$name => f.run::<$p>(),)*
                }
            }
        }

        /// A QP's send-queue handle, of its family's type.
        #[allow(non_camel_case_types)]
        pub(crate) enum SqH {
            $(
                #[doc = concat!("`", stringify!($name), "`.")]
                $name(<$p as Provider>::Sq),
            )*
        }

        impl SqH {
            /// Runs `f` on the handle with its family's type: the one place a handle picks a
            /// provider.
            pub(crate) fn with<F: ForSq>(&self, f: F) -> F::Out {
                match self {
                    $(SqH::$name(s) => f.run::<$p>(s),)*
                }
            }
        }
    };
}

gda_providers::for_each_host_provider!(families);

impl Kind {
    /// The family called `name`.
    pub fn from_name(name: &str) -> Option<Kind> {
        Kind::ALL.iter().copied().find(|k| k.as_str() == name)
    }

    /// [`VendorQueue::forget`] of this family.
    pub(crate) fn forget(self, ctx: ContextKey, gone: Gone) {
        struct Forget(ContextKey, Gone);
        impl ForVendor for Forget {
            type Out = ();
            fn run<V: VendorQueue>(self) {
                V::forget(self.0, self.1);
            }
        }
        self.with(Forget(ctx, gone));
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    /// Files that may name a family: the `GDA_VERBS_DEVICES` parser, the C APIs of one family
    /// each (`mlx5dv_*`, `bnxt_re_dv_*`) and this module.
    const VENDOR_FILES: [&str; 4] = ["config.rs", "mlx5dv.rs", "bnxtdv.rs", "vendor"];

    /// What naming a family looks like in code.
    const VENDOR_NAMES: [&str; 8] = [
        "Kind::mlx5",
        "Kind::bnxt",
        "SqH::mlx5",
        "SqH::bnxt",
        "gda_mlx5",
        "gda_bnxt",
        "bnxtdv::",
        "mlx5dv::",
    ];

    fn rust_files(dir: &Path, out: &mut Vec<std::path::PathBuf>) {
        for e in std::fs::read_dir(dir).unwrap() {
            let p = e.unwrap().path();
            let name = p.file_name().unwrap().to_str().unwrap();
            if VENDOR_FILES.contains(&name) {
                continue;
            }
            if p.is_dir() {
                rust_files(&p, out);
            } else if name.ends_with(".rs") {
                out.push(p);
            }
        }
    }

    /// Every other file of the crate is generic: it names no family (every vendor difference
    /// goes through [`super::VendorQueue`]), so a vendor `match` cannot creep back in.
    #[test]
    fn generic_files_name_no_family() {
        let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
        let mut files = Vec::new();
        rust_files(&src, &mut files);
        assert!(files.len() >= 10, "{files:?}");
        let mut found = Vec::new();
        for f in &files {
            let text = std::fs::read_to_string(f).unwrap();
            for (n, line) in text.lines().enumerate() {
                let code = line.split("//").next().unwrap_or("");
                for name in VENDOR_NAMES {
                    if code.contains(name) {
                        found.push(format!("{}:{}: {name}", f.display(), n + 1));
                    }
                }
            }
        }
        assert!(
            found.is_empty(),
            "generic files name a device family (move it behind vendor::VendorQueue):\n{}",
            found.join("\n")
        );
    }
}
