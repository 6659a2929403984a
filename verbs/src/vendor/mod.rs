//! What differs between the device families behind the verbs objects, in one place.
//!
//! Everything else in this crate is written once, over a `V:` [`VendorQueue`]: the device
//! functions of [`gda_hal::Provider`] (which encode WQEs, ring doorbells and read CQEs) plus
//! what a verbs library must know of a family, which the family's own crate says in its
//! [`Modeled`] registration: the device ids it reports, how many send units a WQE of given limits
//! may take, and WQEs a program posted on the ring itself. Generic code runs for a family known
//! at run time through the one `match` on [`Kind`] ([`Kind::with`]) or on a QP's send-queue
//! handle ([`SqH::with`]). Both enums, and each family's [`VendorQueue`], are generated from the
//! vendor table's hardware vendors (`gda_providers::for_each_host_provider!`), one per `[host]`
//! line, named as the provider: a new family is its table line, with nothing here.
//!
//! What only a family's direct verbs keep (bnxt: the doorbell regions of `bnxt_re_dv_*`, in
//! [`bnxt`]) hangs off [`forget`], the one place the generic destroy paths reach it.

pub(crate) mod bnxt;

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

/// One device family, as the verbs objects use it: implemented for each hardware vendor of the
/// table (`families!` below). The rest comes from its [`Modeled`] registration (device ids,
/// WQE sizing, WQEs posted directly).
pub(crate) trait VendorQueue: Modeled + Provider<Rq = WqHandle> + 'static {
    /// `sq` as a QP keeps it.
    fn wrap(sq: Self::Sq) -> SqH;

    /// This family's handle in `h`, or `None` when `h` is another family's.
    fn sq_of(h: &SqH) -> Option<&Self::Sq>;
}

/// Forgets what the families' direct verbs keep about `gone` of context `ctx`: called by the
/// generic destroy paths (a CQ, a QP, a context), whatever the family.
pub(crate) fn forget(ctx: ContextKey, gone: Gone) {
    bnxt::forget(ctx, gone);
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

        $(
            impl VendorQueue for $p {
                fn wrap(sq: <$p as Provider>::Sq) -> SqH {
                    SqH::$name(sq)
                }

                #[allow(unreachable_patterns)]
                fn sq_of(h: &SqH) -> Option<&<$p as Provider>::Sq> {
                    match h {
                        SqH::$name(s) => Some(s),
                        _ => None,
                    }
                }
            }
        )*
    };
}

gda_providers::for_each_host_provider!(families);

impl Kind {
    /// The family called `name`.
    pub fn from_name(name: &str) -> Option<Kind> {
        Kind::ALL.iter().copied().find(|k| k.as_str() == name)
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
