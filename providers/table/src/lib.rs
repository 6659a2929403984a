//! # gda-providers — the one table of NIC vendors
//!
//! Every NIC vendor gda knows is one line of the `register!` table below, `name => crate::Type`
//! (the name is the provider's [`Provider::NAME`](gda_hal::Provider::NAME); a misspelt line
//! does not compile), with `[host]` when the vendor's NICs are also opened on real hardware
//! through rdma-core. Everything that picks, lists or loops over vendors reads this table:
//!
//! | generated | who uses it |
//! |---|---|
//! | [`NAMES`], [`dispatch`], [`models`] | the software NIC's models by name: `--provider` of `gda perf`, `gda shmem`, `gda chaos`; `GDA_SHMEM_PROVIDER` of the C ABI; `gda devices` |
//! | [`for_each_provider!`] | code that needs one item per vendor at compile time (the conformance suite's per-provider tests) |
//! | [`HOST_NAMES`], [`host_of`] | which vendors drive real NICs, in the order a default NIC is picked, and which drives a PCI vendor id |
//! | [`host`] (feature `host`) | discovery that names each NIC's provider, and opening a NIC's `control::Device` by name |
//! | [`for_each_host_provider!`] | the verbs-compatible library's per-vendor devices and queues |
//!
//! The software NIC (`gda-sim`) names no vendor: it runs whatever model it is handed.
//!
//! Adding a vendor is its crate, its line here, and its Cargo entries (see
//! `providers/README.md`); `tests/provider_table.rs` fails when a user of the table misses it.

use std::sync::Arc;

pub use gda_hal::model::{DeviceModel, Modeled};

/// Something run with a provider chosen at run time: [`dispatch`] calls [`Dispatch::run`] with
/// the provider a name selects, and everything after that choice is static dispatch.
pub trait Dispatch {
    /// What the run returns.
    type Output;
    /// Runs with provider `P`.
    fn run<P: Modeled>(self) -> Self::Output;
}

/// A hardware vendor's facts that need no rdma-core: its name and PCI vendor ids (the table's
/// `[host]` lines; the ids are the provider's own `Provider::PCI_VENDOR_IDS`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HostVendor {
    /// The provider (`Provider::NAME`).
    pub name: &'static str,
    /// PCI vendor ids of its NICs.
    pub pci_vendor_ids: &'static [u32],
}

/// Generates everything from the table (see the crate documentation). `$d` is a literal `$`,
/// passed in so that the generated `macro_rules!` can have metavariables of its own.
macro_rules! register {
    ($d:tt $($name:ident => $p:path $([$facet:ident])?),* $(,)?) => {
        /// Every provider type of the table under its table name (for the `$crate` paths of
        /// [`for_each_provider!`]).
        #[doc(hidden)]
        pub mod providers {
            $( #[allow(non_camel_case_types)] pub type $name = $p; )*
        }

        // The table's names are the providers' own: a misspelt line does not compile.
        $( const _: () = assert!(
            str_eq(stringify!($name), <$p as gda_hal::Provider>::NAME),
            concat!("table name ", stringify!($name), " is not ", stringify!($p), "::NAME"),
        ); )*

        /// Every provider's name, in table order (what `--provider` accepts).
        pub const NAMES: &[&str] = &[$( <$p as gda_hal::Provider>::NAME ),*];

        /// The device model of every provider in its default configuration, as the software
        /// NIC's engine holds them, in table order.
        #[must_use]
        pub fn models() -> Vec<Arc<dyn DeviceModel>> {
            vec![$( Arc::new(<$p as Modeled>::model()) ),*]
        }

        /// Runs `d` with the provider named `name` (one of [`NAMES`]); `None` if no provider
        /// has that name.
        pub fn dispatch<D: Dispatch>(name: &str, d: D) -> Option<D::Output> {
            $( if name == <$p as gda_hal::Provider>::NAME {
                return Some(d.run::<$p>());
            } )*
            None
        }

        /// Hands the table to macro `$m` as `$m! { [name => path, …] args… }` (paths through
        /// `$crate`, so the caller needs no vendor crate of its own); `args` pass through.
        ///
        /// ```
        /// macro_rules! names {
        ///     ([$($name:ident => $p:ty),*]) => { [$(stringify!($name)),*] };
        /// }
        /// assert_eq!(gda_providers::for_each_provider!(names), gda_providers::NAMES);
        /// ```
        #[macro_export]
        macro_rules! for_each_provider {
            ($d m:ident $d ($d args:tt)*) => {
                $d m! { [$( $name => $d crate::providers::$name ),*] $d ($d args)* }
            };
        }

        host_lines!($d [] $( $name => $p $([$facet])?, )*);
    };
}

/// Collects the `[host]` lines of the table, then generates their items.
macro_rules! host_lines {
    ($d:tt [$($hn:ident => $hp:path,)*]) => {
        /// The vendors whose NICs are opened on hardware, in the order a default NIC is picked
        /// (the first vendor with a NIC wins).
        pub const HOST_NAMES: &[&str] = &[$( <$hp as gda_hal::Provider>::NAME ),*];

        /// The hardware vendors with their PCI vendor ids, in [`HOST_NAMES`] order.
        pub const HOST_VENDORS: &[HostVendor] = &[$( HostVendor {
            name: <$hp as gda_hal::Provider>::NAME,
            pci_vendor_ids: <$hp as gda_hal::Provider>::PCI_VENDOR_IDS,
        } ),*];

        /// Hands the `[host]` lines to macro `$m`, as [`for_each_provider!`] does all lines.
        ///
        /// ```
        /// macro_rules! names {
        ///     ([$($name:ident => $p:ty),*]) => { [$(stringify!($name)),*] };
        /// }
        /// assert_eq!(gda_providers::for_each_host_provider!(names), gda_providers::HOST_NAMES);
        /// ```
        #[macro_export]
        macro_rules! for_each_host_provider {
            ($d m:ident $d ($d args:tt)*) => {
                $d m! { [$( $hn => $d crate::providers::$hn ),*] $d ($d args)* }
            };
        }

        /// Opens a NIC with the control path of a provider chosen at run time.
        #[cfg(feature = "host")]
        fn open_host<V: host::OnDevice>(
            ctx: Arc<gda_rdma::Context>,
            on: V,
        ) -> Result<V::Output, String> {
            let vendor = ctx.info().vendor_id;
            $( if <$hp as gda_hal::Provider>::PCI_VENDOR_IDS.contains(&vendor) {
                return <$hp as gda_rdma::Host>::on(ctx)
                    .map(|d| on.run(d))
                    .map_err(|e| e.to_string());
            } )*
            Err(format!(
                "{} is a device of PCI vendor {vendor:#06x}, which no gda provider drives \
                 (gda drives {})",
                ctx.info().name,
                host_families(),
            ))
        }

        /// "ConnectX (mlx5) and Thor2 (bnxt)".
        #[cfg(feature = "host")]
        fn host_families() -> String {
            let v: Vec<String> = vec![$( format!(
                "{} ({})",
                <$hp as gda_rdma::Host>::FAMILY,
                <$hp as gda_hal::Provider>::NAME
            ) ),*];
            v.join(", ")
        }
    };
    ($d:tt [$($acc:tt)*] $name:ident => $p:path [host], $($rest:tt)*) => {
        host_lines!($d [$($acc)* $name => $p,] $($rest)*);
    };
    ($d:tt [$($acc:tt)*] $name:ident => $p:path, $($rest:tt)*) => {
        host_lines!($d [$($acc)*] $($rest)*);
    };
}

// The table: one line per vendor.
register! {$
    native => gda_native::Native,
    mlx5 => gda_mlx5::Mlx5 [host],
    bnxt => gda_bnxt::Bnxt [host],
}

/// The hardware vendor that drives NICs of PCI vendor `vendor_id`, if any.
#[must_use]
pub fn host_of(vendor_id: u32) -> Option<&'static str> {
    HOST_VENDORS
        .iter()
        .find(|v| v.pci_vendor_ids.contains(&vendor_id))
        .map(|v| v.name)
}

/// `a == b` in a `const` context (the table's name check).
const fn str_eq(a: &str, b: &str) -> bool {
    let (a, b) = (a.as_bytes(), b.as_bytes());
    if a.len() != b.len() {
        return false;
    }
    let mut i = 0;
    while i < a.len() {
        if a[i] != b[i] {
            return false;
        }
        i += 1;
    }
    true
}

/// Real NICs through rdma-core: discovery that names each NIC's provider, and opening one.
#[cfg(feature = "host")]
pub mod host {
    use std::sync::Arc;

    use gda_hal::control::DeviceInfo;
    use gda_rdma::Verbs;

    /// Something run with a NIC opened with its provider's control path.
    pub trait OnDevice {
        /// What the run returns.
        type Output;
        /// Runs with the opened device.
        fn run<D>(self, d: D) -> Self::Output
        where
            D: gda_hal::control::Device + Send + Sync + 'static,
            D::Provider: gda_rdma::Host;
    }

    /// rdma-core's devices, each with the provider that drives it (`"unknown"` where none
    /// does).
    ///
    /// # Errors
    /// Discovery's own.
    pub fn devices(verbs: &Verbs) -> Result<Vec<DeviceInfo>, gda_rdma::DiscoverError> {
        let mut v = verbs.devices()?;
        for d in &mut v {
            d.provider = super::host_of(d.vendor_id).unwrap_or("unknown");
        }
        Ok(v)
    }

    /// Opens the NIC `name` — by default the first NIC of the first vendor in
    /// [`HOST_NAMES`](super::HOST_NAMES) order that has one — through `verbs`, with the control
    /// path of the vendor that drives it, and runs `on` with it.
    ///
    /// # Errors
    /// A message naming what is missing: no such NIC, no NIC of any vendor, a NIC no provider
    /// drives, or the provider's own refusal.
    pub fn open<V: OnDevice>(
        verbs: Arc<Verbs>,
        name: Option<&str>,
        on: V,
    ) -> Result<V::Output, String> {
        let devices = devices(&verbs).map_err(|e| e.to_string())?;
        let info = match name {
            Some(n) => devices
                .into_iter()
                .find(|d| d.name == n)
                .ok_or_else(|| format!("no RDMA device {n:?} (gda devices lists them)"))?,
            None => super::HOST_NAMES
                .iter()
                .find_map(|p| devices.iter().find(|d| d.provider == *p).cloned())
                .ok_or_else(|| {
                    format!(
                        "no {} device (gda devices lists what there is)",
                        super::host_families()
                    )
                })?,
        };
        let ctx = gda_rdma::Context::open_info(verbs, info).map_err(|e| e.to_string())?;
        super::open_host(ctx, on)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Name;
    impl Dispatch for Name {
        type Output = &'static str;
        fn run<P: Modeled>(self) -> &'static str {
            <P as gda_hal::Provider>::NAME
        }
    }

    #[test]
    fn every_name_dispatches_to_its_provider_and_model() {
        let models = models();
        assert_eq!(models.len(), NAMES.len());
        for (name, model) in NAMES.iter().zip(&models) {
            assert_eq!(dispatch(name, Name), Some(*name));
            assert_eq!(model.name(), *name);
        }
        assert_eq!(dispatch("rxe", Name), None);
    }

    #[test]
    fn hardware_vendors_are_table_lines_with_disjoint_pci_ids() {
        assert!(HOST_NAMES.iter().all(|h| NAMES.contains(h)));
        assert_eq!(
            HOST_VENDORS.iter().map(|v| v.name).collect::<Vec<_>>(),
            HOST_NAMES
        );
        let mut seen = Vec::new();
        for v in HOST_VENDORS {
            assert!(!v.pci_vendor_ids.is_empty(), "{}", v.name);
            for id in v.pci_vendor_ids {
                assert!(!seen.contains(id), "{id:#06x} claimed twice");
                seen.push(*id);
                assert_eq!(host_of(*id), Some(v.name));
            }
        }
        assert_eq!(host_of(0x8086), None);
    }
}
