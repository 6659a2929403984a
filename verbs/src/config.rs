//! Which simulated devices a process sees: `GDA_VERBS_DEVICES`.
//!
//! A comma-separated list of `kind[:count]`, `kind` being a hardware vendor of the vendor table
//! (`gda_providers::HOST_NAMES`: `mlx5`, a ConnectX named `gda_mlx5_<n>`; `bnxt`, a Thor2,
//! `gda_bnxt_<n>`). Unset: one of each, in table order. Empty: no devices
//! (`ibv_get_device_list` returns an empty list, as on a host without RDMA NICs).

use std::fmt;

pub use crate::vendor::Kind;

/// One device to create.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DeviceSpec {
    /// Family.
    pub kind: Kind,
    /// Index among devices of its family (`gda_mlx5_<index>`).
    pub index: u32,
}

impl DeviceSpec {
    /// `gda_<kind>_<index>`.
    pub fn name(&self) -> String {
        format!("gda_{}_{}", self.kind.as_str(), self.index)
    }
}

/// A malformed `GDA_VERBS_DEVICES`.
#[derive(Debug, PartialEq, Eq)]
pub struct ConfigError(pub String);

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "GDA_VERBS_DEVICES: {}", self.0)
    }
}

/// Most devices of one family (names stay short; a host rarely has more NICs).
pub const MAX_PER_KIND: u32 = 16;

/// The devices `value` (the variable's value, `None` when unset) asks for.
pub fn parse(value: Option<&str>) -> Result<Vec<DeviceSpec>, ConfigError> {
    let default = gda_providers::HOST_NAMES.join(",");
    let value = value.unwrap_or(&default);
    let mut out = Vec::new();
    let mut counts = vec![0u32; Kind::ALL.len()];
    for item in value.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        let (kind, count) = match item.split_once(':') {
            Some((k, c)) => (
                k.trim(),
                c.trim().parse::<u32>().map_err(|_| {
                    ConfigError(format!("{item:?}: the count after ':' is not a number"))
                })?,
            ),
            None => (item, 1),
        };
        let kind = Kind::from_name(kind).ok_or_else(|| {
            ConfigError(format!(
                "unknown device kind {kind:?} (expected one of {}, e.g. \"{}:2\")",
                gda_providers::HOST_NAMES.join(", "),
                gda_providers::HOST_NAMES.first().copied().unwrap_or("mlx5")
            ))
        })?;
        let slot = &mut counts[kind as usize];
        if count == 0 || *slot + count > MAX_PER_KIND {
            return Err(ConfigError(format!(
                "{item:?}: between 1 and {MAX_PER_KIND} devices of each kind"
            )));
        }
        for _ in 0..count {
            out.push(DeviceSpec { kind, index: *slot });
            *slot += 1;
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_is_one_of_each() {
        let d = parse(None).unwrap();
        let names: Vec<_> = d.iter().map(DeviceSpec::name).collect();
        assert_eq!(names, ["gda_mlx5_0", "gda_bnxt_0"]);
    }

    #[test]
    fn counts_and_empty() {
        let names: Vec<_> = parse(Some("mlx5:2, bnxt ,mlx5"))
            .unwrap()
            .iter()
            .map(DeviceSpec::name)
            .collect();
        assert_eq!(
            names,
            ["gda_mlx5_0", "gda_mlx5_1", "gda_bnxt_0", "gda_mlx5_2"]
        );
        assert!(parse(Some("")).unwrap().is_empty());
    }

    #[test]
    fn malformed_values_are_named() {
        let mut refused = 0;
        for bad in [
            "efa",
            "mlx5:x",
            "mlx5:0",
            "mlx5:17",
            "mlx5:9,mlx5:8",
            "mlx5:-1",
        ] {
            let e = parse(Some(bad)).unwrap_err();
            assert!(e.to_string().starts_with("GDA_VERBS_DEVICES: "), "{e}");
            refused += 1;
        }
        assert_eq!(refused, 6);
    }
}
