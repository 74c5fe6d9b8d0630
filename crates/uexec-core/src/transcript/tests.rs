//! The transcript on disk, written and read back: segments, rotation, the caps, stops.

use super::read::*;
use super::writer::*;
use super::*;

fn config(dir: &Path, session_max: u64) -> TranscriptConfig {
    TranscriptConfig {
        root: dir.to_path_buf(),
        session_max_bytes: session_max,
        total_max_bytes: u64::MAX,
    }
}

/// Session 1000's transcript writer (`cmd` in `/`).
fn writer(cfg: &TranscriptConfig) -> TranscriptWriter {
    TranscriptPlan::new(cfg, 1000, "cmd", Path::new("/"), false)
        .and_then(TranscriptPlan::open)
        .expect("create")
}

fn temp() -> PathBuf {
    let dir = std::env::temp_dir().join(format!("uexec-transcript-{:08x}", rand::random::<u32>()));
    fs::create_dir_all(&dir).expect("temp dir");
    dir
}

#[test]
fn every_byte_is_kept_and_read_back_across_segments() {
    let root = temp().join("sessions");
    let cfg = config(&root, 4 * 4096);
    let mut w = writer(&cfg);
    let data: Vec<u8> = (0..12_000u32).map(|i| (i % 251) as u8).collect();
    for chunk in data.chunks(1000) {
        w.append(chunk);
    }
    let info = w.info();
    assert_eq!((info.total, info.first_kept), (12_000, 0));
    let all = read_slice(&info, cfg.segment_bytes(), 0, 1 << 20).expect("read");
    assert_eq!(all.bytes, data);
    let mid = read_slice(&info, cfg.segment_bytes(), 4000, 200).expect("read");
    assert_eq!(mid.bytes, data[4000..4200]);
    use std::os::unix::fs::PermissionsExt;
    let mode = fs::metadata(w.dir().join("output.000000"))
        .expect("meta")
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o600);
}

#[test]
fn the_oldest_segment_rotates_away_past_the_cap() {
    let root = temp().join("sessions");
    let cfg = config(&root, 4 * 4096);
    let mut w = writer(&cfg);
    let data: Vec<u8> = (0..4 * 4096 + 10).map(|i| (i % 7) as u8).collect();
    w.append(&data);
    let info = w.info();
    assert_eq!(info.first_kept, 4096);
    assert!(!w.dir().join("output.000000").exists());
    let slice = read_slice(&info, cfg.segment_bytes(), 0, 100).expect("read");
    assert_eq!(slice.offset, 4096, "moved up to what is kept");
    assert_eq!(slice.bytes, data[4096..4196]);
}

#[test]
fn the_total_cap_deletes_the_least_recently_written_sessions_but_not_recent_ones() {
    let root = temp();
    let hour_ago = SystemTime::now() - Duration::from_secs(3600);
    for (name, age_hours, bytes) in [("old", 3, 3000), ("older", 5, 3000), ("new", 0, 3000)] {
        let dir = root.join(name);
        fs::create_dir_all(&dir).expect("dir");
        let file = File::create(dir.join("output.000000")).expect("file");
        file.set_len(bytes).expect("size");
        if age_hours > 0 {
            let when = hour_ago - Duration::from_secs(3600 * (age_hours - 1));
            file.set_modified(when).expect("mtime");
        }
    }
    // Room for all but the least recently written one.
    let all: u64 = ["old", "older", "new"]
        .iter()
        .map(|name| footprint(&root.join(name)).0)
        .sum();
    enforce_total_cap(&root, all - footprint(&root.join("older")).0);
    assert!(
        !root.join("older").exists(),
        "least recently written goes first"
    );
    assert!(root.join("old").exists() && root.join("new").exists());
    enforce_total_cap(&root, 10);
    assert!(!root.join("old").exists());
    assert!(
        root.join("new").exists(),
        "written within the minute: spared"
    );
}

/// Sessions that print nothing hold a directory and a `meta` file each: a few bytes of
/// content, but a directory and a block of disk each. The cap counts what the disk
/// holds, so that a long day of `true`s is pruned too.
#[test]
fn the_total_cap_counts_the_disk_that_silent_sessions_hold() {
    let root = temp();
    let hour_ago = SystemTime::now() - Duration::from_secs(3600);
    for i in 0..40u64 {
        let dir = root.join(format!("s{i:02}"));
        fs::create_dir_all(&dir).expect("dir");
        for (name, content) in [
            ("meta", &b"session_id=1\n"[..]),
            ("output.000000", b""),
            ("timing", b""),
        ] {
            let mut file = File::create(dir.join(name)).expect("file");
            file.write_all(content).expect("write");
            file.set_modified(hour_ago - Duration::from_secs(i))
                .expect("mtime");
        }
    }
    let content: u64 = 40 * 13;
    enforce_total_cap(&root, 64 << 10);
    let left = fs::read_dir(&root).expect("root").count();
    assert!(
        left < 40,
        "{content} bytes of content, but 40 directories on disk: some must go ({left} left)"
    );
    assert!(root.join("s00").exists(), "the most recently written stay");
}

/// `/dev/full` answers every write with ENOSPC, as a full disk does.
#[test]
fn a_failed_write_stops_the_transcript_where_the_disk_ends_and_meta_says_why() {
    let root = temp().join("sessions");
    let cfg = config(&root, 4 * 4096);
    let mut w = writer(&cfg);
    w.append(&[b'a'; 5000]);
    w.segment = fs::OpenOptions::new()
        .write(true)
        .open("/dev/full")
        .expect("/dev/full");
    w.append(&[b'b'; 100]);
    let stop = TranscriptStop {
        at: 5000,
        error: "No space left on device".into(),
        deleted: false,
    };
    assert_eq!(w.info().stop.as_ref(), Some(&stop));
    assert!(w.stopped());
    // Nothing after the stop is written, not even once the disk has room again.
    w.segment = private_file(&segment_path(w.dir(), 0)).expect("reopen");
    w.append(b"later");
    assert_eq!(w.info().total, 5000);
    // A reader of the directory alone (the session is gone) learns the same.
    let read = info_of(w.dir(), cfg.segment_bytes()).expect("info");
    assert_eq!((read.total, read.stop), (5000, Some(stop)));
    let timing = fs::read_to_string(w.dir().join("timing")).expect("timing");
    let timed: u64 = timing
        .lines()
        .filter_map(|l| l.split_whitespace().nth(1)?.parse::<u64>().ok())
        .sum();
    assert_eq!(timed, 5000, "the timing accounts for every byte on disk");
}

#[test]
fn a_stop_reads_as_the_os_says_it_without_the_number() {
    let stop = TranscriptStop::new(7, &io::Error::from_raw_os_error(libc::EDQUOT));
    assert_eq!(
        stop.text(),
        "the transcript stopped at byte 7: Disk quota exceeded"
    );
}

#[test]
fn a_root_open_to_others_is_refused() {
    use std::os::unix::fs::PermissionsExt;
    let root = temp();
    fs::set_permissions(&root, fs::Permissions::from_mode(0o777)).expect("chmod");
    let err = TranscriptPlan::new(&config(&root, 1 << 20), 1, "x", Path::new("/"), false)
        .expect_err("refused");
    assert!(err.to_string().contains("mode 0700"), "{err}");
}

#[test]
fn a_transcript_deleted_under_its_writer_claims_nothing_and_stops() {
    let root = temp().join("sessions");
    let cfg = config(&root, 4 * 4096);
    let mut w = writer(&cfg);
    w.append(&[b'a'; 5000]);
    assert_eq!(w.info().stop, None);
    fs::remove_dir_all(&root).expect("rm -rf");
    // At once, before any write notices: nothing of it is on disk.
    let stop = w.info().stop.expect("stopped");
    assert!(stop.deleted && stop.at == 5000, "{stop:?}");
    assert_eq!(
        coverage::coverage(&(0..5000), &w.info()).readable,
        None,
        "no byte is claimed readable"
    );
    // And it writes no more into files nobody can open.
    w.append(&[b'b'; 100]);
    w.finish();
    assert_eq!(w.info().total, 5000);
    assert!(w.stopped());
}
