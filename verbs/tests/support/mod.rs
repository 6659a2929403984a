//! What the verbs library's integration tests share: where the library is, compiling a C test
//! program against the system's rdma-core headers, running programs with a deadline.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

/// `target/<profile>/verbs-sim` (the test binary is `target/<profile>/deps/<name>-<hash>`).
pub fn verbs_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("test binary path");
    let profile = exe
        .parent()
        .and_then(Path::parent)
        .expect("test binary is in target/<profile>/deps");
    let dir = profile.join("verbs-sim");
    assert!(
        dir.join("libibverbs.so.1").exists(),
        "{} has no libibverbs.so.1: build the library first (cargo build -p gda-verbs)",
        dir.display()
    );
    dir
}

/// A system program the test needs: `None` (and a note) when missing outside CI; under CI
/// (`CI` set) a missing program fails the test, naming the Debian package that has it.
pub fn system_program(path: &str, package: &str) -> Option<PathBuf> {
    let p = PathBuf::from(path);
    if p.exists() {
        return Some(p);
    }
    if std::env::var_os("CI").is_some() {
        panic!("{path} is missing: apt-get install {package} (.ci/run installs it)");
    }
    eprintln!("note: {path} is missing (apt-get install {package}); skipping");
    None
}

/// A command with the verbs library first on the loader's path.
pub fn verbs_command(program: impl AsRef<std::ffi::OsStr>) -> Command {
    let mut c = Command::new(program);
    c.env("LD_LIBRARY_PATH", verbs_dir());
    c
}

/// Compiles `tests/c/<name>.c` against the system's `<infiniband/*.h>` and links it with the
/// verbs library (rpath set); returns the executable.
pub fn compile_c(name: &str) -> PathBuf {
    let dir = verbs_dir();
    let src = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/c")
        .join(format!("{name}.c"));
    let out_dir = std::env::temp_dir().join(format!("gda-verbs-tests-{}", std::process::id()));
    std::fs::create_dir_all(&out_dir).expect("temp dir");
    let exe = out_dir.join(name);
    let status = Command::new(std::env::var("CC").unwrap_or_else(|_| "cc".into()))
        .args(["-std=gnu11", "-Wall", "-Werror", "-O1"])
        .arg(&src)
        .arg("-o")
        .arg(&exe)
        .arg(format!("-L{}", dir.display()))
        .arg(format!("-Wl,-rpath,{}", dir.display()))
        .args(["-libverbs", "-lmlx5", "-ldl", "-lpthread"])
        .status()
        .unwrap_or_else(|e| {
            panic!("cannot run the C compiler (apt-get install build-essential): {e}")
        });
    assert!(status.success(), "compiling {} failed", src.display());
    exe
}

/// Runs `cmd` to completion, killing it after `limit`; panics on timeout.
pub fn run_with_deadline(cmd: &mut Command, limit: Duration) -> Output {
    let child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("spawn {cmd:?}: {e}"));
    wait_with_deadline(child, limit, &format!("{cmd:?}"))
}

/// A child process killed (and reaped) when dropped: a test that panics while its server
/// waits for a client that will never come leaves no process behind spinning on a CPU.
pub struct KillOnDrop(pub Option<Child>);

impl KillOnDrop {
    /// The child, no longer killed on drop.
    pub fn take(mut self) -> Child {
        self.0.take().expect("the child is taken once")
    }
}

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        if let Some(mut c) = self.0.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// Waits for `child`, killing it after `limit`.
pub fn wait_with_deadline(mut child: Child, limit: Duration, what: &str) -> Output {
    let start = Instant::now();
    loop {
        match child.try_wait() {
            Ok(Some(_)) => return child.wait_with_output().expect("collect output"),
            Ok(None) if start.elapsed() > limit => {
                let _ = child.kill();
                let out = child.wait_with_output().expect("collect output");
                panic!(
                    "{what} did not finish in {limit:?}\nstdout:\n{}\nstderr:\n{}",
                    String::from_utf8_lossy(&out.stdout),
                    String::from_utf8_lossy(&out.stderr)
                );
            }
            Ok(None) => std::thread::sleep(Duration::from_millis(10)),
            Err(e) => panic!("{what}: {e}"),
        }
    }
}

/// The `N passed, M failed` line a C test program ends with: (passed, failed).
pub fn tally(stdout: &str) -> (u32, u32) {
    let line = stdout
        .lines()
        .rev()
        .find(|l| l.contains(" passed, "))
        .unwrap_or_else(|| panic!("no 'N passed, M failed' line in:\n{stdout}"));
    let nums: Vec<u32> = line
        .split(|c: char| !c.is_ascii_digit())
        .filter(|s| !s.is_empty())
        .map(|s| s.parse().unwrap())
        .collect();
    (nums[0], nums[1])
}
