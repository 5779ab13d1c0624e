//! Runs one chore: the rules that decide whether it may run at all, then
//! the script in the cage with only its touches writable (none for a dry
//! run), the damage cap checked while it runs and counted exactly after, and any
//! setuid, setgid or capability a file gained in it taken away.

#![forbid(unsafe_code)]

use super::header::{Color, DEFAULT_MAX_FILES, DEFAULT_MAX_GB, Header};
use super::tree::{self, Gained, changes};
use crate::cage::{self, CageSpec};
use crate::egress;
use crate::exec::{self, Bounds, Outcome};
use crate::layout::Layout;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

/// The specification's sentence for hosts without namespaces.
pub const NO_ISOLATION: &str = "This server has no isolation. I only run green system chores here.";
/// How the C library words `EROFS`, which the cage gives a write outside
/// the touches.
pub const EROFS_MESSAGE: &[u8] = b"Read-only file system";
pub const FIRST_WEEK: &str = "For the first 7 days after install only green chores run.";

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Origin {
    /// Embedded in the Warden binary.
    System,
    /// The owner's, from `mine/` under the Warden's configuration directory.
    Mine,
    /// Of the installed skill of this name, within its manifest.
    Skill(String),
}

impl Origin {
    /// Whose chore it is, in words.
    pub fn described(&self) -> String {
        match self {
            Origin::System => "a system chore".into(),
            Origin::Mine => "one of your own chores".into(),
            Origin::Skill(name) => format!("the skill {name}'s chore"),
        }
    }

    /// Its short name, as `/chores` shows it.
    pub fn short(&self) -> String {
        match self {
            Origin::System => "system".into(),
            Origin::Mine => "mine".into(),
            Origin::Skill(name) => format!("skill {name}"),
        }
    }
}

#[derive(Clone, Debug)]
pub struct Chore {
    pub header: Header,
    pub script: String,
    pub origin: Origin,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// Reports what it would change; nothing is writable.
    DryRun,
    Real,
}

/// What the caller knows that the runner needs.
pub struct Context<'a> {
    pub layout: &'a Layout,
    /// A real cage can be built here.
    pub isolation: bool,
    /// Whole days since install.
    pub days_installed: u64,
    /// The owner confirmed a damage cap above the default.
    pub cap_confirmed: bool,
    /// How often the damage cap is checked during the run (5 s).
    pub cap_interval: Duration,
    pub timeout: Duration,
    /// Thrown from another thread to stop the run (the ladder reached
    /// Freeze); `None`: only the damage cap and the timeout stop it.
    pub halt: Option<Arc<AtomicBool>>,
    /// A skill's chore with `network: yes`: the hosts its proxy lets it
    /// reach. `None` (or no host): it has no network at all.
    pub egress: Option<egress::Plan<'a>>,
    /// A skill's chore: its skill's settings, as environment variables.
    pub settings: Vec<(String, String)>,
    /// The values taken out of its output before anything reads it (its
    /// skill's secrets).
    pub secrets: Vec<String>,
}

#[derive(Debug)]
pub struct Report {
    /// What the script did, its output redacted.
    pub outcome: Outcome,
    /// Entries (files, directories, links, fifos, sockets, devices) added,
    /// removed or changed under the touches, and lookups that failed.
    pub files_changed: u64,
    pub bytes_changed: u64,
    /// Killed at the damage cap.
    pub over_cap: bool,
    /// Stopped because the ladder reached Freeze or Cut while it ran.
    pub halted: bool,
    /// It tried to write outside its touches (the cage refused the write).
    pub outside_touches: bool,
    /// The line of (redacted) output that reported the refused write.
    pub refused_write: Option<String>,
    /// Entries that left the run with setuid, setgid or file capabilities
    /// they did not have before, and what was done about each.
    pub gained_privilege: Vec<Gained>,
}

#[derive(Debug)]
pub enum RunError {
    /// The rules forbid this run; the reason is for the user.
    Refused(String),
    Cage(cage::CageError),
    Exec(exec::ExecError),
}

impl std::fmt::Display for RunError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RunError::Refused(r) => f.write_str(r),
            RunError::Cage(e) => write!(f, "{e}"),
            RunError::Exec(e) => write!(f, "{e}"),
        }
    }
}

impl std::error::Error for RunError {}

/// Whether the rules let `chore` run in `mode` here (approvals aside).
pub fn admissible(chore: &Chore, mode: Mode, ctx: &Context<'_>) -> Result<(), String> {
    let h = &chore.header;
    let green_system = chore.origin == Origin::System && h.color == Color::Green;
    if !ctx.isolation && !green_system {
        return Err(NO_ISOLATION.into());
    }
    if mode == Mode::Real && h.color != Color::Green && ctx.days_installed < 7 {
        return Err(FIRST_WEEK.into());
    }
    if (h.max_files > DEFAULT_MAX_FILES || h.max_gb > DEFAULT_MAX_GB) && !ctx.cap_confirmed {
        return Err(format!(
            "{} declares a damage cap of {} files, {} GB, above the default; it runs only once you confirm it",
            h.name, h.max_files, h.max_gb
        ));
    }
    touches_allowed(h, ctx.layout)?;
    cage::reads_allowed(&h.name, &h.reads, ctx.layout)
}

/// What the cage hides from a chore: the secret paths, and the quarantine
/// unless it is one of the chore's touches (hidden, it is a mount point the
/// chore cannot replace or empty).
fn hidden(touches: &[PathBuf], layout: &Layout) -> Vec<cage::Hidden> {
    let mut hide = cage::secret_paths(layout);
    let quarantine = layout.quarantine_dir.clone();
    if quarantine.is_dir() && !touches.contains(&quarantine) {
        hide.push(cage::Hidden::Dir(quarantine));
    }
    hide
}

/// A touch may not be one of the Warden's directories or inside one, may
/// not overlap a fenced data folder either way, and may not pass through a
/// symlink (bubblewrap would bind the link's target, which nothing checked).
fn touches_allowed(h: &Header, layout: &Layout) -> Result<(), String> {
    let own = [
        &layout.state_dir,
        &layout.journal_dir,
        &layout.config_dir,
        &layout.run_dir,
        &layout.worker_config_dir,
    ];
    let fences = layout.fenced_paths();
    let quarantine = layout.quarantine_dir.clone();
    for t in &h.touches {
        if t != &quarantine && t.starts_with(&quarantine) {
            return Err(format!(
                "{} touches {}, inside the quarantine: only the quarantine itself may be a touch",
                h.name,
                t.display()
            ));
        }
        if let Some(dir) = own.iter().find(|d| t.starts_with(d)) {
            return Err(format!(
                "{} touches {}, which holds the Warden's own files",
                h.name,
                dir.display()
            ));
        }
        if let Some(f) = fences.iter().find(|f| t.starts_with(f) || f.starts_with(t)) {
            return Err(format!(
                "{} touches {}, and {} is fenced as data: no chore may touch it",
                h.name,
                t.display(),
                f.display()
            ));
        }
        let mut at = PathBuf::from("/");
        for part in t.components().skip(1) {
            at.push(part);
            if std::fs::symlink_metadata(&at).is_ok_and(|m| m.file_type().is_symlink()) {
                return Err(format!(
                    "{} touches {}, and {} is a symbolic link: a touch must be the real path",
                    h.name,
                    t.display(),
                    at.display()
                ));
            }
        }
        if let Some(why) = cage::swappable_ancestor(t) {
            return Err(format!(
                "{} touches {}, and {why}: another account could swap the path for a link before the cage binds it",
                h.name,
                t.display()
            ));
        }
    }
    Ok(())
}

/// Runs `chore` in `mode`. The caller journals the report, raises the
/// ladder signal for `outside_touches`, and writes the receipt.
pub fn run(chore: &Chore, mode: Mode, ctx: &Context<'_>) -> Result<Report, RunError> {
    admissible(chore, mode, ctx).map_err(RunError::Refused)?;
    let h = &chore.header;
    let mut env = h.env.clone();
    env.extend(ctx.settings.iter().cloned());
    let mut args = vec!["-c".to_string(), chore.script.clone(), h.name.clone()];
    if mode == Mode::DryRun {
        env.push(("AROMBA_DRY_RUN".into(), "1".into()));
        args.push("--dry-run".into());
    }
    let stop = ctx.halt.clone().unwrap_or_default();
    if stop.load(Ordering::SeqCst) {
        return Err(RunError::Refused(format!(
            "{} was stopped before it started (the ladder moved to Freeze or above)",
            h.name
        )));
    }
    let bounds = Bounds {
        timeout: ctx.timeout,
        max_output_bytes: 1 << 20,
        low_priority: true,
        keep_fd: None,
        stop: Some(stop.clone()),
        // Killed at its first write outside the touches (all of them, in a
        // dry run): the cage refuses it, and the kernel counts the refusal
        // (`cage::refused`).
        tripwire: ctx.isolation.then(exec::Tripwire::new),
        // The cage makes its own (`cage::limits`).
        cgroup: Default::default(),
        known_secrets: ctx.secrets.clone(),
    };
    // A dry run gets no writable path at all.
    let touches = if mode == Mode::Real {
        h.touches.clone()
    } else {
        Vec::new()
    };
    // It sees its touches still, read-only: it reports what it would change.
    let mut reads = h.reads.clone();
    if mode == Mode::DryRun {
        reads.extend(h.touches.iter().cloned());
    }
    let before = tree::walk(&h.touches);
    if before.over_bounds {
        return Err(RunError::Refused(format!(
            "{}'s touches hold more than the damage cap can count ({} entries, {} levels deep): it does not run",
            h.name,
            tree::MAX_ENTRIES,
            tree::MAX_DEPTH
        )));
    }
    // Every privileged file the touches hold, held by descriptor: found
    // after the run however it was renamed or linked.
    let pinned = tree::pin_privileged(&h.touches, &before)
        .map_err(|why| RunError::Refused(format!("{}: {why}: it does not run", h.name)))?;
    let before = Arc::new(before);
    let max_bytes = h.max_gb.saturating_mul(1 << 30);
    let over_cap = Arc::new(AtomicBool::new(false));
    let done = Arc::new(AtomicBool::new(false));
    let watcher = {
        let (stop, over, done) = (stop.clone(), over_cap.clone(), done.clone());
        let (before, watched, interval, max_files) = (
            before.clone(),
            h.touches.clone(),
            ctx.cap_interval,
            h.max_files,
        );
        std::thread::spawn(move || {
            let mut next = std::time::Instant::now() + interval;
            while !done.load(Ordering::SeqCst) {
                // Short naps, so the run's end is noticed at once.
                std::thread::sleep(Duration::from_millis(20));
                if std::time::Instant::now() < next {
                    continue;
                }
                next += interval;
                let now = tree::walk(&watched);
                let (files, bytes) = changes(&before, &now);
                if now.over_bounds || files > max_files || bytes > max_bytes {
                    over.store(true, Ordering::SeqCst);
                    stop.store(true, Ordering::SeqCst);
                    return;
                }
            }
        })
    };
    let outcome = if ctx.isolation {
        let skill = matches!(chore.origin, Origin::Skill(_));
        let caged = |way: Option<egress::Way>| {
            let mut env = env.clone();
            env.extend(way.map(|w| w.env()).unwrap_or_default());
            let spec = CageSpec {
                touches: touches.clone(),
                reads: reads.clone(),
                // A skill's chore never shares the host's network: it
                // reaches its manifest's hosts through the Warden's proxy,
                // or nothing.
                network: h.network && !skill,
                join_net: way.map(|w| w.netns),
                env,
                hide: hidden(&h.touches, ctx.layout),
                nothing_writable: false,
            };
            cage::run_caged(&spec, Path::new("/bin/sh"), &args, &bounds).map_err(RunError::Cage)
        };
        match &ctx.egress {
            // A dry run is made without a tap, whatever the colour: it
            // gets the namespace and no proxy — no network at all.
            Some(plan) if skill && h.network && mode == Mode::Real && !plan.hosts.is_empty() => {
                egress::with_proxy(plan, |way| caged(Some(way)))
                    .map_err(RunError::Refused)
                    .and_then(|r| r)
            }
            _ => caged(None),
        }
    } else {
        // No namespaces here: only green system chores get this far.
        exec::run_program(Path::new("/bin/sh"), &args, &env, &bounds).map_err(RunError::Exec)
    };
    done.store(true, Ordering::SeqCst);
    let _ = watcher.join();
    let outcome = outcome?;
    let after = tree::walk(&h.touches);
    let (files_changed, bytes_changed) = changes(&before, &after);
    // What slipped past the filter: the walk sees every entry anyway.
    let mut gained_privilege = tree::strip_gained(&h.touches, &before, &after);
    // And what was privileged before and the run changed, wherever it is.
    gained_privilege.extend(tree::strip_touched(pinned));
    let outside_touches = bounds.tripwire.as_ref().is_some_and(|t| t.was_hit());
    // Decided on the kernel's count; named, for the person, by the tool's
    // own error line when it printed one (as the redactor left it).
    let refused_write = bounds.tripwire.as_ref().filter(|t| t.was_hit()).map(|t| {
        [outcome.stderr.text(), outcome.stdout.text()]
            .into_iter()
            .flat_map(|s| s.split(|&c| c == b'\n'))
            .find(|l| l.windows(EROFS_MESSAGE.len()).any(|w| w == EROFS_MESSAGE))
            .map(|l| String::from_utf8_lossy(l).into_owned())
            .unwrap_or_else(|| {
                format!(
                    "{} write(s) the cage refused (the chore printed no error for them)",
                    t.refused()
                )
            })
    });
    let over = over_cap.load(Ordering::SeqCst);
    Ok(Report {
        halted: !over
            && outcome.stopped
            && ctx.halt.as_ref().is_some_and(|h| h.load(Ordering::SeqCst)),
        over_cap: over
            || after.over_bounds
            || files_changed > h.max_files
            || bytes_changed > max_bytes,
        outside_touches,
        refused_write,
        gained_privilege,
        files_changed,
        bytes_changed,
        outcome,
    })
}
