//! The seam a NIC provider's host control path implements so that gda can find its NICs among
//! rdma-core's devices and open them: which PCI vendors it drives, and how it turns an opened
//! device context into its `control::Device`.
//!
//! gda-rdma names no vendor itself: the table of vendors (`gda-providers`) lists the providers
//! that implement [`Host`], and discovery ([`crate::Verbs::devices`]) reports every device as
//! `provider: "unknown"` until the table claims it by its vendor id.

use std::sync::Arc;

use crate::Context;

/// A provider whose NICs are opened through rdma-core (those of its
/// [`Provider::PCI_VENDOR_IDS`](gda_hal::Provider::PCI_VENDOR_IDS)).
pub trait Host: gda_hal::Provider {
    /// What a NIC of it looks like to the user (`"ConnectX"`), for messages.
    const FAMILY: &'static str;
    /// The provider and what its control path runs on, for reports (`"mlx5 (rdma-core)"`).
    const LABEL: &'static str;
    /// Its control-path device.
    type Device: gda_hal::control::Device<Provider = Self> + Send + Sync + 'static;
    /// Why opening failed.
    type OpenError: std::error::Error + Send + Sync + 'static;

    /// Its control path on an opened device context.
    ///
    /// # Errors
    /// The device's vendor is not one of the provider's PCI vendor ids, or the provider's own
    /// library (direct verbs) cannot be loaded or refuses the device.
    fn on(ctx: Arc<Context>) -> Result<Self::Device, Self::OpenError>;
}
