//! Sessions' cgroups made ahead and removed behind, by one thread (`uexec-cgroups`), so
//! that neither the `mkdir` nor the `rmdir` of a session's cgroup (30 and 20 µs each on a
//! quiet machine, over 100 µs at times) lies between a call and its result (issue 41):
//! 1. **Ahead**: a spawn takes one of at most [`SPARES`] empty cgroups made before it; when
//!    there is none (the first spawn, or many at once) it makes its own, and the thread is
//!    told to make spares for the next ones.
//! 2. **Behind**: an ended session's cgroup is removed by the thread after its end was
//!    reported, and the spares are topped up then, between calls. One that is not empty
//!    after all (a process the kernel had not let go of yet) is killed and removed once
//!    empty, as before (`removal::remove_or_kill`).
//!
//! A spare is a cgroup as a session's is made (`s<N>` under `uexec.<pid>`): nothing ran in
//! it, so its figures start from nothing. A spare holds no descriptor (it is opened when a
//! spawn takes it, a few µs): between calls uexec holds as many fds as it did before. Spares left at exit go with uexec's subtree (the
//! last will removes it, or the next uexec of that cgroup).

use std::fs;
use std::io;
use std::os::fd::OwnedFd;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc, Mutex, OnceLock};

use super::removal::{open_dir, remove_or_kill};
use super::Tree;
use crate::events::lock;
use crate::usage::Usage;

/// Empty cgroups kept ready: one for the next call, one for a call while the thread makes
/// the next.
pub(super) const SPARES: usize = 2;

/// A session's cgroup directory, made and open (`O_PATH`).
#[derive(Debug)]
pub(super) struct Made {
    pub(super) dir: PathBuf,
    pub(super) fd: OwnedFd,
}

/// What the thread is asked to do.
enum Job {
    /// Make spares up to [`SPARES`].
    Replenish,
    /// Remove an ended session's cgroup; its figures go to `last` if it must be killed
    /// first.
    Remove(PathBuf, Arc<Mutex<Option<Usage>>>),
}

/// The spares and the thread's queue, one per [`Tree`].
#[derive(Debug, Default)]
pub(super) struct Keeper {
    spares: Mutex<Vec<PathBuf>>,
    /// Set by the first spawn that asked for a cgroup: from then on the thread keeps spares.
    wanted: AtomicBool,
    /// The thread's queue, started on first use (`None`: it could not be started; then
    /// everything is done in place, as before).
    jobs: OnceLock<Option<Mutex<mpsc::Sender<Job>>>>,
}

impl Tree {
    /// A new cgroup directory for a session: a spare made ahead, else made now.
    pub(super) fn take_cgroup(&'static self) -> io::Result<Made> {
        self.keeper.wanted.store(true, Ordering::Relaxed);
        let spare = lock(&self.keeper.spares).pop();
        if let Some(dir) = spare {
            match open_dir(&dir) {
                Ok(fd) => return Ok(Made { dir, fd }),
                // Gone or unreadable (another uexec swept it): made now, as without one.
                Err(_) => {
                    let _ = fs::remove_dir(&dir);
                }
            }
        }
        let made = self.make_cgroup();
        self.send(Job::Replenish);
        made
    }

    /// Makes `s<N>` under the subtree.
    fn make_dir(&self) -> io::Result<PathBuf> {
        let n = self.next.fetch_add(1, Ordering::Relaxed);
        let dir = self.root.join(format!("s{n}"));
        fs::create_dir(&dir)?;
        Ok(dir)
    }

    /// Makes `s<N>` under the subtree and opens it.
    pub(super) fn make_cgroup(&self) -> io::Result<Made> {
        let dir = self.make_dir()?;
        match open_dir(&dir) {
            Ok(fd) => Ok(Made { dir, fd }),
            Err(e) => {
                let _ = fs::remove_dir(&dir);
                Err(e)
            }
        }
    }

    /// Removes an ended session's cgroup from the thread (in place when there is none):
    /// killed first if it is not empty, its figures then kept in `last`.
    pub(super) fn remove_later(&'static self, dir: PathBuf, last: Arc<Mutex<Option<Usage>>>) {
        if !self.send(Job::Remove(dir.clone(), last.clone())) {
            remove_or_kill(dir, last);
        }
    }

    /// Queues `job` for the thread, started on first use; false when there is none.
    fn send(&'static self, job: Job) -> bool {
        let jobs = self.keeper.jobs.get_or_init(|| {
            let (tx, rx) = mpsc::channel();
            let started = std::thread::Builder::new()
                .name("uexec-cgroups".into())
                .stack_size(64 * 1024)
                .spawn(move || self.keep(&rx));
            match started {
                Ok(_) => Some(Mutex::new(tx)),
                Err(e) => {
                    tracing::warn!("no thread for sessions' cgroups ({e}): made in place");
                    None
                }
            }
        });
        jobs.as_ref().is_some_and(|tx| lock(tx).send(job).is_ok())
    }

    /// The thread: removes what it is given, then tops the spares up, until uexec exits.
    fn keep(&self, jobs: &mpsc::Receiver<Job>) {
        while let Ok(job) = jobs.recv() {
            for job in std::iter::once(job).chain(jobs.try_iter()) {
                if let Job::Remove(dir, last) = job {
                    remove_or_kill(dir, last);
                }
            }
            if !self.keeper.wanted.load(Ordering::Relaxed) {
                continue;
            }
            while lock(&self.keeper.spares).len() < SPARES {
                match self.make_dir() {
                    Ok(dir) => lock(&self.keeper.spares).push(dir),
                    Err(e) => {
                        tracing::debug!("no spare cgroup: {e}");
                        break;
                    }
                }
            }
        }
    }
}
