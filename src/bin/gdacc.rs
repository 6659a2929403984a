//! `gdacc`: compile and link an OpenSHMEM C program against gda's `shmem.h` and
//! `libgdashmem.so` of the same build (as `oshcc` does for Open MPI's oshmem).
//!
//! `gdacc prog.c -o prog` runs `$CC` (default `cc`) with the include directory and, unless
//! only compiling (`-c`, `-E`, `-S`, `-M`, `-MM`), the library with an rpath, so
//! `gdarun -n 4 ./prog` runs the result with no environment set-up. `gdacc --showme` prints
//! the command instead; `gdacc --showme:compile` / `--showme:link` print the flags alone.
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

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (inc, dir) = match layout() {
        Ok(l) => l,
        Err(e) => {
            eprintln!("gdacc: {e}");
            return ExitCode::from(2);
        }
    };
    let compile = vec![format!("-I{}", inc.display())];
    let link = vec![
        format!("-L{}", dir.display()),
        format!("-Wl,-rpath,{}", dir.display()),
        "-lgdashmem".to_string(),
    ];
    match args.first().map(String::as_str) {
        Some("--showme:compile") => {
            println!("{}", compile.join(" "));
            return ExitCode::SUCCESS;
        }
        Some("--showme:link") => {
            println!("{}", link.join(" "));
            return ExitCode::SUCCESS;
        }
        _ => {}
    }
    let showme = args.first().is_some_and(|a| a == "--showme");
    let args: Vec<String> = args.into_iter().filter(|a| a != "--showme").collect();
    if args.is_empty() && !showme {
        eprintln!("gdacc: no input; usage: gdacc prog.c -o prog [cc options]");
        return ExitCode::from(2);
    }
    let only_compile = args
        .iter()
        .any(|a| matches!(a.as_str(), "-c" | "-E" | "-S" | "-M" | "-MM"));
    let cc = std::env::var("CC")
        .ok()
        .filter(|c| !c.is_empty())
        .unwrap_or_else(|| "cc".into());
    let mut cmd: Vec<String> = compile;
    cmd.extend(args);
    if !only_compile {
        cmd.extend(link);
    }
    if showme {
        println!("{cc} {}", cmd.join(" "));
        return ExitCode::SUCCESS;
    }
    match Command::new(&cc).args(&cmd).status() {
        Ok(s) => ExitCode::from(s.code().unwrap_or(1).clamp(0, 255) as u8),
        Err(e) => {
            eprintln!("gdacc: cannot run the C compiler {cc:?}: {e} (set CC, or install gcc)");
            ExitCode::from(2)
        }
    }
}
