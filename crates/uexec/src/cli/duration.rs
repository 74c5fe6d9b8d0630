//! Durations as people write them on a command line: `500ms`, `10s`, `5m`, `1h`; a bare
//! number is in the unit its flag documents (ms for `run`'s and `poll`'s flags, seconds for
//! `wait --timeout` and the faces' `--approval-timeout`). Every duration flag of the verbs
//! reads through here, so `--timeout 5s` means the same on `run` and `wait`.

use std::ops::RangeInclusive;
use std::time::Duration;

/// `text` as a duration; a bare number is `bare_unit`'s (`"s"` or `"ms"`).
pub fn parse(text: &str, bare_unit: &str) -> Result<Duration, String> {
    let text = text.trim();
    let split = text
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(text.len());
    let (number, unit) = text.split_at(split);
    let n: u64 = number
        .parse()
        .map_err(|_| format!("{text:?} is not a duration (e.g. 500ms, 10s, 5m, 1h)"))?;
    let unit = if unit.is_empty() { bare_unit } else { unit };
    let ms = match unit {
        "ms" => Some(n),
        "s" => n.checked_mul(1_000),
        "m" => n.checked_mul(60_000),
        "h" => n.checked_mul(3_600_000),
        other => {
            return Err(format!(
                "{text:?}: unknown unit {other:?} (use ms, s, m or h)"
            ))
        }
    };
    ms.map(Duration::from_millis)
        .ok_or_else(|| format!("{text:?} is too long"))
}

/// A clap value parser: a bare number is seconds.
pub fn seconds(text: &str) -> Result<Duration, String> {
    parse(text, "s")
}

/// `text` in milliseconds (a bare number is `bare_unit`'s), if it is within `range`; else
/// why, with the range in units.
pub fn ms_within(text: &str, bare_unit: &str, range: RangeInclusive<i64>) -> Result<i64, String> {
    let ms = i64::try_from(parse(text, bare_unit)?.as_millis()).unwrap_or(i64::MAX);
    if range.contains(&ms) {
        return Ok(ms);
    }
    Err(format!(
        "{text:?} is out of range: {} to {}",
        show(*range.start()),
        show(*range.end())
    ))
}

/// `ms` in the largest unit that says it whole: `250ms`, `30s`, `5m`, `24h`.
pub fn show(ms: i64) -> String {
    for (unit, size) in [("h", 3_600_000), ("m", 60_000), ("s", 1_000)] {
        if ms != 0 && ms % size == 0 {
            return format!("{}{unit}", ms / size);
        }
    }
    format!("{ms}ms")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn units_and_bare_numbers() {
        assert_eq!(seconds("500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(seconds("10s"), Ok(Duration::from_secs(10)));
        assert_eq!(seconds("5m"), Ok(Duration::from_secs(300)));
        assert_eq!(seconds("1h"), Ok(Duration::from_secs(3600)));
        assert_eq!(seconds("90"), Ok(Duration::from_secs(90)));
        assert_eq!(parse("90", "ms"), Ok(Duration::from_millis(90)));
        assert!(seconds("5 minutes").unwrap_err().contains("unknown unit"));
        assert!(seconds("soon").unwrap_err().contains("not a duration"));
        assert!(seconds("-1s").is_err());
        assert!(seconds("99999999999999999h")
            .unwrap_err()
            .contains("too long"));
    }

    #[test]
    fn ranges_are_said_in_units() {
        assert_eq!(ms_within("2s", "ms", 250..=30_000), Ok(2_000));
        assert_eq!(ms_within("300", "ms", 250..=30_000), Ok(300));
        assert_eq!(
            ms_within("10", "ms", 250..=30_000),
            Err("\"10\" is out of range: 250ms to 30s".to_owned())
        );
        assert!(ms_within("2h", "ms", 100..=86_400_000).is_ok());
        assert!(ms_within("25h", "ms", 100..=86_400_000)
            .unwrap_err()
            .contains("100ms to 24h"));
        assert_eq!(show(1_500), "1500ms");
        assert_eq!(show(0), "0ms");
    }
}
