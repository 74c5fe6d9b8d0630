//! Resource limits of a session's cgroup, beside the sandbox's ceiling and for the same
//! reason: a person sets them on the server (`--memory-max`, `--pids-max`, `--cpu-max`), and
//! a call's `limits` may only lower them, never raise them, since the model is what they are
//! for.
//!
//! 1. A server limit is a ceiling; absent, there is none, and a call may set any.
//! 2. A call may ask `memory_max` and `pids_max` (CPU is the server's alone); each at most
//!    the server's. A higher one is a [`Widening`] naming the field, what was asked and
//!    the server's limit: nothing runs.
//! 3. What a session runs with is the call's where it asked, the server's where it did not.
//!
//! Whether the machine can apply them (the cgroup controllers) is the backend's to say.

use super::Widening;

/// Limits of one session's processes together (its cgroup): absent ones are none. A limit
/// of [`NO_LIMIT`] is none too, but asked for: its controller is enabled all the same (a
/// server started with `--memory-max max` lets calls set their own).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Limits {
    /// Most memory in bytes (`memory.max`); above it the OOM killer kills.
    pub memory_max: Option<u64>,
    /// Most processes and threads at once (`pids.max`); a fork beyond it fails.
    pub pids_max: Option<u64>,
    /// Most CPU time per period (`cpu.max`).
    pub cpu_max: Option<CpuMax>,
}

/// A CPU limit: `quota_usec` of CPU time every `period_usec` (1.5 CPUs: 150000 per 100000).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CpuMax {
    pub quota_usec: u64,
    pub period_usec: u64,
}

/// A limit asked as `max`: no limit, as the kernel writes it.
pub const NO_LIMIT: u64 = u64::MAX;

/// The period a CPU limit is counted over, as the kernel's default.
pub const CPU_PERIOD_USEC: u64 = 100_000;

/// The fewest bytes `memory_max` may be: less, and a shell cannot even start.
pub const MIN_MEMORY_MAX_BYTES: u64 = 1024 * 1024;

/// The fewest processes `pids_max` may be: a shell and one command.
pub const MIN_PIDS_MAX: u64 = 2;

impl Limits {
    /// No limit at all.
    pub fn is_empty(&self) -> bool {
        self.memory_max.is_none() && self.pids_max.is_none() && self.cpu_max.is_none()
    }

    /// The lower of each limit: a daemon's own ceiling under a client's.
    pub fn lowest(self, other: Self) -> Self {
        fn low<T: Ord>(a: Option<T>, b: Option<T>) -> Option<T> {
            match (a, b) {
                (Some(a), Some(b)) => Some(a.min(b)),
                (a, b) => a.or(b),
            }
        }
        let cpu = match (self.cpu_max, other.cpu_max) {
            (Some(a), Some(b)) if b.share() < a.share() => Some(b),
            (a, b) => a.or(b),
        };
        Self {
            memory_max: low(self.memory_max, other.memory_max),
            pids_max: low(self.pids_max, other.pids_max),
            cpu_max: cpu,
        }
    }
}

impl CpuMax {
    /// The CPUs this allows (1.5 for 150000 per 100000).
    pub fn share(&self) -> f64 {
        self.quota_usec as f64 / self.period_usec as f64
    }

    /// `cpu.max` as the kernel reads it: `QUOTA PERIOD` (`max PERIOD`: none).
    pub fn as_cgroup(&self) -> String {
        format!("{} {}", show_count(self.quota_usec), self.period_usec)
    }

    /// No limit, asked for.
    pub fn none() -> Self {
        Self {
            quota_usec: NO_LIMIT,
            period_usec: CPU_PERIOD_USEC,
        }
    }
}

/// A size in bytes as a person writes it: digits, optionally followed by `K`, `M`, `G` or
/// `T` (powers of 1024; `KiB`, `MB` and lower case mean the same). `max` is [`NO_LIMIT`].
pub fn parse_bytes(s: &str) -> Result<u64, String> {
    let t = s.trim();
    if t.eq_ignore_ascii_case("max") {
        return Ok(NO_LIMIT);
    }
    let digits = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (number, unit) = t.split_at(digits);
    let shift = match unit.to_ascii_uppercase().as_str() {
        "" | "B" => 0,
        "K" | "KB" | "KIB" => 10,
        "M" | "MB" | "MIB" => 20,
        "G" | "GB" | "GIB" => 30,
        "T" | "TB" | "TIB" => 40,
        _ => {
            return Err(format!(
                "{s:?} is not a size: give bytes, or a number with K, M, G or T (e.g. 512M, 2G)"
            ))
        }
    };
    let n: u64 = number.parse().map_err(|_| {
        format!("{s:?} is not a size: give bytes, or a number with K, M, G or T (e.g. 512M, 2G)")
    })?;
    let bytes = n
        .checked_mul(1u64 << shift)
        .filter(|b| *b != NO_LIMIT)
        .ok_or_else(|| format!("{s:?} is too large"))?;
    check_bytes(bytes)
}

/// A size given as a number of bytes: at least [`MIN_MEMORY_MAX_BYTES`].
pub fn check_bytes(bytes: u64) -> Result<u64, String> {
    if bytes < MIN_MEMORY_MAX_BYTES {
        return Err(format!(
            "{bytes} bytes is below the least a session can run in ({})",
            show_bytes(MIN_MEMORY_MAX_BYTES)
        ));
    }
    Ok(bytes)
}

/// A process count: at least [`MIN_PIDS_MAX`]; `max` is [`NO_LIMIT`].
pub fn parse_pids(s: &str) -> Result<u64, String> {
    if s.trim().eq_ignore_ascii_case("max") {
        return Ok(NO_LIMIT);
    }
    let n: u64 = s
        .trim()
        .parse()
        .map_err(|_| format!("{s:?} is not a number of processes"))?;
    check_pids(n)
}

/// A process count given as a number: at least [`MIN_PIDS_MAX`].
pub fn check_pids(n: u64) -> Result<u64, String> {
    if n < MIN_PIDS_MAX {
        return Err(format!(
            "{n} is below the least a session can run with ({MIN_PIDS_MAX}: a shell and its command)"
        ));
    }
    Ok(n)
}

/// A CPU limit as a number of CPUs (`0.5`, `2`); `max` is none, asked for.
pub fn parse_cpus(s: &str) -> Result<CpuMax, String> {
    let t = s.trim();
    if t.eq_ignore_ascii_case("max") {
        return Ok(CpuMax::none());
    }
    let cpus: f64 = t
        .parse()
        .ok()
        .filter(|c: &f64| c.is_finite())
        .ok_or_else(|| format!("{s:?} is not a number of CPUs (e.g. 0.5, 2)"))?;
    // The kernel's least quota is 1 ms per period.
    let quota = (cpus * CPU_PERIOD_USEC as f64).round();
    if quota < 1000.0 {
        return Err(format!("{s:?} is below the least CPU share (0.01 CPUs)"));
    }
    if quota > 1e15 {
        return Err(format!("{s:?} is too large"));
    }
    Ok(CpuMax {
        quota_usec: quota as u64,
        period_usec: CPU_PERIOD_USEC,
    })
}

/// A count as the kernel writes it: [`NO_LIMIT`] is `max`.
pub fn show_count(n: u64) -> String {
    if n == NO_LIMIT {
        "max".to_owned()
    } else {
        n.to_string()
    }
}

/// Bytes for people: `512 MiB`, `1.5 GiB`, `4096 bytes`; [`NO_LIMIT`] is `max`.
pub fn show_bytes(bytes: u64) -> String {
    if bytes == NO_LIMIT {
        return "max".to_owned();
    }
    const UNITS: [(&str, u32); 4] = [("TiB", 40), ("GiB", 30), ("MiB", 20), ("KiB", 10)];
    for (unit, shift) in UNITS {
        let size = 1u64 << shift;
        if bytes >= size {
            let value = bytes as f64 / size as f64;
            return if bytes.is_multiple_of(size) {
                format!("{} {unit}", bytes / size)
            } else {
                format!("{value:.1} {unit}")
            };
        }
    }
    format!("{bytes} bytes")
}

/// The limits a call runs with: each it asked, if not above the server's; the server's
/// where it asked none. CPU is the server's.
pub fn narrow_limits(ceiling: &Limits, asked: &Limits) -> Result<Limits, Widening> {
    let memory_max = lower(
        "limits.memory_max",
        ceiling.memory_max,
        asked.memory_max,
        show_bytes,
    )?;
    let pids_max = lower(
        "limits.pids_max",
        ceiling.pids_max,
        asked.pids_max,
        show_count,
    )?;
    Ok(Limits {
        memory_max,
        pids_max,
        cpu_max: ceiling.cpu_max,
    })
}

fn lower(
    field: &'static str,
    ceiling: Option<u64>,
    asked: Option<u64>,
    show: fn(u64) -> String,
) -> Result<Option<u64>, Widening> {
    match (ceiling, asked) {
        (Some(max), Some(a)) if a > max => Err(Widening::Limit {
            field,
            asked: show(a),
            ceiling: show(max),
        }),
        (_, Some(a)) => Ok(Some(a)),
        (max, None) => Ok(max),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_take_binary_suffixes_and_max() {
        assert_eq!(parse_bytes("512M"), Ok(512 << 20));
        assert_eq!(parse_bytes("2G"), Ok(2 << 30));
        assert_eq!(parse_bytes("2gib"), Ok(2 << 30));
        assert_eq!(parse_bytes("1048576"), Ok(1 << 20));
        assert_eq!(parse_bytes("1T"), Ok(1 << 40));
        assert_eq!(parse_bytes("max"), Ok(NO_LIMIT));
        assert_eq!(show_bytes(NO_LIMIT), "max");
        for bad in ["", "M", "1.5G", "12X", "-1G", "1 G G", "99999999999T"] {
            assert!(parse_bytes(bad).is_err(), "{bad}");
        }
        let e = parse_bytes("64K").expect_err("too small");
        assert!(e.contains("1 MiB"), "{e}");
    }

    #[test]
    fn pids_and_cpus_are_read_with_their_floors() {
        assert_eq!(parse_pids("100"), Ok(100));
        assert_eq!(parse_pids("max"), Ok(NO_LIMIT));
        assert!(parse_pids("1").is_err());
        assert!(parse_pids("ten").is_err());
        let half = parse_cpus("0.5").expect("0.5");
        assert_eq!(half.as_cgroup(), "50000 100000");
        assert_eq!(parse_cpus("2").map(|c| c.quota_usec), Ok(200_000));
        assert_eq!(
            parse_cpus("max").map(|c| c.as_cgroup()).as_deref(),
            Ok("max 100000")
        );
        for bad in ["0.001", "none", "NaN", "inf", "-1"] {
            assert!(parse_cpus(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn bytes_read_as_people_write_them() {
        assert_eq!(show_bytes(512 << 20), "512 MiB");
        assert_eq!(show_bytes(3 << 29), "1.5 GiB");
        assert_eq!(show_bytes(1000), "1000 bytes");
    }

    #[test]
    fn a_call_may_lower_a_limit_and_never_raise_it() {
        let ceiling = Limits {
            memory_max: Some(1 << 30),
            pids_max: Some(100),
            cpu_max: parse_cpus("1").ok(),
        };
        // Nothing asked: the server's.
        assert_eq!(narrow_limits(&ceiling, &Limits::default()), Ok(ceiling));
        // Lower: taken; the CPU stays the server's.
        let asked = Limits {
            memory_max: Some(256 << 20),
            pids_max: Some(10),
            cpu_max: None,
        };
        let got = narrow_limits(&ceiling, &asked).expect("lower");
        assert_eq!(
            (got.memory_max, got.pids_max, got.cpu_max),
            (Some(256 << 20), Some(10), ceiling.cpu_max)
        );
        // Higher: refused, naming the field, what was asked and the limit.
        let e = narrow_limits(
            &ceiling,
            &Limits {
                memory_max: Some(2 << 30),
                ..Limits::default()
            },
        )
        .expect_err("higher")
        .to_string();
        assert!(
            e.starts_with(
                "invalid arguments: limits.memory_max: 2 GiB is above this server's limit (1 GiB)"
            ),
            "{e}"
        );
        let e = narrow_limits(
            &ceiling,
            &Limits {
                pids_max: Some(101),
                ..Limits::default()
            },
        )
        .expect_err("higher")
        .to_string();
        assert!(
            e.starts_with("invalid arguments: limits.pids_max: 101"),
            "{e}"
        );
        // No ceiling, or `max`: any limit is a lowering.
        assert_eq!(narrow_limits(&Limits::default(), &asked), Ok(asked));
        let open = Limits {
            memory_max: Some(NO_LIMIT),
            pids_max: Some(NO_LIMIT),
            cpu_max: None,
        };
        assert_eq!(narrow_limits(&open, &asked), Ok(asked));
        assert_eq!(narrow_limits(&open, &Limits::default()), Ok(open));
    }

    #[test]
    fn the_lowest_of_two_ceilings_is_each_lower_limit() {
        let a = Limits {
            memory_max: Some(1 << 30),
            pids_max: None,
            cpu_max: parse_cpus("2").ok(),
        };
        let b = Limits {
            memory_max: Some(2 << 30),
            pids_max: Some(50),
            cpu_max: parse_cpus("0.5").ok(),
        };
        let low = a.lowest(b);
        assert_eq!(low.memory_max, Some(1 << 30));
        assert_eq!(low.pids_max, Some(50));
        assert_eq!(low.cpu_max, b.cpu_max);
        assert!(Limits::default().is_empty() && !low.is_empty());
    }
}
