//! Argument checks shared by the `gda` and `gdarun` binaries: every numeric option is parsed
//! here, so a negative, NaN, infinite, zero or absurd value is a clear usage error, never a
//! panic further down (`Duration::from_secs_f64(-1.0)` panics).

/// Seconds: a finite number in `min..=max`.
pub fn seconds_in(s: &str, min: f64, max: f64) -> Result<f64, String> {
    let v: f64 = s
        .trim()
        .parse()
        .map_err(|_| format!("{s:?} is not a number of seconds"))?;
    if !v.is_finite() || v < min || v > max {
        return Err(format!(
            "{s:?} seconds: expected a number from {min} to {max}"
        ));
    }
    Ok(v)
}

/// `gdarun --grace`: 0 to one day.
pub fn grace_seconds(s: &str) -> Result<f64, String> {
    seconds_in(s, 0.0, 86_400.0)
}

/// `gda perf idle --seconds`: more than nothing, at most an hour.
pub fn measure_seconds(s: &str) -> Result<f64, String> {
    let v = seconds_in(s, 0.0, 3_600.0)?;
    if v < 0.01 {
        return Err(format!(
            "{s:?} seconds is too short to measure (at least 0.01)"
        ));
    }
    Ok(v)
}

/// A PE or host count: 1 to [`gda_shmem::launch::MAX_PES`] (`gdarun -n`, `--hosts`,
/// `gda shmem --pes`).
pub fn pe_count(s: &str) -> Result<u32, String> {
    count_in(s, 1, u64::from(gda_shmem::launch::MAX_PES)).map(|v| v as u32)
}

/// A whole number in `min..=max`.
pub fn count_in(s: &str, min: u64, max: u64) -> Result<u64, String> {
    let v: u64 = s
        .trim()
        .parse()
        .map_err(|_| format!("{s:?} is not a whole number"))?;
    if v < min || v > max {
        return Err(format!("{v} is not in {min}..={max}"));
    }
    Ok(v)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bad_numbers_are_errors_not_panics() {
        for bad in ["-1", "nan", "NaN", "inf", "-inf", "1e309", "", "x", "86401"] {
            assert!(grace_seconds(bad).is_err(), "{bad}");
        }
        assert_eq!(grace_seconds("0").unwrap(), 0.0);
        assert_eq!(grace_seconds(" 2.5 ").unwrap(), 2.5);
        for bad in ["0", "0.001", "nan", "-3", "3601"] {
            assert!(measure_seconds(bad).is_err(), "{bad}");
        }
        assert!(count_in("0", 1, 10).is_err());
        assert!(count_in("11", 1, 10).is_err());
        assert!(count_in("-1", 1, 10).is_err());
        assert_eq!(count_in("10", 1, 10).unwrap(), 10);
    }
}

/// Where PEs started here run: `--bind-to` and `--report-bindings`, the same in `gdarun` and
/// `gda shmem --pes`.
#[derive(clap::Args, Clone, Copy, Debug)]
pub struct Placement {
    /// CPU binding: `core` pins PE r to the r-th CPU this launcher may use, `none` leaves
    /// placement to the scheduler, `auto` (default) is `core` when there are at least as many
    /// CPUs as PEs and the PEs run no software-NIC engine (RDMA routes), else `none` (as
    /// oshrun binds to cores by default). A bound PE's engine thread keeps all the launcher's
    /// CPUs (it stands in for the NIC, which never shares the PE's core).
    #[arg(
        long = "bind-to",
        default_value = "auto",
        value_name = "auto|core|none"
    )]
    pub bind: gda_shmem::launch::Bind,
    /// Each PE prints, once initialised, the CPUs it and its software-NIC engine may run on
    /// (as the kernel reports them), like mpirun's --report-bindings.
    #[arg(long)]
    pub report_bindings: bool,
}
