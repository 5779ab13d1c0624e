//! The honeypots: decoy secrets planted in the Worker's directories
//! (`Layout::honeypots`), watched from before the Worker's socket accepts
//! anything.
//!
//! Only an open or a read of one is a honeypot read. A honeypot deleted or
//! moved (the Worker owns the directories they are in, so it can) is an
//! integrity failure of its own kind, said so, and the honeypot is planted
//! again and watched again at once; one that was moved stays watched where
//! it went. A found one is watched through its directory's descriptor
//! (`/proc/self/fd/N/name`, the last name not followed), so a link planted
//! on its way never makes the Warden watch a file of root's, whose owner's
//! own reads would then pass for the Worker's; a new planting is watched
//! through its own descriptor while it is still root's alone, before its
//! mode lets the Worker open it. Each honeypot's directory is watched for
//! its names too: a delete shows there even while a descriptor of the
//! Worker's holds the file (which holds back the file's own event).
//! Something in a honeypot's way (a link, a file, a directory) is
//! tampering for as long as it lasts; one that cannot be planted for the
//! system's reasons (a full disk) is left unwatched and journaled, never a
//! reason to stop. Signals are bounded (once a window for each honeypot,
//! or whenever the ladder is below Cut), so a loop of the Worker's never
//! has root write a journal line for each of its turns.

#![forbid(unsafe_code)]

use super::event::Event;
use super::{Shared, journal, raise};
use crate::chores::snapshot::safe_dir::{Dir, Ids, Sub, ids};
use crate::signal::Signal;
use crate::system::{Inotify, Touched};
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use crate::install::HONEYPOT_MODE;

/// Moved honeypots kept watched where they went, at most: a Worker moving
/// them aside in a loop must not grow root's inotify watches (counted per
/// uid, shared with every root daemon) without end.
const MAX_MOVED_WATCHED: usize = 8;

/// Times one honeypot is planted again in a window, at most; past that it
/// waits for the next integrity tick, said once.
const MAX_REPLANTS: u32 = 3;

/// One honeypot's tampering in the current window.
#[derive(Default)]
struct Tampering {
    since: u64,
    count: u32,
}

/// The directory a honeypot is in, watched for its names
/// ([`Inotify::watch_entries_of`]).
struct WatchedDir {
    wd: i32,
    /// The honeypot's directory as the layout names it.
    path: PathBuf,
}

pub(crate) struct Honeypots {
    inotify: Inotify,
    watched: Mutex<Vec<Watched>>,
    /// Honeypots not watched now (could not be planted, or waiting past
    /// the re-plant bound): tried again on each integrity tick.
    unwatched: Mutex<Vec<PathBuf>>,
    tampering: Mutex<std::collections::HashMap<PathBuf, Tampering>>,
    /// When each honeypot's last read was signalled.
    reads: Mutex<std::collections::HashMap<PathBuf, u64>>,
    dirs: Mutex<Vec<WatchedDir>>,
    /// The Worker's group.
    gid: u32,
    /// Whether a missing one is planted (only once installed).
    plant: bool,
    /// Held through each planting; true once the Warden stopped, after
    /// which nothing is planted (uninstall removes the honeypots next).
    stopped: Mutex<bool>,
}

struct Watched {
    wd: i32,
    path: PathBuf,
    ids: Ids,
    /// Moved away from `path`: still a honeypot wherever it is.
    moved: bool,
    /// The watch was set before the Warden's own rename into place, whose
    /// move event is the first this watch reports: not the Worker's.
    own_move: bool,
}

/// What arming one honeypot came to.
pub(crate) enum Armed {
    Watched,
    /// Missing, or not as install left it: planted again, then watched.
    Planted,
    /// Planted, and gone before it was in place: the Worker (its own
    /// inotify watch on the directory shows it each planting) took it.
    /// Tampering like a delete the watch saw, not a reason to wait.
    Vanished,
    /// Not planted: something in its way that only the Worker's account
    /// (or root) could put there — a link or a file on its path, a
    /// directory at its name, its name changing each time it was looked
    /// at. Tampering, and why.
    Blocked(String),
    /// Not watched, and why (an error of the system's, not the Worker's
    /// doing: a full disk, say).
    Unwatched(String),
}

impl Honeypots {
    /// An inotify instance, with nothing watched yet.
    pub(crate) fn new(gid: u32, plant: bool) -> std::io::Result<Honeypots> {
        Ok(Honeypots {
            inotify: Inotify::new()?,
            watched: Mutex::default(),
            unwatched: Mutex::default(),
            tampering: Mutex::default(),
            reads: Mutex::default(),
            dirs: Mutex::default(),
            stopped: Mutex::default(),
            gid,
            plant,
        })
    }

    fn watched(&self) -> std::sync::MutexGuard<'_, Vec<Watched>> {
        self.watched.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// From now on nothing is planted; a planting under way is finished
    /// first (uninstall calls this, then removes the honeypots).
    pub(crate) fn stop(&self) {
        *self.stopped.lock().unwrap_or_else(|p| p.into_inner()) = true;
    }

    /// Watches the honeypot at `path`, planting it first when it is missing
    /// or not root's file as install left it.
    pub(crate) fn arm(&self, path: &Path) -> Armed {
        let stopped = self.stopped.lock().unwrap_or_else(|p| p.into_inner());
        if *stopped {
            return Armed::Unwatched("the Warden is stopping".into());
        }
        let (Some(parent), Some(name)) = (path.parent(), path.file_name()) else {
            return Armed::Unwatched("it names no file".into());
        };
        // A few tries: the Worker may swap the name while it is looked at.
        for _ in 0..3 {
            let dir = match Dir::open_path(parent) {
                Ok(Sub::Dir(d)) => Some(d),
                Ok(Sub::Missing) => None,
                Ok(Sub::Symlink) => {
                    return Armed::Blocked(format!(
                        "{} has a symbolic link on its way, so nothing is planted or watched there",
                        parent.display()
                    ));
                }
                Ok(Sub::NotDir | Sub::Elsewhere) => {
                    return Armed::Blocked(format!("{} is not a directory", parent.display()));
                }
                Err(e) => return Armed::Unwatched(e.to_string()),
            };
            let found = dir.as_ref().and_then(|d| d.lstat(name).ok().flatten());
            if let (Some(dir), Some(meta)) = (&dir, &found)
                && crate::worker_dirs::planted_as(meta, self.gid, HONEYPOT_MODE)
            {
                match self.watch_planted(path, dir, name, meta) {
                    Some(armed) => return armed,
                    None => continue,
                }
            }
            if !self.plant {
                return Armed::Unwatched("it is not planted (not installed)".into());
            }
            // Said before a temporary file is written and synced in vain,
            // as it would be on every tick while the directory stays.
            if found.as_ref().is_some_and(|m| m.is_dir()) {
                return Armed::Blocked(format!("a directory is at {}", path.display()));
            }
            return self.plant_watched(path);
        }
        Armed::Blocked("it changed each time it was looked at or watched".into())
    }

    /// Watches a planting found at `path` (through its directory's
    /// descriptor, the last name not followed). `None` when the name
    /// changed while it was watched: look again.
    fn watch_planted(
        &self,
        path: &Path,
        dir: &Dir,
        name: &std::ffi::OsStr,
        meta: &std::fs::Metadata,
    ) -> Option<Armed> {
        // Held from before the watch is made until it is listed: an event
        // of the new watch (the Worker deleting the file at once) waits for
        // the list instead of finding no watch and being dropped, the
        // honeypot then silent.
        let mut watched = self.watched();
        let wd = match dir
            .at(name)
            .and_then(|through| self.inotify.watch_opens(&through))
        {
            Ok(wd) => wd,
            // Gone since it was looked at: the next look plants it.
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return None,
            Err(e) => return Some(Armed::Unwatched(format!("it cannot be watched: {e}"))),
        };
        // The watch took whatever the name held when it was made.
        if dir.lstat(name).ok().flatten().map(|m| ids(&m)) != Some(ids(meta)) {
            watched.retain(|w| w.wd != wd);
            let _ = self.inotify.unwatch(wd);
            return None;
        }
        self.list(&mut watched, wd, path, ids(meta), false);
        if let Some(parent) = path.parent() {
            self.watch_dir(parent, dir);
        }
        Some(Armed::Watched)
    }

    /// Plants the honeypot at `path`, watched before anyone but root can
    /// open it: the watch is set on the new file while it is still root's
    /// alone (mode 0600, under a temporary name), and listed before any of
    /// its events is read (the list is held until it is in place).
    fn plant_watched(&self, path: &Path) -> Armed {
        let decoy = match crate::install::decoy(path) {
            Ok(d) => d,
            Err(e) => return Armed::Unwatched(format!("no decoy could be made: {e}")),
        };
        let mut watched = self.watched();
        let planted = crate::worker_dirs::write_file_watched(
            path,
            decoy.as_bytes(),
            self.gid,
            HONEYPOT_MODE,
            0o755,
            |dir, file| {
                let at = ids(&file.metadata()?);
                let wd = self.inotify.watch_opens_of(file)?;
                if let Some(parent) = path.parent() {
                    self.watch_dir(parent, dir);
                }
                Ok((wd, at))
            },
            |(wd, _)| {
                let _ = self.inotify.unwatch(wd);
            },
        );
        match planted {
            Ok((wd, at)) => {
                self.list(&mut watched, wd, path, at, true);
                Armed::Planted
            }
            Err(e) => planting_failed(e),
        }
    }

    /// Lists the watch `wd` of the honeypot at `path`; a watch listed for
    /// that name before is of a file no longer there (moved, or deleted
    /// while a descriptor holds it) and is marked moved.
    fn list(&self, watched: &mut Vec<Watched>, wd: i32, path: &Path, at: Ids, own_move: bool) {
        watched.retain(|w| w.wd != wd);
        for w in watched.iter_mut().filter(|w| w.path == path) {
            w.moved = true;
        }
        watched.push(Watched {
            wd,
            path: path.to_path_buf(),
            ids: at,
            moved: false,
            own_move,
        });
        self.cap_moved(watched);
        self.lock_unwatched().retain(|p| p != path);
    }

    /// Watches the honeypot's directory `parent`, open as `dir`, for its
    /// names; a watch of an earlier directory at that path is let go.
    fn watch_dir(&self, parent: &Path, dir: &Dir) {
        let Ok(wd) = self.inotify.watch_entries_of(dir.file()) else {
            return;
        };
        let mut dirs = self.dirs.lock().unwrap_or_else(|p| p.into_inner());
        let old: Vec<i32> = dirs
            .iter()
            .filter(|d| d.path == parent && d.wd != wd)
            .map(|d| d.wd)
            .collect();
        dirs.retain(|d| d.path != parent);
        for old in old {
            if !dirs.iter().any(|d| d.wd == old) {
                let _ = self.inotify.unwatch(old);
            }
        }
        dirs.push(WatchedDir {
            wd,
            path: parent.to_path_buf(),
        });
    }

    fn is_dir_watch(&self, wd: i32) -> bool {
        self.dirs
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .iter()
            .any(|d| d.wd == wd)
    }

    fn forget_dir(&self, wd: i32) {
        self.dirs
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .retain(|d| d.wd != wd);
    }

    /// Marks the watch `wd` moved; the oldest moved ones past
    /// [`MAX_MOVED_WATCHED`] are no longer watched. The path, when it was
    /// not marked already.
    fn mark_moved(&self, wd: i32) -> Option<PathBuf> {
        let mut watched = self.watched();
        let path = watched.iter_mut().find(|w| w.wd == wd).and_then(|w| {
            if std::mem::take(&mut w.own_move) {
                return None;
            }
            (!w.moved).then(|| {
                w.moved = true;
                w.path.clone()
            })
        })?;
        self.cap_moved(&mut watched);
        Some(path)
    }

    fn cap_moved(&self, watched: &mut Vec<Watched>) {
        while watched.iter().filter(|w| w.moved).count() > MAX_MOVED_WATCHED {
            let Some(at) = watched.iter().position(|w| w.moved) else {
                break;
            };
            let old = watched.remove(at);
            let _ = self.inotify.unwatch(old.wd);
        }
    }

    fn lock_unwatched(&self) -> std::sync::MutexGuard<'_, Vec<PathBuf>> {
        self.unwatched.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Counts one tampering with `path` at `now` in a window of
    /// `window_s`: whether to raise a signal (the first of the window, or
    /// any while the ladder is below Cut, where a signal moves it) and
    /// whether to plant it again (the first [`MAX_REPLANTS`]).
    fn tampered_with(&self, path: &Path, now: u64, window_s: u64, below_cut: bool) -> (bool, bool) {
        let mut all = self.tampering.lock().unwrap_or_else(|p| p.into_inner());
        let t = all.entry(path.to_path_buf()).or_default();
        if t.count == 0 || now.saturating_sub(t.since) >= window_s {
            *t = Tampering {
                since: now,
                count: 0,
            };
        }
        t.count = t.count.saturating_add(1);
        (t.count == 1 || below_cut, t.count <= MAX_REPLANTS)
    }

    /// Whether a read of `path` at `now` is signalled: the first of a
    /// window, or any while the ladder is below Cut (after the owner's
    /// resume, a read cuts again). A Worker reading in a loop would
    /// otherwise have root write a journal line for each read.
    fn read_signal_due(&self, path: &Path, now: u64, window_s: u64, below_cut: bool) -> bool {
        let mut all = self.reads.lock().unwrap_or_else(|p| p.into_inner());
        let due = below_cut
            || all
                .get(path)
                .is_none_or(|&t| now.saturating_sub(t) >= window_s);
        if due {
            all.insert(path.to_path_buf(), now);
        }
        due
    }

    fn forget(&self, wd: i32) -> Option<Watched> {
        let mut watched = self.watched();
        let at = watched.iter().position(|w| w.wd == wd)?;
        Some(watched.remove(at))
    }

    /// Honeypots no longer at the name they were planted under (their
    /// directory moved aside, say), marked moved: the caller raises and
    /// plants them again.
    fn stale(&self) -> Vec<PathBuf> {
        let mut watched = self.watched();
        let mut stale = Vec::new();
        for w in watched.iter_mut().filter(|w| !w.moved) {
            let here = match (w.path.parent(), w.path.file_name()) {
                (Some(parent), Some(name)) => match Dir::open_path(parent) {
                    Ok(Sub::Dir(d)) => d.lstat(name).ok().flatten().map(|m| ids(&m)),
                    _ => None,
                },
                _ => None,
            };
            if here != Some(w.ids) {
                w.moved = true;
                stale.push(w.path.clone());
            }
        }
        self.cap_moved(&mut watched);
        stale
    }
}

/// What a planting that failed comes to: its temporary file gone before
/// it was renamed into place is the Worker's doing (it sees each one made
/// in its directory), and so is a link, a file or a directory in its way;
/// anything else is the system's (a full disk).
fn planting_failed(e: crate::worker_dirs::WorkerDirError) -> Armed {
    use crate::worker_dirs::WorkerDirError;
    match &e {
        WorkerDirError::Refused { .. } => Armed::Blocked(e.to_string()),
        WorkerDirError::Io {
            what: "rename into place",
            source,
            ..
        } if source.kind() == std::io::ErrorKind::NotFound => Armed::Vanished,
        WorkerDirError::Io { source, .. }
            if matches!(
                source.raw_os_error(),
                Some(libc::EISDIR | libc::ENOTDIR | libc::ENOTEMPTY | libc::ELOOP)
            ) =>
        {
            Armed::Blocked(e.to_string())
        }
        WorkerDirError::Io { .. } => Armed::Unwatched(e.to_string()),
    }
}

/// Whether the ladder is below Cut, where a honeypot's signal moves it.
fn below_cut(shared: &Shared) -> bool {
    shared
        .ladder
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .step()
        < crate::ladder::Step::Cut
}

/// Arms every honeypot of the layout, before the sockets are bound; what
/// was planted again or left unwatched is journaled once the journal is
/// there ([`report_armed`]).
pub(crate) fn arm_all(
    layout: &crate::layout::Layout,
    gid: u32,
) -> (Option<Honeypots>, Vec<(PathBuf, Armed)>) {
    let plant = layout.install_evidence().is_some();
    let Ok(pots) = Honeypots::new(gid, plant) else {
        return (None, Vec::new());
    };
    let armed = layout
        .honeypots()
        .into_iter()
        .map(|p| {
            let a = pots.arm(&p);
            (p, a)
        })
        .collect();
    (Some(pots), armed)
}

/// Journals what arming found, line by line. Once installed, a honeypot
/// that had to be planted again at start (deleted or replaced while the
/// Warden was stopped) or could not be (a directory or a link put in its
/// way) is an integrity failure like one deleted while it watched: the
/// honeypots are the same from release to release, so nothing of
/// Aromba's leaves one missing.
pub(crate) fn report_armed(shared: &Shared, armed: &[(PathBuf, Armed)]) {
    let Some(pots) = shared.honeypots.as_ref() else {
        journal(shared, Event::HoneypotsUnwatched);
        return;
    };
    for (path, a) in armed {
        note(shared, path, a);
        if let Armed::Unwatched(_) | Armed::Blocked(_) | Armed::Vanished = a {
            pots.lock_unwatched().push(path.clone());
        }
        if !pots.plant {
            continue;
        }
        let what = match a {
            Armed::Watched => continue,
            Armed::Planted => format!(
                "the honeypot {} was gone or replaced when the Warden started; it is planted again",
                path.display()
            ),
            Armed::Unwatched(why) | Armed::Blocked(why) => format!(
                "the honeypot {} cannot be planted ({why}); it is not watched",
                path.display()
            ),
            Armed::Vanished => format!(
                "the honeypot {} was gone when the Warden started, and deleted again as soon as it was planted; it is planted again at the next integrity check",
                path.display()
            ),
        };
        raise(shared, None, Signal::IntegrityMismatch { what });
    }
}

fn note(shared: &Shared, path: &Path, armed: &Armed) {
    match armed {
        Armed::Watched => {}
        Armed::Planted => {
            journal(shared, Event::HoneypotPlanted { path });
        }
        Armed::Unwatched(why) | Armed::Blocked(why) => {
            journal(shared, Event::HoneypotUnwatched { path, why });
        }
        Armed::Vanished => {
            journal(
                shared,
                Event::HoneypotUnwatched {
                    path,
                    why: "deleted as soon as it was planted: planted again at the next integrity check",
                },
            );
        }
    }
}

/// A honeypot gone from where it was planted: an integrity failure (the
/// Worker's account owns the directory; nothing of Aromba removes one),
/// then planted and watched again.
///
/// One signal per honeypot a flood window, and at most [`MAX_REPLANTS`]
/// plantings (a Worker deleting one in a loop would otherwise have root
/// write journal lines and files as fast as it deletes); past that it waits
/// for the next integrity tick, said once. A planting deleted before its
/// watch is set counts as one more tampering, so a Worker racing the watch
/// is bounded and signalled the same. Nothing is planted once the Warden
/// stops serving ([`Honeypots::stop`]).
fn tampered(shared: &Shared, pots: &Honeypots, path: &Path, how: &str) {
    let mut how = how;
    loop {
        if shared.shutdown.load(std::sync::atomic::Ordering::SeqCst) {
            return;
        }
        if !tampered_once(shared, pots, path, how) {
            return;
        }
        how = "deleted as soon as it was planted again";
    }
}

/// One tampering counted, signalled and answered: whether the planting it
/// made vanished before its watch (one more tampering).
fn tampered_once(shared: &Shared, pots: &Honeypots, path: &Path, how: &str) -> bool {
    let plant = count_tampering(shared, pots, path, || {
        format!(
            "the honeypot {} was {how} (only the Worker's account or root can); it is planted again",
            path.display()
        )
    });
    if !plant {
        let mut unwatched = pots.lock_unwatched();
        if !unwatched.iter().any(|p| p == path) {
            unwatched.push(path.to_path_buf());
            drop(unwatched);
            let why = format!(
                "tampered with more than {MAX_REPLANTS} times in {} minutes: planted again at the next integrity check",
                shared.options.flood_window_s / 60
            );
            journal(shared, Event::HoneypotUnwatched { path, why: &why });
        }
        return false;
    }
    let armed = pots.arm(path);
    match armed {
        Armed::Vanished => true,
        Armed::Unwatched(_) | Armed::Blocked(_) => {
            let mut unwatched = pots.lock_unwatched();
            if !unwatched.iter().any(|p| p == path) {
                unwatched.push(path.to_path_buf());
            }
            drop(unwatched);
            note(shared, path, &armed);
            false
        }
        Armed::Watched | Armed::Planted => {
            note(shared, path, &armed);
            false
        }
    }
}

/// Waits for events on the honeypots and their directories: an open or a
/// read is a honeypot read (signalled once a window, or whenever the
/// ladder is below Cut); a delete or a move is tampering.
pub(super) fn watch_honeypots(shared: &Shared) {
    let Some(pots) = shared.honeypots.as_ref() else {
        return;
    };
    while !shared.shutdown.load(std::sync::atomic::Ordering::SeqCst) {
        let Ok(events) = pots.inotify.wait() else {
            journal(shared, Event::HoneypotsUnwatched);
            return;
        };
        // A name changed in a honeypot's directory: each honeypot is looked
        // up once the batch is read (a delete there shows even while a
        // descriptor of the Worker's holds the file, which holds back the
        // file's own event).
        let mut sweep = false;
        for (wd, touched) in events {
            // Uninstall stops serving, then removes the honeypots: none
            // is planted again behind it.
            if shared.shutdown.load(std::sync::atomic::Ordering::SeqCst) {
                return;
            }
            if touched == Touched::Overflow {
                journal(shared, Event::HoneypotEventsLost);
                continue;
            }
            if pots.is_dir_watch(wd) {
                match touched {
                    Touched::Entry | Touched::Moved | Touched::Deleted => sweep = true,
                    Touched::Unwatched => pots.forget_dir(wd),
                    _ => {}
                }
                continue;
            }
            match touched {
                Touched::Opened => {
                    let seen = pots
                        .watched()
                        .iter()
                        .find(|w| w.wd == wd)
                        .map(|w| (w.path.clone(), w.moved));
                    if let Some((path, moved)) = seen {
                        let now = shared.options.clock.now();
                        let window_s = shared.options.flood_window_s;
                        if !pots.read_signal_due(&path, now, window_s, below_cut(shared)) {
                            continue;
                        }
                        let mut path = path.to_string_lossy().into_owned();
                        if moved {
                            path.push_str(" (moved away from there)");
                        }
                        raise(shared, None, Signal::HoneypotRead { path });
                    }
                }
                Touched::Deleted => {
                    if let Some(w) = pots.forget(wd)
                        && !w.moved
                    {
                        tampered(shared, pots, &w.path, "deleted");
                    }
                }
                Touched::Moved => {
                    if let Some(path) = pots.mark_moved(wd) {
                        tampered(shared, pots, &path, "moved away");
                    }
                }
                Touched::Unwatched => {
                    pots.forget(wd);
                }
                Touched::Overflow | Touched::Entry | Touched::Other => {}
            }
        }
        if sweep {
            for path in pots.stale() {
                tampered(shared, pots, &path, "deleted, moved away or replaced");
            }
        }
    }
}

/// On each integrity tick: a honeypot no longer under its name is
/// tampering too (its directories' watches see most of that at once; this
/// is the backstop); and each one not watched is tried again (a planting
/// gone before it was in place, or something in its way, is tampering
/// again).
pub(super) fn check_honeypots(shared: &Shared) {
    let Some(pots) = shared.honeypots.as_ref() else {
        return;
    };
    for path in pots.stale() {
        tampered(shared, pots, &path, "deleted, moved away or replaced");
    }
    let waiting: Vec<PathBuf> = pots.lock_unwatched().clone();
    for path in waiting {
        if shared.shutdown.load(std::sync::atomic::Ordering::SeqCst) {
            return;
        }
        match pots.arm(&path) {
            Armed::Vanished => tampered(shared, pots, &path, "deleted as soon as it was planted"),
            Armed::Blocked(why) => blocked(shared, pots, &path, &why),
            Armed::Unwatched(_) => {}
            armed => note(shared, &path, &armed),
        }
    }
}

/// A honeypot something keeps from being planted again, found on an
/// integrity tick: tampering for as long as it lasts (a signal once a
/// window), not a silence until a restart.
fn blocked(shared: &Shared, pots: &Honeypots, path: &Path, why: &str) {
    if !pots.plant {
        return;
    }
    count_tampering(shared, pots, path, || {
        format!(
            "the honeypot {} cannot be planted again: {why} (only the Worker's account or root can put that in its way)",
            path.display()
        )
    });
}

/// Counts one tampering with `path` and raises `what` when a signal is due
/// ([`Honeypots::tampered_with`]); whether to plant it again.
fn count_tampering(
    shared: &Shared,
    pots: &Honeypots,
    path: &Path,
    what: impl FnOnce() -> String,
) -> bool {
    let now = shared.options.clock.now();
    let (signal, plant) =
        pots.tampered_with(path, now, shared.options.flood_window_s, below_cut(shared));
    if signal {
        raise(shared, None, Signal::IntegrityMismatch { what: what() });
    }
    plant
}
