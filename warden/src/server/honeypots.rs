//! The honeypots: decoy secrets planted in the Worker's directories
//! (`Layout::honeypots`), watched from before the Worker's socket accepts
//! anything.
//!
//! Only an open or a read of one is a honeypot read. A honeypot deleted or
//! moved (the Worker owns the directories they are in, so it can) is an
//! integrity failure of its own kind, said so, and the honeypot is planted
//! again and watched again at once; one that was moved stays watched where
//! it went. Each is watched through its directory's descriptor
//! (`/proc/self/fd/N/name`, the last name not followed), so a link planted
//! on its way never makes the Warden watch a file of root's, whose owner's
//! own reads would then pass for the Worker's. One that cannot be planted
//! safely is left unwatched and journaled, never a reason to stop.

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

pub(crate) struct Honeypots {
    inotify: Inotify,
    watched: Mutex<Vec<Watched>>,
    /// Honeypots not watched now (could not be planted, or waiting past
    /// the re-plant bound): tried again on each integrity tick.
    unwatched: Mutex<Vec<PathBuf>>,
    tampering: Mutex<std::collections::HashMap<PathBuf, Tampering>>,
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
}

/// What arming one honeypot came to.
pub(crate) enum Armed {
    Watched,
    /// Missing, or not as install left it: planted again, then watched.
    Planted,
    /// Planted, and gone or replaced before its watch was set: the Worker
    /// (its own inotify watch on the directory shows it each planting) took
    /// it. Tampering like a delete the watch saw, not a reason to wait.
    Vanished,
    /// Not watched, and why.
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
        let mut planted = false;
        // A few tries: the Worker may swap the name while it is looked at.
        for _ in 0..3 {
            let dir = match Dir::open_path(parent) {
                Ok(Sub::Dir(d)) => Some(d),
                Ok(Sub::Missing) => None,
                Ok(Sub::Symlink) => {
                    return Armed::Unwatched(format!(
                        "{} has a symbolic link on its way, so nothing is planted or watched there",
                        parent.display()
                    ));
                }
                Ok(Sub::NotDir | Sub::Elsewhere) => {
                    return Armed::Unwatched(format!("{} is not a directory", parent.display()));
                }
                Err(e) => return Armed::Unwatched(e.to_string()),
            };
            let found = dir.as_ref().and_then(|d| d.lstat(name).ok().flatten());
            let as_planted = found
                .as_ref()
                .is_some_and(|m| crate::worker_dirs::planted_as(m, self.gid, HONEYPOT_MODE));
            let (Some(dir), Some(meta), true) = (dir, found, as_planted) else {
                if planted {
                    return Armed::Vanished;
                }
                if !self.plant {
                    return Armed::Unwatched("it is not planted (not installed)".into());
                }
                let decoy = match crate::install::decoy(path) {
                    Ok(d) => d,
                    Err(e) => return Armed::Unwatched(format!("no decoy could be made: {e}")),
                };
                if let Err(e) = crate::worker_dirs::write_file(
                    path,
                    decoy.as_bytes(),
                    self.gid,
                    HONEYPOT_MODE,
                    0o755,
                ) {
                    return Armed::Unwatched(e.to_string());
                }
                planted = true;
                continue;
            };
            // Held from before the watch is made until it is listed: an
            // event of the new watch (the Worker deleting the file at once)
            // waits for the list instead of finding no watch and being
            // dropped, the honeypot then silent.
            let mut watched = self.watched();
            let wd = match dir
                .at(name)
                .and_then(|through| self.inotify.watch_opens(&through))
            {
                Ok(wd) => wd,
                // Gone since it was looked at: the next look plants it, or
                // says it vanished if it was just planted.
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
                Err(e) => return Armed::Unwatched(format!("it cannot be watched: {e}")),
            };
            // The watch took whatever the name held when it was made.
            if dir.lstat(name).ok().flatten().map(|m| ids(&m)) != Some(ids(&meta)) {
                watched.retain(|w| w.wd != wd);
                let _ = self.inotify.unwatch(wd);
                continue;
            }
            watched.retain(|w| w.wd != wd);
            self.lock_unwatched().retain(|p| p != path);
            watched.push(Watched {
                wd,
                path: path.to_path_buf(),
                ids: ids(&meta),
                moved: false,
            });
            return if planted {
                Armed::Planted
            } else {
                Armed::Watched
            };
        }
        if planted {
            return Armed::Vanished;
        }
        Armed::Unwatched("it changed each time it was planted or watched".into())
    }

    /// Marks the watch `wd` moved; the oldest moved ones past
    /// [`MAX_MOVED_WATCHED`] are no longer watched. The path, when it was
    /// not marked already.
    fn mark_moved(&self, wd: i32) -> Option<PathBuf> {
        let mut watched = self.watched();
        let path = watched.iter_mut().find(|w| w.wd == wd).and_then(|w| {
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
    /// `window_s`: whether to raise a signal (the first of the window) and
    /// whether to plant it again (the first [`MAX_REPLANTS`]).
    fn tampered_with(&self, path: &Path, now: u64, window_s: u64) -> (bool, bool) {
        let mut all = self.tampering.lock().unwrap_or_else(|p| p.into_inner());
        let t = all.entry(path.to_path_buf()).or_default();
        if t.count == 0 || now.saturating_sub(t.since) >= window_s {
            *t = Tampering {
                since: now,
                count: 0,
            };
        }
        t.count = t.count.saturating_add(1);
        (t.count == 1, t.count <= MAX_REPLANTS)
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
        if let Armed::Unwatched(_) | Armed::Vanished = a {
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
            Armed::Unwatched(why) => format!(
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
        Armed::Unwatched(why) => {
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
    let now = shared.options.clock.now();
    let (signal, plant) = pots.tampered_with(path, now, shared.options.flood_window_s);
    if signal {
        raise(
            shared,
            None,
            Signal::IntegrityMismatch {
                what: format!(
                    "the honeypot {} was {how} (only the Worker's account or root can); it is planted again",
                    path.display()
                ),
            },
        );
    }
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
        Armed::Unwatched(_) => {
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

/// Waits for events on the honeypots: an open or a read is a honeypot
/// read; a delete or a move is tampering.
pub(super) fn watch_honeypots(shared: &Shared) {
    let Some(pots) = shared.honeypots.as_ref() else {
        return;
    };
    while !shared.shutdown.load(std::sync::atomic::Ordering::SeqCst) {
        let Ok(events) = pots.inotify.wait() else {
            journal(shared, Event::HoneypotsUnwatched);
            return;
        };
        for (wd, touched) in events {
            // Uninstall stops serving, then removes the honeypots: none
            // is planted again behind it.
            if shared.shutdown.load(std::sync::atomic::Ordering::SeqCst) {
                return;
            }
            match touched {
                Touched::Opened => {
                    let seen = pots
                        .watched()
                        .iter()
                        .find(|w| w.wd == wd)
                        .map(|w| (w.path.clone(), w.moved));
                    if let Some((path, moved)) = seen {
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
                Touched::Overflow => {
                    journal(shared, Event::HoneypotEventsLost);
                }
                Touched::Other => {}
            }
        }
    }
}

/// On each integrity tick: a honeypot no longer under its name (its
/// directory renamed aside makes no event on the file) is tampering too;
/// and each one not watched is tried again (a planting deleted before its
/// watch is set is tampering again).
pub(super) fn check_honeypots(shared: &Shared) {
    let Some(pots) = shared.honeypots.as_ref() else {
        return;
    };
    for path in pots.stale() {
        tampered(shared, pots, &path, "moved away or replaced");
    }
    let waiting: Vec<PathBuf> = pots.lock_unwatched().clone();
    for path in waiting {
        if shared.shutdown.load(std::sync::atomic::Ordering::SeqCst) {
            return;
        }
        match pots.arm(&path) {
            Armed::Vanished => tampered(shared, pots, &path, "deleted as soon as it was planted"),
            Armed::Unwatched(_) => {}
            armed => note(shared, &path, &armed),
        }
    }
}
