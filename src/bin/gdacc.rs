//! `gdacc`: compile and link an OpenSHMEM C program against gda's `shmem.h` and
//! `libgdashmem.so` of the same build (as `oshcc` does for Open MPI's oshmem).
//!
//! `gdacc prog.c -o prog` runs `$CC` (default `cc`) with the include directory and, unless
//! only compiling (`-c`, `-E`, `-S`, `-M`, `-MM`), the library with an rpath, so
//! `gdarun -n 4 ./prog` runs the result with no environment set-up. `gdacc --showme` prints
//! the command instead; `gdacc --showme:compile` / `--showme:link` print the flags alone.
//! `$CC` may name a command with arguments (`CC="ccache gcc"`: split at white space, as
//! make does); printed commands are quoted for a POSIX shell; the rpath is passed with
//! `-Xlinker` so a directory with a comma in its name stays one path.
//! A C++ source (`.cpp`, `.cc`, `.cxx`), or a kernel source written for a GPU compiler (`.hip`,
//! `.cu`, compiled as C++: the device API's `GDA_LAUNCH` runs its kernels on CPU threads), is
//! compiled with `$CXX` (default `c++`) and `-std=gnu++17` unless the command names a standard
//! (`-std=`, `--std=`, `-ansi`: the user's flags decide; the GNU dialect is g++'s own default,
//! under which `<complex.h>` declares `creal`/`cimag`), and linked with the threads library.
//! Both are found beside this executable (`target/<profile>/gda-include`,
//! `target/<profile>/libgdashmem.so`), where `cargo build --features capi` puts them.

use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};

fn layout() -> Result<(PathBuf, PathBuf), String> {
    let exe = std::env::current_exe().map_err(|e| format!("cannot find gdacc itself: {e}"))?;
    let dir = exe
        .parent()
        .map(Path::to_path_buf)
        .ok_or("gdacc has no directory")?;
    let inc = dir.join("gda-include");
    let lib = dir.join("libgdashmem.so");
    for p in [&inc.join("shmem.h"), &lib] {
        if !p.exists() {
            return Err(format!(
                "{} is missing: gdacc uses the header and library built beside it \
                 (cargo build --release --features capi)",
                p.display()
            ));
        }
    }
    Ok((inc, dir))
}

/// `args` as one POSIX shell command line: words with anything but `[A-Za-z0-9_./=:,+@%-]`
/// in single quotes.
fn quoted(args: &[String]) -> String {
    let plain = |a: &str| {
        !a.is_empty()
            && a.bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"_./=:,+@%-".contains(&b))
    };
    args.iter()
        .map(|a| {
            if plain(a) {
                a.clone()
            } else {
                format!("'{}'", a.replace('\'', "'\\''"))
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (inc, dir) = match layout() {
        Ok(l) => l,
        Err(e) => {
            gda::shmem::diag!("gdacc: {e}");
            return ExitCode::from(2);
        }
    };
    let compile = vec![format!("-I{}", inc.display())];
    // `-Wl,-rpath,DIR` would split DIR at its commas.
    let link = vec![
        format!("-L{}", dir.display()),
        "-Xlinker".to_string(),
        "-rpath".to_string(),
        "-Xlinker".to_string(),
        dir.display().to_string(),
        "-lgdashmem".to_string(),
    ];
    match args.first().map(String::as_str) {
        Some("--showme:compile") => {
            println!("{}", quoted(&compile));
            return ExitCode::SUCCESS;
        }
        Some("--showme:link") => {
            println!("{}", quoted(&link));
            return ExitCode::SUCCESS;
        }
        _ => {}
    }
    let showme = args.first().is_some_and(|a| a == "--showme");
    let args: Vec<String> = args.into_iter().filter(|a| a != "--showme").collect();
    if args.is_empty() && !showme {
        gda::shmem::diag!("gdacc: no input; usage: gdacc prog.c -o prog [cc options]");
        return ExitCode::from(2);
    }
    let only_compile = args
        .iter()
        .any(|a| matches!(a.as_str(), "-c" | "-E" | "-S" | "-M" | "-MM"));
    let ext_is = |a: &String, exts: &[&str]| {
        Path::new(a)
            .extension()
            .and_then(|e| e.to_str())
            .is_some_and(|e| exts.contains(&e))
    };
    // A kernel source for a GPU compiler (.hip, .cu) builds for CPU threads as plain C++.
    let gpu_source = args.iter().any(|a| ext_is(a, &["hip", "cu"]));
    let cxx = gpu_source || args.iter().any(|a| ext_is(a, &["cpp", "cc", "cxx"]));
    let (var, default) = if cxx { ("CXX", "c++") } else { ("CC", "cc") };
    let cc_var = std::env::var(var).unwrap_or_default();
    let mut cmd: Vec<String> = cc_var.split_whitespace().map(str::to_owned).collect();
    if cmd.is_empty() {
        cmd.push(default.into());
    }
    let cc = cmd[0].clone();
    cmd.extend(compile);
    let names_a_standard = |a: &String| {
        a.starts_with("-std=") || a.starts_with("--std=") || a == "--std" || a == "-ansi"
    };
    if cxx && !args.iter().any(names_a_standard) {
        cmd.push("-std=gnu++17".into());
    }
    if gpu_source {
        cmd.extend(["-x".to_string(), "c++".to_string()]);
    }
    cmd.extend(args);
    if gpu_source {
        cmd.extend(["-x".to_string(), "none".to_string()]);
    }
    if !only_compile {
        cmd.extend(link);
        if cxx {
            cmd.push("-pthread".into());
        }
    }
    if showme {
        println!("{}", quoted(&cmd));
        return ExitCode::SUCCESS;
    }
    match Command::new(&cc).args(&cmd[1..]).status() {
        Ok(s) => ExitCode::from(s.code().unwrap_or(1).clamp(0, 255) as u8),
        Err(e) => {
            gda::shmem::diag!(
                "gdacc: cannot run the C compiler {cc:?}: {e} (set CC, or install gcc)"
            );
            ExitCode::from(2)
        }
    }
}
