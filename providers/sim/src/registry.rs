//! The providers this software NIC models, by name: the one table a vendor is registered in.
//!
//! The table is the `register!` invocation in the crate root (`providers/sim/src/lib.rs`), one
//! line per vendor, `name => crate::Provider`, where `name` is the provider's
//! [`Provider::NAME`](gda_hal::Provider::NAME). From that single line it generates:
//!
//! - [`models`](crate::models) — every device model, as the engine holds them;
//! - [`NAMES`] — every provider name, in table order (what `--provider` accepts);
//! - [`dispatch`] — runs a [`Dispatch`] with the provider a name selects, monomorphised per
//!   provider: the run-time choice is made once, and everything after it is static dispatch;
//! - [`for_each_provider!`](crate::for_each_provider) — hands the table to a macro, for code that
//!   needs one item per provider at compile time (the conformance suite's per-provider tests).

/// Something run with a provider chosen at run time: [`dispatch`] calls [`Dispatch::run`] with
/// the provider a name selects.
pub trait Dispatch {
    /// What the run returns.
    type Output;
    /// Runs with provider `P`.
    fn run<P: crate::Modeled>(self) -> Self::Output;
}

/// Generates the registry from the table (see the module documentation). `$d` is a literal `$`,
/// passed in so the generated `macro_rules!` can have metavariables of its own.
macro_rules! register {
    ($d:tt $($name:ident => $p:path),* $(,)?) => {
        /// Every provider type of the table, under its table name (for
        /// [`for_each_provider!`]'s `$crate` paths).
        #[doc(hidden)]
        pub mod providers {
            $( #[allow(non_camel_case_types)] pub type $name = $p; )*
        }

        #[doc(hidden)]
        pub const __NAMES: &[&str] = &[$( <$p as gda_hal::Provider>::NAME ),*];
        // The table's names are the providers' own: a misspelt line does not compile.
        $( const _: () = assert!(
            $crate::registry::str_eq(stringify!($name), <$p as gda_hal::Provider>::NAME),
            concat!("registry name ", stringify!($name), " is not ", stringify!($p), "::NAME"),
        ); )*

        /// The device models this software NIC executes, one per registered provider in its
        /// default configuration (adding a vendor: see `providers/README.md`). Tools look models
        /// up here by name.
        #[must_use]
        pub fn models() -> Vec<Model> {
            vec![$( std::sync::Arc::new(<$p as gda_hal::model::Modeled>::model()) ),*]
        }

        #[doc(hidden)]
        pub fn __dispatch<D: registry::Dispatch>(name: &str, d: D) -> Option<D::Output> {
            $( if name == <$p as gda_hal::Provider>::NAME {
                return Some(d.run::<$p>());
            } )*
            None
        }

        /// Hands the provider table to macro `$m` as `$m! { [name => path, …] args… }` (paths
        /// through `$crate`, so the caller needs no vendor crate of its own); `args` are passed
        /// through. Lets code generate one item per provider, e.g. one test module each.
        ///
        /// ```
        /// macro_rules! names {
        ///     ([$($name:ident => $p:ty),*]) => { [$(stringify!($name)),*] };
        /// }
        /// assert_eq!(gda_sim::for_each_provider!(names), gda_sim::registry::NAMES);
        /// ```
        #[macro_export]
        macro_rules! for_each_provider {
            ($d m:ident $d ($d args:tt)*) => {
                $d m! { [$( $name => $d crate::providers::$name ),*] $d ($d args)* }
            };
        }
    };
}

/// Every registered provider's [`Provider::NAME`](gda_hal::Provider::NAME), in table order.
pub const NAMES: &[&str] = crate::__NAMES;

/// Runs `d` with the provider named `name` (one of [`NAMES`]); `None` if no provider has that
/// name.
pub fn dispatch<D: Dispatch>(name: &str, d: D) -> Option<D::Output> {
    crate::__dispatch(name, d)
}

/// `a == b` in a `const` context (the table's name check).
#[doc(hidden)]
pub const fn str_eq(a: &str, b: &str) -> bool {
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

#[cfg(test)]
mod tests {
    use super::*;

    struct Name;
    impl Dispatch for Name {
        type Output = &'static str;
        fn run<P: crate::Modeled>(self) -> &'static str {
            <P as gda_hal::Provider>::NAME
        }
    }

    #[test]
    fn every_name_dispatches_to_its_provider_and_model() {
        let models = crate::models();
        assert_eq!(models.len(), NAMES.len());
        for (name, model) in NAMES.iter().zip(&models) {
            assert_eq!(dispatch(name, Name), Some(*name));
            assert_eq!(model.name(), *name);
        }
        assert_eq!(dispatch("rxe", Name), None);
    }
}
