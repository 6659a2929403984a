//! `csrc/bnxt/test_main.c`, built by `build.rs` against the same rdma-core bnxt_re harness the
//! differential tests use: the fact sheet's reference vectors (§E.4/§E.5), poll behaviour and
//! every quirk csrc/bnxt/NOTES.md lists, checked on the C side. It must run, and report all of
//! its checks passing.

#[test]
fn bnxt_harness_c_checks_pass() {
    let o = std::process::Command::new(env!("GDA_BNXT_TEST_MAIN"))
        .output()
        .expect("run bnxt_test_main");
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(
        o.status.success(),
        "{out}\n{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let last = out.lines().last().unwrap_or_default();
    let checks: u32 = last
        .strip_prefix("PASSED: ")
        .and_then(|r| r.split_whitespace().next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("unexpected summary: {last:?}"));
    assert!(checks >= 262, "only {checks} checks ran");
    assert!(last.ends_with("0 failures"), "{last}");
}
