//! Builds the export table of the verbs-compatible library from rdma-core v55's own symbol maps.
//!
//! 1. Reads `libibverbs.map.in`, `libmlx5.map` and `libefa.map` from the rdma-core source that
//!    `ibverbs-sys` vendors, so every symbol and version node the real libraries export exists
//!    here too: a program linked against rdma-core (Debian's perftest needs `IBVERBS_1.1`,
//!    `IBVERBS_PRIVATE_34`, `MLX5_1.21`, `EFA_1.1`, …) loads, even with `-z now`.
//! 2. Scans `src/` for implementations (`extern "C" fn gdav_<symbol>`, or `names!(gdav_<symbol>`). Every other symbol gets
//!    a stub that sets `errno = EOPNOTSUPP` and returns `NULL`, `EOPNOTSUPP` or nothing, by the
//!    return type its prototype in the vendored headers declares.
//! 3. Writes `exports.rs` (the stubs and one `.symver` line per symbol and node) and the version
//!    script that defines the nodes, and lays out `target/<profile>/verbs-sim/` with
//!    `libibverbs.so.1`, `libmlx5.so.1` and `libefa.so.1` as links to the library (one file: the
//!    dynamic loader maps it once, so all three names share one state).
//!
//! Symbols listed in both `IBVERBS_1.0` and `IBVERBS_1.1` are the pre-1.1 ABI under their 1.0
//! version (other struct layouts): those versions are stubs, the 1.1 ones the implementation.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::{env, fs};

/// rdma-core's private ABI version (`IBVERBS_PABI_VERSION` in its CMakeLists.txt; 34 in v55).
const PABI: &str = "34";

/// One version node of a symbol map, in file order.
struct Node {
    name: String,
    parent: Option<String>,
    symbols: Vec<String>,
}

fn parse_map(text: &str) -> Vec<Node> {
    // Strip comments, then read `NAME { global: a; b; local: *; } PARENT;` blocks.
    let mut clean = String::new();
    let mut rest = text;
    while let Some(i) = rest.find("/*") {
        clean.push_str(&rest[..i]);
        rest = rest[i..].find("*/").map_or("", |j| &rest[i + j + 2..]);
    }
    clean.push_str(rest);
    let clean = clean.replace("@IBVERBS_PABI_VERSION@", PABI);
    let mut nodes = Vec::new();
    let mut it = clean.as_str();
    while let Some(open) = it.find('{') {
        let name = it[..open].trim().to_owned();
        let close = it[open..].find('}').expect("unterminated node") + open;
        let body = &it[open + 1..close];
        let after = &it[close + 1..];
        let semi = after.find(';').expect("node without ';'");
        let parent = Some(after[..semi].trim().to_owned()).filter(|p| !p.is_empty());
        let mut symbols = Vec::new();
        for item in body.split(';') {
            let item = item.trim();
            let item = item
                .strip_prefix("global:")
                .or_else(|| item.strip_prefix("local:"))
                .unwrap_or(item)
                .trim();
            if !item.is_empty() && item != "*" {
                symbols.push(item.to_owned());
            }
        }
        nodes.push(Node {
            name,
            parent,
            symbols,
        });
        it = &after[semi + 1..];
    }
    nodes
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Ret {
    Ptr,
    Int,
    Void,
    /// A variable, not a function.
    Bool,
}

/// The return kind of `sym` from its prototype in `headers` (default `Int`).
fn classify(sym: &str, headers: &[String]) -> Ret {
    if sym == "verbs_allow_disassociate_destroy" {
        return Ret::Bool;
    }
    for h in headers {
        let mut from = 0;
        while let Some(pos) = h[from..].find(sym) {
            let at = from + pos;
            from = at + sym.len();
            let before_ok = at == 0
                || !h.as_bytes()[at - 1].is_ascii_alphanumeric() && h.as_bytes()[at - 1] != b'_';
            let after = h[from..].trim_start();
            if !before_ok || !after.starts_with('(') {
                continue;
            }
            // The declaration starts after the previous `;`, `}`, `{`, `)` at file level or
            // preprocessor line: take the text back to one of those.
            let start = h[..at]
                .rfind([';', '}', '{', '#', '/'])
                .map_or(0, |i| i + 1);
            let decl = h[start..at].trim();
            if decl.is_empty()
                || decl.contains('(')
                || decl.contains('=')
                || decl.starts_with("define")
                || decl.contains("return")
            {
                continue;
            }
            if decl.ends_with('*') {
                return Ret::Ptr;
            }
            let words: Vec<&str> = decl.split_whitespace().collect();
            if words.last() == Some(&"void") {
                return Ret::Void;
            }
            return Ret::Int;
        }
    }
    Ret::Int
}

fn implemented(dir: &Path, out: &mut BTreeSet<String>) {
    let Ok(entries) = fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        let p = e.path();
        if p.is_dir() {
            implemented(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            let text = fs::read_to_string(&p).unwrap_or_default();
            // `extern "C" fn gdav_x`, and `names!(gdav_x, …)` for the string tables.
            for marker in ["extern \"C\" fn gdav_", "names!(gdav_"] {
                let mut rest = text.as_str();
                while let Some(i) = rest.find(marker) {
                    rest = &rest[i + marker.len()..];
                    let name: String = rest
                        .chars()
                        .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                        .collect();
                    out.insert(name);
                }
            }
        }
    }
}

/// The bnxt_re direct-verbs entry points this library exports for its Thor2 device.
const BNXT_RE_DV_MAP: &str = "BNXT_RE_DV_1.0 {
    global:
        bnxt_re_dv_alloc_db_region;
        bnxt_re_dv_free_db_region;
        bnxt_re_dv_get_default_db_region;
        bnxt_re_dv_umem_reg;
        bnxt_re_dv_umem_dereg;
        bnxt_re_dv_create_cq;
        bnxt_re_dv_destroy_cq;
        bnxt_re_dv_create_qp;
        bnxt_re_dv_destroy_qp;
        bnxt_re_dv_modify_qp;
        bnxt_re_dv_init_obj;
};
";

fn main() {
    let include =
        env::var("DEP_IBVERBS_INCLUDE").expect("ibverbs-sys did not report its include dir");
    let vendor = PathBuf::from(include)
        .parent()
        .and_then(Path::parent)
        .map(PathBuf::from)
        .expect("unexpected DEP_IBVERBS_INCLUDE layout");
    let here = PathBuf::from(env::var("CARGO_MANIFEST_DIR").unwrap());
    let out = PathBuf::from(env::var("OUT_DIR").unwrap());
    println!("cargo:rerun-if-changed=src");
    println!("cargo:rerun-if-changed=csrc");
    println!("cargo:rerun-if-changed=build.rs");

    let read = |rel: &str| {
        fs::read_to_string(vendor.join(rel))
            .unwrap_or_else(|e| panic!("{}: {e} (ibverbs-sys 0.3.2+55.0 vendors it)", rel))
    };
    let maps = [
        ("libibverbs", read("libibverbs/libibverbs.map.in")),
        ("libmlx5", read("providers/mlx5/libmlx5.map")),
        ("libefa", read("providers/efa/libefa.map")),
        // Broadcom's bnxt_re direct verbs are not in upstream rdma-core: the calls of the
        // published bnxt_re_dv.h (gda_bnxt::host::dv), under a version node of this library.
        ("libbnxt_re", BNXT_RE_DV_MAP.to_owned()),
    ];
    let headers: Vec<String> = [
        "libibverbs/verbs.h",
        "providers/mlx5/mlx5dv.h",
        "providers/efa/efadv.h",
        "libibverbs/driver.h",
        "libibverbs/cmd_ioctl.h",
        "libibverbs/cmd_write.h",
        "libibverbs/kern-abi.h",
        "libibverbs/sa.h",
        "libibverbs/marshall.h",
        "libibverbs/tm_types.h",
    ]
    .iter()
    .filter_map(|h| fs::read_to_string(vendor.join(h)).ok())
    .collect();

    let mut have = BTreeSet::new();
    implemented(&here.join("src"), &mut have);

    let mut script = String::new();
    // symbol -> nodes (file order: oldest first)
    let mut versions: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for (_lib, text) in &maps {
        for n in parse_map(text) {
            match &n.parent {
                Some(p) => writeln!(script, "{} {{ }} {};", n.name, p).unwrap(),
                None => writeln!(script, "{} {{ }};", n.name).unwrap(),
            }
            for s in n.symbols {
                versions.entry(s).or_default().push(n.name.clone());
            }
        }
    }
    fs::write(out.join("verbs.map"), &script).unwrap();

    let mut rs = String::from(
        "// @generated by build.rs from rdma-core v55's symbol maps: do not edit.\n\
         // Stubs for the symbols this library does not implement, and the version of every\n\
         // exported symbol.\n\n",
    );
    // Each exported name is an assembly trampoline that jumps to its Rust function
    // (`gdav_<name>`, implemented or stub): `.symver` needs the symbol defined in the same
    // object as the directive, and rustc places functions in codegen units of its choosing.
    let mut asm = Vec::new();
    let mut names = Vec::new();
    let trampoline = |asm: &mut Vec<String>, tramp: &str, target: &str, versions: &[String]| {
        asm.push(format!(".globl {tramp}"));
        asm.push(format!(".type {tramp}, @function"));
        asm.push(format!("{tramp}:"));
        asm.push(format!("jmp {target}@PLT"));
        asm.push(format!(".size {tramp}, . - {tramp}"));
        for v in versions {
            asm.push(format!(".symver {tramp}, {v}"));
        }
    };
    asm.push(".pushsection .text".into());
    for (sym, nodes) in &versions {
        let newest = nodes.last().unwrap();
        let is_impl = have.contains(sym);
        let ret = if is_impl {
            None
        } else {
            Some(classify(sym, &headers))
        };
        match ret {
            None => {}
            Some(Ret::Bool) => {
                // A variable: defined in assembly itself.
                asm.push(".pushsection .data".into());
                asm.push(format!(".globl gdav_t_{sym}"));
                asm.push(format!(".type gdav_t_{sym}, @object"));
                asm.push(format!("gdav_t_{sym}:"));
                asm.push(".byte 0".into());
                asm.push(format!(".size gdav_t_{sym}, 1"));
                asm.push(format!(".symver gdav_t_{sym}, {sym}@@{newest}"));
                asm.push(".popsection".into());
                names.push(format!("({sym:?}, {newest:?}, false)"));
                continue;
            }
            Some(Ret::Ptr) => writeln!(
                rs,
                "#[unsafe(no_mangle)]\n#[allow(missing_docs)]\npub extern \"C\" fn gdav_{sym}() -> *mut core::ffi::c_void {{ crate::abi::unsupported(\"{sym}\"); core::ptr::null_mut() }}"
            )
            .unwrap(),
            Some(Ret::Int) => writeln!(
                rs,
                "#[unsafe(no_mangle)]\n#[allow(missing_docs)]\npub extern \"C\" fn gdav_{sym}() -> core::ffi::c_int {{ crate::abi::unsupported(\"{sym}\") }}"
            )
            .unwrap(),
            Some(Ret::Void) => writeln!(
                rs,
                "#[unsafe(no_mangle)]\n#[allow(missing_docs)]\npub extern \"C\" fn gdav_{sym}() {{ crate::abi::unsupported(\"{sym}\"); }}"
            )
            .unwrap(),
        }
        names.push(format!("({sym:?}, {newest:?}, {is_impl})"));
        let mut vers = vec![format!("{sym}@@{newest}")];
        for old in &nodes[..nodes.len() - 1] {
            if old == "IBVERBS_1.0" {
                // The pre-1.1 ABI (other struct layouts): a stub of its own.
                writeln!(
                    rs,
                    "#[unsafe(no_mangle)]\n#[allow(missing_docs)]\npub extern \"C\" fn gdav_compat10_{sym}() -> *mut core::ffi::c_void {{ crate::abi::unsupported(\"{sym}@IBVERBS_1.0\"); core::ptr::null_mut() }}"
                )
                .unwrap();
                trampoline(
                    &mut asm,
                    &format!("gdav_t10_{sym}"),
                    &format!("gdav_compat10_{sym}"),
                    &[format!("{sym}@{old}")],
                );
            } else {
                vers.push(format!("{sym}@{old}"));
            }
        }
        trampoline(
            &mut asm,
            &format!("gdav_t_{sym}"),
            &format!("gdav_{sym}"),
            &vers,
        );
    }
    asm.push(".popsection".into());
    writeln!(
        rs,
        "\n/// Every exported symbol: (name, default version, implemented here).\npub const EXPORTS: &[(&str, &str, bool)] = &[{}];",
        names.join(", ")
    )
    .unwrap();
    // The `.symver` lines only link into a shared object with the version script; a test
    // executable has none.
    writeln!(rs, "\n#[cfg(not(test))]\ncore::arch::global_asm!(").unwrap();
    for s in &asm {
        writeln!(rs, "    {s:?},").unwrap();
    }
    writeln!(rs, ");").unwrap();
    fs::write(out.join("exports.rs"), rs).unwrap();

    println!(
        "cargo:rustc-cdylib-link-arg=-Wl,--version-script={}",
        out.join("verbs.map").display()
    );
    println!("cargo:rustc-cdylib-link-arg=-Wl,-soname,libibverbs.so.1");

    // The C layout of rdma-core's structs this library fills, for the layout unit test.
    cc::Build::new()
        .file(here.join("csrc/layout.c"))
        .warnings(false)
        .compile("gdav_layout");

    // target/<profile>/verbs-sim/: OUT_DIR is target/<profile>/build/<pkg>-<hash>/out.
    if let Some(profile_dir) = out.ancestors().nth(3) {
        let dir = profile_dir.join("verbs-sim");
        let _ = fs::create_dir_all(&dir);
        for name in [
            "libibverbs.so.1",
            "libibverbs.so",
            "libmlx5.so.1",
            "libmlx5.so",
            "libefa.so.1",
            "libbnxt_re.so",
        ] {
            let link = dir.join(name);
            let _ = fs::remove_file(&link);
            #[cfg(unix)]
            let _ = std::os::unix::fs::symlink("../deps/libgda_verbs.so", &link);
        }
    }
}
