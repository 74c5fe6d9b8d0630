//! Durations as people write them on a command line: `500ms`, `10s`, `5m`, `1h`; a bare
//! number is in the unit its flag documents.

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
}
