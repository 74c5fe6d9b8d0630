//! The rules judged at each exec of a session (issue 40, `RulesAt::Exec`): a policy monitor
//! that takes the exec-notify listener the launcher hands over, then judges every exec of
//! every process the session starts with the store's [`CommandRules`]
//! ([`crate::policy::exec_rules`]):
//! - `allow`: the exec goes on;
//! - `forbidden`: it fails with `EACCES` (the command's own error handling sees an ordinary
//!   "Permission denied") and the session's next result names the program, the rule and its
//!   justification;
//! - `prompt`: the exec is held while the call's [`Approver`] asks (the rest of the session
//!   runs on); no approver, no answer, or a no: refused as above. A rule the person already
//!   said yes to on the session's script text ([`ExecWatch::with_text_yes`]) is not asked
//!   again in that session: its execs go on, recorded as decided by that yes.
//!
//! Each judged exec is written to the store's [`DecisionLog`], with its process and parent
//! ([`ExecPlace`]: `uexec audit` shows the session's execs as a tree). An exec that cannot be read
//! is refused. The listener lives as long as this monitor: should it go, every exec still
//! to come fails (`ENOSYS`), so nothing runs unjudged.

use std::ffi::OsString;
use std::os::fd::{AsRawFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use futures::future::BoxFuture;
use uexec_sys::{ExecCall, ExecListener, ExecNotification, ListenerState};

use super::admit::{Answer, Approver, Question};
use crate::policy::decisions::{decided, Decided, DecisionLog, ExecPlace};
use crate::policy::exec_rules::{exec_words, judge_exec, refused_at_exec, shell_line};
use crate::policy::rules::{CommandRules, Decision, Verdict};
use crate::policy::{MonitorHandle, PolicyMonitor};

/// How long one wait for an exec lasts before the watch looks again (ms).
const WAIT_MS: i32 = 100;
/// How often a held exec's process is checked while its person is asked.
const HELD_CHECK: Duration = Duration::from_millis(100);

/// A session's judge of execs ([`crate::policy::exec_rules`]).
pub struct ExecWatch {
    socket: Result<OwnedFd, String>,
    rules: Arc<dyn CommandRules>,
    log: Option<Arc<dyn DecisionLog>>,
    approver: Option<Arc<dyn Approver>>,
    /// The session the decisions are recorded under.
    session_id: i32,
    /// The `prompt` rules a person said yes to on the session's script text (their sources).
    text_yes: Vec<String>,
}

impl ExecWatch {
    /// The watch of session `session_id`, on `socket` (from [`super::Admitted::exec_socket`]:
    /// an `Err` is said in the session's first result, and only the text was judged).
    pub fn new(
        socket: Result<OwnedFd, String>,
        rules: Arc<dyn CommandRules>,
        log: Option<Arc<dyn DecisionLog>>,
        approver: Option<Arc<dyn Approver>>,
        session_id: i32,
    ) -> Self {
        Self {
            socket,
            rules,
            log,
            approver,
            session_id,
            text_yes: Vec::new(),
        }
    }

    /// The session's script was held by `verdict` and a person said yes to it: the execs
    /// the same `prompt` rules hold are covered by that yes (in this session only; an exec
    /// another rule holds is still asked, and a `forbidden` one still refused).
    pub fn with_text_yes(mut self, verdict: &Verdict) -> Self {
        if verdict.decision == Decision::Prompt {
            self.text_yes = verdict
                .parts
                .iter()
                .filter(|p| p.decision == Decision::Prompt)
                .filter_map(|p| p.rule.as_ref().map(|r| r.source.clone()))
                .collect();
        }
        self
    }
}

impl PolicyMonitor for ExecWatch {
    fn watch(self: Box<Self>, session: MonitorHandle) -> BoxFuture<'static, ()> {
        let socket = match self.socket {
            Ok(socket) => socket,
            Err(why) => {
                session.notice(format!(
                    "rules judged on the script's text only, not at each exec: {why}"
                ));
                return Box::pin(async {});
            }
        };
        let Self {
            rules,
            log,
            approver,
            session_id,
            text_yes,
            ..
        } = *self;
        let runtime = tokio::runtime::Handle::current();
        // A thread of its own, started now: it takes the listener and judges, and the
        // command's first exec waits for it (from tokio's blocking pool, it could queue
        // behind the session's transcript files). Sessions are bounded, so are these.
        let (done, judging) = tokio::sync::oneshot::channel::<()>();
        let unstarted = session.clone();
        let judge = move || {
            // The launcher sends the listener before its command's exec, or closes its end
            // having failed (and said why on the session's output).
            let listener = match uexec_sys::recv_fd(socket.as_raw_fd()) {
                Ok(fd) => ExecListener::from(fd),
                Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => return,
                Err(e) => {
                    session.fail_and_terminate(format!(
                        "the rules at exec could not start: the launcher's listener: {e}"
                    ));
                    return;
                }
            };
            // Older kernels lack it, and answer all the same.
            let _ = listener.sync_wake_up();
            Judge {
                listener: Arc::new(listener),
                rules,
                log,
                pending: std::cell::RefCell::new(Vec::new()),
                approver,
                session_id,
                text_yes,
                session,
                runtime,
                last_said: std::cell::RefCell::new(None),
            }
            .run();
            let _ = done.send(());
        };
        if let Err(e) = std::thread::Builder::new()
            .name("uexec-exec-judge".into())
            .spawn(judge)
        {
            unstarted.fail_and_terminate(format!(
                "the rules at exec could not start: no thread for their judge: {e}"
            ));
            return Box::pin(async {});
        }
        Box::pin(async move {
            let _ = judging.await;
        })
    }
}

struct Judge {
    listener: Arc<ExecListener>,
    rules: Arc<dyn CommandRules>,
    log: Option<Arc<dyn DecisionLog>>,
    /// Judged execs not yet written down: made into the record's lines and written together
    /// when the execs pause, or when [`RECORD_BATCH`] wait, once the exec answered last has
    /// had the processor (an exec waits for its judgement, not for the record).
    pending: std::cell::RefCell<Vec<Judged>>,
    approver: Option<Arc<dyn Approver>>,
    session_id: i32,
    text_yes: Vec<String>,
    session: MonitorHandle,
    runtime: tokio::runtime::Handle,
    /// The process and words of the last refusal said: a process that looks further down
    /// its PATH after it (execvp does on EACCES) is refused again, not said again.
    last_said: std::cell::RefCell<Option<(u32, Vec<String>)>>,
}

impl Judge {
    /// Judges execs until no process runs under the filter.
    fn run(self) {
        self.judge_all();
        self.flush();
    }

    fn judge_all(&self) {
        loop {
            if self.pending.borrow().len() >= RECORD_BATCH {
                // The process answered last may wait for this processor: it goes first.
                std::thread::yield_now();
                self.flush();
            }
            match self.listener.wait(WAIT_MS) {
                Ok(ListenerState::Ready) => {}
                Ok(ListenerState::Idle) => {
                    self.flush();
                    continue;
                }
                Ok(ListenerState::Gone) => return,
                Err(e) => {
                    self.session
                        .notice(format!("the rules at exec stopped: {e}; later execs fail"));
                    return;
                }
            }
            let n = match self.listener.recv() {
                Ok(n) => n,
                // Its process was killed between the wait and the take.
                Err(e) if e.raw_os_error() == Some(libc::ENOENT) => continue,
                Err(_) => continue,
            };
            self.one(n);
        }
    }

    fn one(&self, n: ExecNotification) {
        let mut call = match self.listener.read_exec(&n) {
            Ok(call) => call,
            // Gone meanwhile: nothing to answer.
            Err(e) if e.raw_os_error() == Some(libc::ESRCH) => return,
            Err(e) => {
                let _ = self.listener.respond_error(n.id, libc::EACCES);
                self.session.notice(format!(
                    "refused at exec: an exec uexec could not read ({e}), in process {}",
                    n.pid
                ));
                return;
            }
        };
        let verdict = judge_exec(self.rules.as_ref(), &call.program, &call.argv);
        // For the record: its process and parent, its directory (a person's question names
        // it too), whether its program is there at all; read while it is held (read once it
        // goes on, each waits behind the exec's own locks), and only when they are used.
        let recorded = self.log.is_some();
        if recorded {
            let _ = call.find_process();
        }
        let cwd = if recorded || verdict.decision == Decision::Prompt {
            std::fs::read_link(format!("/proc/{}/cwd", n.pid)).unwrap_or_default()
        } else {
            PathBuf::new()
        };
        if verdict.decision == Decision::Allow {
            // A PATH search (`execvp`) tries each directory in turn: an exec of a program
            // that is not there fails and runs nothing, and is no line of the record.
            let miss = recorded && missing(n.pid, &call.program);
            // An answer refused: its process was killed while held, and nothing ran.
            let went_on = self.listener.respond_continue(n.id).is_ok();
            if went_on && !miss {
                self.record(Judged::new(call, cwd, verdict, true));
            }
            return;
        }
        match verdict.decision {
            Decision::Allow => {}
            Decision::Forbidden => {
                let _ = self.listener.respond_error(n.id, libc::EACCES);
                let said = Some((n.pid, exec_words(&call.program, &call.argv)));
                if *self.last_said.borrow() != said {
                    self.session
                        .notice(refused_at_exec(&call.program, &call.argv, &verdict));
                    *self.last_said.borrow_mut() = said;
                }
                self.record(Judged::new(call, cwd, verdict, false));
            }
            Decision::Prompt if self.said_yes_to(&verdict) => {
                let _ = self.listener.respond_continue(n.id);
                let rule = verdict.deciding().and_then(|p| p.rule.as_ref());
                let source = rule.map_or("", |r| r.source.as_str());
                let why = format!(
                    "the person said yes to the session's command, which rule {source} held"
                );
                let by = self
                    .approver
                    .as_ref()
                    .map_or_else(|| "a person".to_owned(), |a| a.who());
                let by = format!("{by}, by their earlier yes to the command");
                self.record(Judged::new(call, cwd, verdict, true).because(why).by(by));
            }
            Decision::Prompt => self.held(n, call, cwd, verdict),
        }
    }

    /// Whether every rule that holds this exec was said yes to on the session's text.
    fn said_yes_to(&self, verdict: &Verdict) -> bool {
        let mut holding = verdict
            .parts
            .iter()
            .filter(|p| p.decision == Decision::Prompt)
            .peekable();
        holding.peek().is_some()
            && holding.all(|p| {
                p.rule
                    .as_ref()
                    .is_some_and(|r| self.text_yes.contains(&r.source))
            })
    }

    /// A `prompt`: the exec waits while the person is asked, and the watch goes on.
    fn held(&self, n: ExecNotification, call: ExecCall, cwd: PathBuf, verdict: Verdict) {
        let Some(approver) = self.approver.clone() else {
            let _ = self.listener.respond_error(n.id, libc::EACCES);
            let why = "no person can be asked here";
            self.session.notice(format!(
                "{}; {why}",
                refused_at_exec(&call.program, &call.argv, &verdict)
            ));
            self.record(Judged::new(call, cwd, verdict, false).because(why.to_owned()));
            return;
        };
        // Its parent's exec, judged before, is written before it: the record's tree.
        self.flush();
        let listener = self.listener.clone();
        let record = self.recorder();
        let session = self.session.clone();
        self.runtime.spawn(async move {
            let question = Question {
                command: command_line(&call.program, &call.argv),
                cwd: cwd.clone(),
                verdict: verdict.clone(),
            };
            let gone = {
                let listener = listener.clone();
                async move {
                    while listener.id_valid(n.id) {
                        tokio::time::sleep(HELD_CHECK).await;
                    }
                }
            };
            let answer = tokio::select! {
                answer = approver.ask(question) => answer,
                // Killed while held: nothing to answer, nothing left behind.
                () = gone => return,
            };
            let by = approver.who();
            let said = match answer {
                Answer::Yes => {
                    // Written before the exec goes on: the watch may end once it has.
                    record(Judged::new(call, cwd, verdict, true).by(by));
                    let _ = listener.respond_continue(n.id);
                    return;
                }
                Answer::No { reason: Some(r) } => format!("the person said no: {r}"),
                Answer::No { reason: None } => "the person said no".to_owned(),
                Answer::Unanswered { why } | Answer::Later { why } => format!("no answer: {why}"),
            };
            let notice = format!(
                "{}; {said}",
                refused_at_exec(&call.program, &call.argv, &verdict)
            );
            record(Judged::new(call, cwd, verdict, false).because(said).by(by));
            let _ = listener.respond_error(n.id, libc::EACCES);
            session.notice(notice);
        });
    }

    /// Keeps a judged exec to be written down with the next batch.
    fn record(&self, judged: Judged) {
        if self.log.is_some() {
            self.pending.borrow_mut().push(judged);
        }
    }

    /// Writes down the judged execs that wait.
    fn flush(&self) {
        let Some(log) = &self.log else { return };
        let batch = std::mem::take(&mut *self.pending.borrow_mut());
        if !batch.is_empty() {
            let id = self.session_id;
            log.record_all(batch.into_iter().map(|j| j.entry(id)).collect());
        }
    }

    /// Writes one judged exec down at once, under the session (a held exec's).
    fn recorder(&self) -> impl Fn(Judged) + Send + 'static {
        let log = self.log.clone();
        let session_id = self.session_id;
        move |judged| {
            if let Some(log) = &log {
                log.record(judged.entry(session_id));
            }
        }
    }
}

/// The exec as one line: the program's path and its arguments after `argv[0]`.
fn command_line(program: &Path, argv: &[OsString]) -> String {
    let mut words = vec![program.to_string_lossy().into_owned()];
    words.extend(
        argv.iter()
            .skip(1)
            .map(|a| a.to_string_lossy().into_owned()),
    );
    shell_line(&words)
}

/// Judged execs written down together, at most.
const RECORD_BATCH: usize = 256;

/// A judged exec waiting to be written down ([`Judge::flush`] makes its line).
struct Judged {
    call: ExecCall,
    cwd: PathBuf,
    verdict: Verdict,
    admitted: bool,
    reason: Option<String>,
    /// Who decided: the rules when empty.
    by: String,
}

impl Judged {
    fn new(call: ExecCall, cwd: PathBuf, verdict: Verdict, admitted: bool) -> Self {
        Self {
            call,
            cwd,
            verdict,
            admitted,
            reason: None,
            by: String::new(),
        }
    }

    fn because(mut self, reason: String) -> Self {
        self.reason = Some(reason);
        self
    }

    fn by(mut self, by: String) -> Self {
        self.by = by;
        self
    }

    /// Its line in the record, under session `session_id`.
    fn entry(self, session_id: i32) -> Decided {
        let call = &self.call;
        let mut d = decided(
            &command_line(&call.program, &call.argv),
            &self.cwd,
            &self.verdict,
        );
        d.admitted = self.admitted;
        d.reason = self.reason;
        let who = if self.by.is_empty() {
            d.by.clone()
        } else {
            self.by
        };
        d.by = format!("{who}, at exec in session {session_id}");
        d.exec = Some(ExecPlace {
            session: session_id,
            pid: call.pid,
            ppid: call.ppid,
        });
        d
    }
}

/// Whether `program` is not there as held process `pid` sees its files (its root: a
/// sandbox's private `/tmp` is not uexec's). Asked first of uexec's own root, a fifth of the
/// time of a walk through `/proc/PID/root`: a program there is taken as there for the
/// process too (a process whose root lacks it fails its exec, and only its record line is
/// wrong). An absolute symbolic link on the way resolves from uexec's root: only the record
/// depends on it.
fn missing(pid: u32, program: &Path) -> bool {
    if program.is_absolute() && std::fs::metadata(program).is_ok() {
        return false;
    }
    let root = PathBuf::from(format!("/proc/{pid}/root"));
    let inside = program.strip_prefix("/").unwrap_or(program);
    matches!(std::fs::metadata(root.join(inside)), Err(e) if e.kind() == std::io::ErrorKind::NotFound)
}
