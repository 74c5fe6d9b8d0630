//! `uexec`, the front: a plain `uexec run` is made without the engine, and it looks exactly
//! as the engine's would; everything else, bad input included, is the engine's.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Output;

use crate::place::DaemonPlace as Place;

const ENGINE: &str = env!("CARGO_BIN_EXE_uexec-engine");

/// A copy of the front and the engine side by side in a directory of their own.
fn installed(place: &Place) -> (PathBuf, PathBuf) {
    let bin = place.cwd.join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    let (front, engine) = (bin.join("uexec"), bin.join("uexec-engine"));
    std::fs::copy(crate::helpers::UEXEC, &front).unwrap();
    std::fs::copy(ENGINE, &engine).unwrap();
    (front, engine)
}

fn run(place: &Place, exe: &Path, args: &[&str]) -> Output {
    place.command_of(exe, args).output().unwrap()
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn chmod(path: &Path, mode: u32) {
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
}

#[test]
fn a_plain_run_is_made_without_the_engine_and_the_rest_is_handed_to_it() {
    let place = Place::new("front");
    let (front, engine) = installed(&place);
    // No daemon yet: the front hands over, and the engine starts one.
    let first = run(&place, &front, &["run", "--", "true"]);
    assert_eq!(first.status.code(), Some(0), "{}", stderr(&first));

    // An engine that can no longer be exec'd (chmod leaves its identity, and so the
    // daemon's welcome, as it was): a plain run still works, so the front made it.
    chmod(&engine, 0o644);
    let made = run(
        &place,
        &front,
        &["run", "--", "sh", "-c", "echo made here; exit 4"],
    );
    assert_eq!(made.status.code(), Some(4), "{}", stderr(&made));
    assert_eq!(stdout(&made), "made here\n");

    // What the front does not make is the engine's: another verb, and bad input, which the
    // front never judges. Without an engine they fail, saying why.
    for args in [
        &["ls"][..],
        &["run", "--yield", "10", "--", "true"],
        &["run", "--no-such-flag", "--", "true"],
        &["run", "--timeout", "1", "--", "true"],
        &["run", "--until-idle", "0", "--", "true"],
        &["--version"],
    ] {
        let out = run(&place, &front, args);
        assert_eq!(out.status.code(), Some(125), "{args:?}: {}", stderr(&out));
        let err = stderr(&out);
        assert!(
            err.contains(&format!("cannot run {}", engine.display()))
                && err.contains("installed beside it"),
            "{args:?}: {err}"
        );
        assert!(stdout(&out).is_empty(), "{args:?}");
    }
    chmod(&engine, 0o755);
    let stopped = run(&place, &front, &["daemon", "--stop"]);
    assert!(stopped.status.success(), "{}", stderr(&stopped));
}

#[test]
fn the_front_prints_and_exits_as_the_engine_does() {
    let place = Place::new("front");
    let cases: &[&[&str]] = &[
        &["run", "--", "sh", "-c", "echo out; exit 3"],
        &["run", "echo", "--json", "a b", "it's"],
        &[
            "run",
            "--env",
            "A=1",
            "--env=B=2",
            "--",
            "sh",
            "-c",
            "echo $A$B",
        ],
        &["run", "--cwd", "/", "--no-login", "pwd"],
        &["run", "--tty", "--", "sh", "-c", "test -t 1 && echo a tty"],
        // Its output before the timeout: a second for `echo`, however loaded the machine.
        &[
            "run",
            "--no-login",
            "--timeout",
            "1000",
            "--",
            "echo before; exec sleep 30",
        ],
        &[
            "run",
            "--yield",
            "300",
            "--",
            "echo first; sleep 2; echo second",
        ],
        &[
            "run",
            "--until-pattern",
            "ready",
            "--yield=5000",
            "--",
            "echo ready; sleep 2",
        ],
        &["run", "--cwd", "/no/such/dir", "--", "true"],
        &["run", "--json", "--", "printf", "%s", "x"],
    ];
    for args in cases {
        // All of them made by the front itself.
        let argv: Vec<std::ffi::OsString> = std::iter::once("uexec")
            .chain(args.iter().copied())
            .map(Into::into)
            .collect();
        assert!(uexec_cli::cli::plain_run(&argv).is_some(), "{args:?}");
        let front = run(&place, Path::new(crate::helpers::UEXEC), args);
        let engine = run(&place, Path::new(ENGINE), args);
        assert_eq!(
            front.status.code(),
            engine.status.code(),
            "{args:?}: {} / {}",
            stderr(&front),
            stderr(&engine)
        );
        if args.contains(&"--json") && !args.starts_with(&["run", "echo"]) {
            // Timings and paths differ from run to run: the rest must not.
            let (f, e) = (json(&front), json(&engine));
            assert_eq!(f["output"], e["output"], "{args:?}");
            assert_eq!(f["exit_code"], e["exit_code"], "{args:?}");
            // Exit notices are of earlier runs that ended meanwhile: whichever call came
            // after their end carries them, the front's or the engine's.
            let without_notices = |v: &serde_json::Value| {
                let mut k = keys(v);
                k.retain(|k| k != "exit_notices");
                k
            };
            assert_eq!(without_notices(&f), without_notices(&e), "{args:?}");
        } else {
            assert_eq!(stdout(&front), stdout(&engine), "{args:?}");
        }
        // Session ids and paths in messages are each run's own.
        assert_eq!(
            digits_as_n(&stderr(&front)),
            digits_as_n(&stderr(&engine)),
            "{args:?}"
        );
    }
}

fn json(o: &Output) -> serde_json::Value {
    serde_json::from_slice(&o.stdout).unwrap_or_else(|e| panic!("{e}: {}", stdout(o)))
}

fn keys(v: &serde_json::Value) -> Vec<String> {
    v.as_object()
        .map(|m| m.keys().cloned().collect())
        .unwrap_or_default()
}

/// `s` with every run of digits as `N`.
fn digits_as_n(s: &str) -> String {
    let mut out = String::new();
    for c in s.chars() {
        if c.is_ascii_digit() {
            if !out.ends_with('N') {
                out.push('N');
            }
        } else {
            out.push(c);
        }
    }
    out
}

#[test]
fn a_daemon_of_another_build_runs_nothing_for_the_front_and_says_why() {
    let place = Place::new("front");
    // The daemon of the build under test...
    let started = place.command(&["run", "--", "true"]).output().unwrap();
    assert!(started.status.success(), "{}", stderr(&started));
    // ...and a client whose engine is another file (a reinstall, a rebuild).
    let (front, _) = installed(&place);
    let marker = place.cwd.join("ran");
    let out = run(
        &place,
        &front,
        &["run", "--", "touch", marker.to_str().unwrap()],
    );
    assert_eq!(out.status.code(), Some(125), "{}", stderr(&out));
    assert!(stderr(&out).contains("another build"), "{}", stderr(&out));
    assert!(!marker.exists(), "a refused hello ran its command");
}

/// Little-endian fields of a 64-bit ELF file.
struct Elf<'a>(&'a [u8]);

impl Elf<'_> {
    fn of(exe: &[u8]) -> Elf<'_> {
        assert_eq!(&exe[..4], b"\x7fELF", "not an ELF file");
        assert_eq!(exe[4], 2, "not a 64-bit ELF file");
        Elf(exe)
    }

    fn u16(&self, at: usize) -> usize {
        usize::from(u16::from_le_bytes([self.0[at], self.0[at + 1]]))
    }

    fn u32(&self, at: usize) -> usize {
        usize::try_from(u32::from_le_bytes(self.0[at..at + 4].try_into().unwrap())).unwrap()
    }

    fn u64(&self, at: usize) -> usize {
        usize::try_from(u64::from_le_bytes(self.0[at..at + 8].try_into().unwrap())).unwrap()
    }

    /// Whether it names a program interpreter (the dynamic loader).
    fn has_interpreter(&self) -> bool {
        const PT_INTERP: usize = 3;
        let (phoff, size, count) = (self.u64(0x20), self.u16(0x36), self.u16(0x38));
        (0..count).any(|i| self.u32(phoff + i * size) == PT_INTERP)
    }

    /// The names of the symbols it defines (from its symbol table).
    fn defined_symbols(&self) -> Vec<String> {
        const SHT_SYMTAB: usize = 2;
        let (shoff, size, count) = (self.u64(0x28), self.u16(0x3a), self.u16(0x3c));
        let section = |i: usize| shoff + i * size;
        let Some(symtab) = (0..count)
            .map(section)
            .find(|&h| self.u32(h + 4) == SHT_SYMTAB)
        else {
            return Vec::new();
        };
        let strtab = self.u64(section(self.u32(symtab + 0x28)) + 0x18);
        let (start, len) = (self.u64(symtab + 0x18), self.u64(symtab + 0x20));
        (start..start + len)
            .step_by(24)
            .filter(|&sym| self.u16(sym + 6) != 0) // st_shndx: 0 is undefined
            .map(|sym| {
                let name = &self.0[strtab + self.u32(sym)..];
                let end = name.iter().position(|&b| b == 0).unwrap_or(name.len());
                String::from_utf8_lossy(&name[..end]).into_owned()
            })
            .collect()
    }
}

/// The front starts without a loader where the build could link it statically
/// (crates/uexec/build.rs: glibc Linux with the static C library), and it says so when it
/// could not; the engine of a glibc build is dynamic (it looks users up through NSS).
#[test]
fn the_front_is_linked_as_its_build_says() {
    let front = std::fs::read(crate::helpers::UEXEC).unwrap();
    let front = Elf::of(&front);
    match env!("UEXEC_FRONT_LINK") {
        "static" => assert!(!front.has_interpreter(), "the front names a loader"),
        "dynamic" => assert!(front.has_interpreter(), "the front was said to be dynamic"),
        other => panic!("UEXEC_FRONT_LINK={other}"),
    }
    // The check itself: a dynamic executable names its loader.
    if cfg!(all(target_env = "gnu", not(target_feature = "crt-static"))) {
        assert!(Elf::of(&std::fs::read(ENGINE).unwrap()).has_interpreter());
    }
}

/// A static glibc still loads the NSS and iconv modules as shared libraries at run time,
/// from the C library installed then: a static front must call none of their functions
/// (user and host lookups, character set conversion), or a glibc upgrade could break it.
#[test]
fn a_static_front_looks_nothing_up_through_nss() {
    if env!("UEXEC_FRONT_LINK") != "static" {
        return;
    }
    let symbols = Elf::of(&std::fs::read(crate::helpers::UEXEC).unwrap()).defined_symbols();
    let has_symbol = |name: &str| symbols.iter().any(|s| s == name);
    // The check itself: a function the front does link.
    assert!(has_symbol("connect"), "no symbol table to check");
    for name in [
        "getpwnam",
        "getpwuid",
        "getpwnam_r",
        "getpwuid_r",
        "getgrnam",
        "getgrgid",
        "getaddrinfo",
        "gethostbyname",
        "getservbyname",
        "iconv_open",
    ] {
        assert!(!has_symbol(name), "the static front links {name}");
    }
}
