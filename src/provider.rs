//! Provider names on the command line: every subcommand that takes `--provider` parses it into
//! a [`ProviderName`] and dispatches once into code generic over the provider.
//!
//! The names come from the vendor table ([`gda_providers`], one line per vendor), so a vendor
//! registered there is accepted by `gda perf`, `gda shmem` and `gda chaos` with no change
//! here. clap rejects any other name with the list of
//! the providers built in:
//!
//! ```text
//! error: invalid value 'rxe' for '--provider <PROVIDER>'
//!   [possible values: native, mlx5, bnxt]
//! ```

use std::fmt;
use std::sync::LazyLock;

pub use gda_providers::Dispatch;

/// The name of a provider this build can run on the software NIC (one of
/// [`gda_providers::NAMES`]); only a registered name can be held.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct ProviderName(&'static str);

static ALL: LazyLock<Vec<ProviderName>> = LazyLock::new(|| {
    gda_providers::NAMES
        .iter()
        .map(|&n| ProviderName(n))
        .collect()
});

impl ProviderName {
    /// Every registered provider, in registry order.
    #[must_use]
    pub fn all() -> &'static [Self] {
        &ALL
    }

    /// The provider called `name`, if one is registered.
    #[must_use]
    pub fn new(name: &str) -> Option<Self> {
        Self::all().iter().copied().find(|p| p.0 == name)
    }

    /// The name (`Provider::NAME`), as `--provider` takes it.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        self.0
    }

    /// Runs `d` with this provider's type.
    pub fn run<D: Dispatch>(self, d: D) -> D::Output {
        // A `ProviderName` is only ever made from the registry's own names.
        gda_providers::dispatch(self.0, d)
            .unwrap_or_else(|| unreachable!("{} is a registered provider", self.0))
    }
}

impl fmt::Display for ProviderName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.0)
    }
}

impl fmt::Debug for ProviderName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.0)
    }
}

impl clap::ValueEnum for ProviderName {
    fn value_variants<'a>() -> &'a [Self] {
        Self::all()
    }

    fn to_possible_value(&self) -> Option<clap::builder::PossibleValue> {
        Some(clap::builder::PossibleValue::new(self.0))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::ValueEnum;

    #[test]
    fn names_round_trip_and_unknown_names_are_refused() {
        assert!(!ProviderName::all().is_empty());
        for &p in ProviderName::all() {
            assert_eq!(ProviderName::new(p.as_str()), Some(p));
            assert_eq!(ProviderName::from_str(p.as_str(), false), Ok(p));
        }
        assert_eq!(ProviderName::new("rxe"), None);
        assert!(ProviderName::from_str("rxe", false).is_err());
    }
}
