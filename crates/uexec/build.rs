//! Links the front (the `uexec` executable) as a static PIE on glibc Linux.
//!
//! Why: the front is started for every `uexec run`, and a dynamically linked executable
//! pays the loader before `main` (mapping libc and libgcc_s, resolving every symbol: an
//! empty Rust program runs in 0.73x of the time when static, by `farm-bench` here). A
//! static PIE has no loader and keeps address-space randomisation. The front must not use
//! NSS or iconv (user and host lookups): a static glibc loads those as shared libraries at
//! run time (`tests/it/front.rs` checks its symbols). The engine stays dynamic (it looks users up through NSS,
//! which a static glibc cannot load safely); the musl build (`deploy/build-static.sh`) is
//! static as a whole already.
//!
//! How: `-C target-feature=+crt-static` would do it, but it can only be given to a whole
//! build, build scripts and proc macros included. So the front gets link arguments of its
//! own: `-static-pie`, GNU ld (lld's static PIE calls the unresolved weak `__gmon_start__`
//! and crashes at start), and a directory of linker scripts that point the libraries rustc
//! names for a dynamic link (`-lgcc_s -lm -lc` after `-Bdynamic`) at their static archives.
//! Where that cannot be made to work (no static C library installed, no GNU ld, another
//! target), a probe says so, the build warns, and the front is linked dynamically: it
//! behaves the same, it only starts a little slower. `UEXEC_FRONT_LINK` (`static` or
//! `dynamic`) tells the tests which it is.

use std::path::{Path, PathBuf};
use std::process::Command;

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    let link = match static_front() {
        Ok(args) => {
            for arg in args {
                println!("cargo:rustc-link-arg-bin=uexec={arg}");
            }
            "static"
        }
        Err(Skip::Needless) => "static",
        Err(Skip::Unsupported(why)) => {
            println!("cargo:warning=the uexec front is linked dynamically: {why}");
            "dynamic"
        }
    };
    println!("cargo:rustc-env=UEXEC_FRONT_LINK={link}");
}

enum Skip {
    /// The target links statically already (musl, or `+crt-static` for the whole build).
    Needless,
    Unsupported(String),
}

/// The front's extra link arguments.
fn static_front() -> Result<Vec<String>, Skip> {
    let var = |name: &str| std::env::var(name).unwrap_or_default();
    // musl links statically by default (its build scripts are not told `crt-static`).
    if var("CARGO_CFG_TARGET_ENV") == "musl"
        || var("CARGO_CFG_TARGET_FEATURE")
            .split(',')
            .any(|f| f == "crt-static")
    {
        return Err(Skip::Needless);
    }
    if var("CARGO_CFG_TARGET_OS") != "linux" || var("CARGO_CFG_TARGET_ENV") != "gnu" {
        return Err(Skip::Unsupported("not a glibc Linux target".into()));
    }
    if var("TARGET") != var("HOST") {
        return Err(Skip::Unsupported(
            "cross compiling (the probe runs what it links)".into(),
        ));
    }
    let cc = std::env::var("RUSTC_LINKER").unwrap_or_else(|_| "cc".into());
    let archive = |name: &str| -> Result<PathBuf, Skip> {
        let out = Command::new(&cc)
            .arg(format!("-print-file-name={name}"))
            .output()
            .map_err(|e| Skip::Unsupported(format!("cannot run {cc}: {e}")))?;
        let path = PathBuf::from(String::from_utf8_lossy(&out.stdout).trim());
        // Not found: the compiler prints the bare name back.
        if path.is_absolute() && path.exists() {
            Ok(path)
        } else {
            Err(Skip::Unsupported(format!(
                "{cc} has no {name} (Debian: libc6-dev)"
            )))
        }
    };
    let (libc, libm) = (archive("libc.a")?, archive("libm.a")?);
    let (libgcc, libgcc_eh) = (archive("libgcc.a")?, archive("libgcc_eh.a")?);

    let dir = PathBuf::from(var("OUT_DIR")).join("static-front");
    let write = |name: &str, script: String| {
        std::fs::write(dir.join(name), script)
            .map_err(|e| Skip::Unsupported(format!("cannot write {}: {e}", dir.display())))
    };
    std::fs::create_dir_all(&dir)
        .map_err(|e| Skip::Unsupported(format!("cannot create {}: {e}", dir.display())))?;
    // A link of `-lc` in dynamic mode finds `libc.so` first in these directories: a
    // linker script naming the archives (the group: libc and libgcc need each other).
    write(
        "libc.so",
        format!(
            "GROUP({} {} {})\n",
            libc.display(),
            libgcc.display(),
            libgcc_eh.display()
        ),
    )?;
    write("libm.so", format!("INPUT({})\n", libm.display()))?;
    // The unwinder: libgcc_s's static twin.
    write("libgcc_s.so", format!("INPUT({})\n", libgcc_eh.display()))?;
    let args = vec![
        "-static-pie".to_owned(),
        "-fuse-ld=bfd".to_owned(),
        format!("-L{}", dir.display()),
    ];
    probe(&cc, &dir, &args)?;
    Ok(args)
}

/// Links and runs a small C program the way the front is linked (the libraries named as
/// rustc names them), so a machine where it fails keeps a working, dynamic front.
fn probe(cc: &str, dir: &Path, args: &[String]) -> Result<(), Skip> {
    let source = dir.join("probe.c");
    let exe = dir.join("probe");
    std::fs::write(
        &source,
        "#include <stdio.h>\nint main(void) { return puts(\"static\") < 0; }\n",
    )
    .map_err(|e| Skip::Unsupported(format!("cannot write the probe: {e}")))?;
    let link = Command::new(cc)
        .args(["-fPIE", "-o"])
        .arg(&exe)
        .arg(&source)
        .args(["-nodefaultlibs", "-Wl,-Bdynamic", "-lgcc_s", "-lm", "-lc"])
        .args(args)
        .output()
        .map_err(|e| Skip::Unsupported(format!("cannot run {cc}: {e}")))?;
    if !link.status.success() {
        return Err(Skip::Unsupported(format!(
            "a static PIE does not link here: {}",
            String::from_utf8_lossy(&link.stderr).trim()
        )));
    }
    let run = Command::new(&exe)
        .output()
        .map_err(|e| Skip::Unsupported(format!("a static PIE does not start here: {e}")))?;
    if !run.status.success() || run.stdout != b"static\n" {
        return Err(Skip::Unsupported(format!(
            "a static PIE does not run here ({})",
            run.status
        )));
    }
    Ok(())
}
