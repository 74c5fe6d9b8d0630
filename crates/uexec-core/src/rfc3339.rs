//! Wall-clock times as RFC 3339 text and back, for people and the JSON they script against
//! (when a session started and ended, `uexec logs --since 2026-12-03T11:35:00Z`).
//!
//! Written out in UTC to the millisecond (`2026-12-03T11:35:47.250Z`); read with any
//! offset (`Z`, `+01:00`), a `T` or a space between date and time, and any fraction of a
//! second. The calendar is the proleptic Gregorian one, through Howard Hinnant's
//! `days_from_civil` and `civil_from_days`, exact for every year 1970 to 9999: times
//! before 1970 are refused (no session started then).

use std::time::{Duration, SystemTime};

const SECS_PER_DAY: u64 = 86_400;

/// `t` as RFC 3339 in UTC, to the millisecond.
pub fn format(t: SystemTime) -> String {
    let since = t.duration_since(SystemTime::UNIX_EPOCH).unwrap_or_default();
    let secs = since.as_secs();
    let (y, m, d) = civil_from_days(secs / SECS_PER_DAY);
    let of_day = secs % SECS_PER_DAY;
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}.{:03}Z",
        of_day / 3600,
        of_day / 60 % 60,
        of_day % 60,
        since.subsec_millis()
    )
}

/// An RFC 3339 time (`2026-12-03T11:35:47Z`, `2026-12-03 12:35:47.5+01:00`).
pub fn parse(s: &str) -> Result<SystemTime, String> {
    let bad =
        |why: &str| format!("{s:?} is not an RFC 3339 time ({why}), e.g. 2026-12-03T11:35:00Z");
    let b = s.as_bytes();
    if b.len() < 20 || b[4] != b'-' || b[7] != b'-' || b[13] != b':' || b[16] != b':' {
        return Err(bad("YYYY-MM-DDTHH:MM:SS and an offset"));
    }
    if !matches!(b[10], b'T' | b't' | b' ') {
        return Err(bad("a T between the date and the time"));
    }
    let num = |at: usize, len: usize| -> Result<u64, String> {
        let part = s.get(at..at + len).ok_or_else(|| bad("digits expected"))?;
        if !part.bytes().all(|c| c.is_ascii_digit()) {
            return Err(bad("digits expected"));
        }
        part.parse().map_err(|_| bad("digits expected"))
    };
    let (year, month, day) = (num(0, 4)?, num(5, 2)?, num(8, 2)?);
    let (hour, minute, second) = (num(11, 2)?, num(14, 2)?, num(17, 2)?);
    if !(1..=12).contains(&month) || day == 0 || day > days_in_month(year, month) {
        return Err(bad("no such date"));
    }
    // 60: a leap second, read as the last second of its minute.
    if hour > 23 || minute > 59 || second > 60 {
        return Err(bad("no such time of day"));
    }
    if year < 1970 {
        return Err(bad("before 1970"));
    }
    let mut rest = &s[19..];
    let mut nanos = 0u32;
    if let Some(frac) = rest.strip_prefix('.') {
        let digits = frac.bytes().take_while(u8::is_ascii_digit).count();
        if digits == 0 {
            return Err(bad("digits expected after the '.'"));
        }
        for (i, c) in frac.bytes().take(digits.min(9)).enumerate() {
            nanos += u32::from(c - b'0') * 10u32.pow(8 - i as u32);
        }
        rest = &frac[digits..];
    }
    let offset_secs: i64 = match rest.as_bytes() {
        [b'Z' | b'z'] => 0,
        [sign @ (b'+' | b'-'), h1, h2, b':', m1, m2]
            if [h1, h2, m1, m2].iter().all(|c| c.is_ascii_digit()) =>
        {
            let h = i64::from((h1 - b'0') * 10 + (h2 - b'0'));
            let m = i64::from((m1 - b'0') * 10 + (m2 - b'0'));
            if h > 23 || m > 59 {
                return Err(bad("no such offset"));
            }
            let secs = h * 3600 + m * 60;
            if *sign == b'+' {
                secs
            } else {
                -secs
            }
        }
        _ => return Err(bad("an offset: Z or +HH:MM")),
    };
    let local = days_from_civil(year, month, day) * SECS_PER_DAY
        + hour * 3600
        + minute * 60
        + second.min(59);
    let utc = i64::try_from(local).map_err(|_| bad("out of range"))? - offset_secs;
    let utc = u64::try_from(utc).map_err(|_| bad("before 1970"))?;
    Ok(SystemTime::UNIX_EPOCH + Duration::new(utc, nanos))
}

fn is_leap(year: u64) -> bool {
    year.is_multiple_of(4) && (!year.is_multiple_of(100) || year.is_multiple_of(400))
}

fn days_in_month(year: u64, month: u64) -> u64 {
    match month {
        2 if is_leap(year) => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

/// Days since 1970-01-01 of a date from 1970 on.
fn days_from_civil(year: u64, month: u64, day: u64) -> u64 {
    let y = if month <= 2 { year - 1 } else { year };
    let era = y / 400;
    let yoe = y % 400;
    let mp = (month + 9) % 12;
    let doy = (153 * mp + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// The date `days` after 1970-01-01.
fn civil_from_days(days: u64) -> (u64, u64, u64) {
    let z = days + 719_468;
    let era = z / 146_097;
    let doe = z % 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + u64::from(month <= 2);
    (year, month, day)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(secs: u64, millis: u64) -> SystemTime {
        SystemTime::UNIX_EPOCH + Duration::from_millis(secs * 1000 + millis)
    }

    #[test]
    fn known_times_read_and_write_as_the_calendar_says() {
        for (text, secs, millis) in [
            ("1970-01-01T00:00:00.000Z", 0, 0),
            ("2000-02-29T23:59:59.500Z", 951_868_799, 500),
            ("2026-12-03T11:35:47.000Z", 1_796_297_747, 0),
            ("2400-03-01T00:00:00.000Z", 13_574_649_600, 0),
        ] {
            assert_eq!(format(at(secs, millis)), text);
            assert_eq!(parse(text), Ok(at(secs, millis)), "{text}");
        }
    }

    #[test]
    fn offsets_spaces_and_fractions_are_read() {
        let t = at(1_796_297_747, 0);
        assert_eq!(parse("2026-12-03T12:35:47+01:00"), Ok(t));
        assert_eq!(parse("2026-12-03 06:05:47-05:30"), Ok(t));
        assert_eq!(parse("2026-12-03t11:35:47z"), Ok(t));
        assert_eq!(
            parse("2026-12-03T11:35:47.123456789Z"),
            Ok(t + Duration::from_nanos(123_456_789))
        );
        assert_eq!(
            parse("2026-12-03T11:35:60Z"),
            Ok(t + Duration::from_secs(12))
        );
    }

    #[test]
    fn what_is_not_a_time_says_why() {
        for bad in [
            "",
            "10m",
            "2026-12-03",
            "2026-12-03T11:35Z",
            "2026-12-03T11:35:47",
            "2026-13-03T11:35:47Z",
            "2026-02-29T11:35:47Z",
            "2026-12-03T24:00:00Z",
            "2026-12-03T11:35:47.Z",
            "2026-12-03T11:35:47+1:00",
            "2026-12-03X11:35:47Z",
            "1969-12-31T23:59:59Z",
            "1970-01-01T00:00:00+01:00",
            "2026-12-03T11:35:47Zjunk",
            "２026-12-03T11:35:47Z",
        ] {
            let e = parse(bad).expect_err(bad);
            assert!(e.contains("RFC 3339"), "{bad}: {e}");
        }
    }

    #[test]
    fn every_day_for_centuries_round_trips() {
        for days in (0..200_000).step_by(7) {
            let t = at(days * SECS_PER_DAY + 45_296, 789);
            assert_eq!(parse(&format(t)), Ok(t), "{}", format(t));
            let (y, m, d) = civil_from_days(days);
            assert_eq!(days_from_civil(y, m, d), days);
        }
    }
}
