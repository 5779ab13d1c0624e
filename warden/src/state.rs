//! The Warden's state records — the files of its state directory that the
//! integrity baseline covers (the pinned relay key, the PIN's hash, the
//! confirmed damage caps, the prod-mode flag) — and the one way the Warden
//! changes one of them itself: check that every record still matches the
//! baseline, write the record atomically, then re-take the baseline's
//! hashes of the records. A record changed by anything else is still an
//! integrity mismatch; a change the Warden makes never is, and one made on
//! top of a tampered state is refused rather than laundered into the
//! baseline.

#![forbid(unsafe_code)]

use crate::integrity::{Baseline, Mismatch, Watched};
use crate::layout::Layout;
use std::path::PathBuf;

#[derive(Debug)]
pub enum StateError {
    /// A record name that is not a plain file name of the state directory.
    BadName(String),
    /// The records no longer match the baseline: something else changed
    /// them, so the Warden will not re-take it.
    Tampered(String),
    Io {
        what: String,
        source: std::io::Error,
    },
}

impl std::fmt::Display for StateError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            StateError::BadName(n) => write!(f, "{n:?} is not a state record's name"),
            StateError::Tampered(why) => write!(
                f,
                "the Warden's state records do not match the baseline ({why}); nothing was changed"
            ),
            StateError::Io { what, source } => write!(f, "cannot {what}: {source}"),
        }
    }
}

impl std::error::Error for StateError {}

fn io(what: String) -> impl FnOnce(std::io::Error) -> StateError {
    move |source| StateError::Io { what, source }
}

fn record_path(layout: &Layout, name: &str) -> Result<PathBuf, StateError> {
    let plain = !name.is_empty()
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_' || b == b'.')
        && !name.starts_with('.')
        && !name.ends_with(".new");
    let reserved = [
        layout.ladder_file(),
        crate::pin::attempts_file(layout),
        layout.baseline_file(),
    ];
    let path = layout.state_dir.join(name);
    if !plain || reserved.contains(&path) {
        return Err(StateError::BadName(name.to_string()));
    }
    Ok(path)
}

/// A state record's bytes; `None` when it does not exist.
pub fn read(layout: &Layout, name: &str) -> Result<Option<Vec<u8>>, StateError> {
    let path = record_path(layout, name)?;
    match std::fs::read(&path) {
        Ok(b) => Ok(Some(b)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(StateError::Io {
            what: format!("read {}", path.display()),
            source: e,
        }),
    }
}

/// Writes (`Some`) or removes (`None`) one record and re-takes the
/// baseline, on disk and in `baseline` (the copy the running Warden checks
/// against). Without a baseline (not installed) only the record changes.
pub fn change(
    layout: &Layout,
    baseline: &mut Option<Baseline>,
    name: &str,
    bytes: Option<&[u8]>,
) -> Result<(), StateError> {
    let path = record_path(layout, name)?;
    if let Some(b) = baseline.as_ref() {
        let bad: Vec<Mismatch> = b
            .check(layout)
            .into_iter()
            .filter(|m| m.what == Watched::StateRecords)
            .collect();
        if !bad.is_empty() {
            return Err(StateError::Tampered(crate::integrity::said(&bad)));
        }
    }
    match bytes {
        Some(bytes) => {
            crate::atomic_file::replace(&path, bytes, 0o600)
                .map_err(io(format!("replace {}", path.display())))?;
        }
        None => match std::fs::remove_file(&path) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => {
                return Err(StateError::Io {
                    what: format!("remove {}", path.display()),
                    source: e,
                });
            }
        },
    }
    sync_dir(layout)?;
    if let Some(b) = baseline.as_mut() {
        // On disk first: the copy in memory changes only once the new
        // baseline is durable, so the two never disagree.
        let mut next = b.clone();
        next.retake_state(layout)
            .and_then(|()| next.write(layout))
            .map_err(io("re-take the baseline".into()))?;
        sync_dir(layout)?;
        *b = next;
    }
    Ok(())
}

fn sync_dir(layout: &Layout) -> Result<(), StateError> {
    std::fs::File::open(&layout.state_dir)
        .and_then(|d| d.sync_all())
        .map_err(io(format!("sync {}", layout.state_dir.display())))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn installed(name: &str) -> (Layout, Baseline) {
        let root = std::env::temp_dir().join(format!("aromba-state-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        let layout = Layout::rooted(&root);
        std::fs::create_dir_all(&layout.state_dir).unwrap();
        std::fs::create_dir_all(&layout.config_dir).unwrap();
        std::fs::write(
            layout.config_dir.join("policy.toml"),
            crate::policy::render(),
        )
        .unwrap();
        std::fs::write(layout.state_dir.join("server-id"), "abc\n").unwrap();
        let bin = std::path::Path::new("/proc/self/exe");
        let b = Baseline::take(&layout, bin, bin, 1).unwrap();
        b.write(&layout).unwrap();
        (layout, b)
    }

    #[test]
    fn a_change_the_warden_makes_keeps_the_baseline_true() {
        let (layout, b) = installed("retake");
        let mut baseline = Some(b);
        change(&layout, &mut baseline, "pin", Some(b"hash")).unwrap();
        assert!(baseline.as_ref().unwrap().check(&layout).is_empty());
        let on_disk = Baseline::read(&layout).unwrap().unwrap();
        assert_eq!(Some(on_disk), baseline);
        change(&layout, &mut baseline, "pin", None).unwrap();
        assert!(baseline.as_ref().unwrap().check(&layout).is_empty());
        assert_eq!(read(&layout, "pin").unwrap(), None);
        let _ = std::fs::remove_dir_all(layout.state_dir.parent().unwrap());
    }

    #[test]
    fn refuses_to_launder_a_record_changed_behind_its_back() {
        let (layout, b) = installed("tampered");
        let mut baseline = Some(b);
        std::fs::write(layout.state_dir.join("server-id"), "evil\n").unwrap();
        let err = change(&layout, &mut baseline, "pin", Some(b"hash")).unwrap_err();
        assert!(matches!(err, StateError::Tampered(_)), "{err}");
        assert_eq!(read(&layout, "pin").unwrap(), None, "nothing written");
        assert!(!baseline.as_ref().unwrap().check(&layout).is_empty());
        let _ = std::fs::remove_dir_all(layout.state_dir.parent().unwrap());
    }

    #[test]
    fn refuses_names_that_are_not_plain_records() {
        let (layout, b) = installed("names");
        let mut baseline = Some(b);
        for bad in [
            "../etc/passwd",
            "ladder.json",
            "baseline.json",
            "pin-attempts.json",
            "",
            ".x",
            "a/b",
            "pin.new",
        ] {
            assert!(
                matches!(
                    change(&layout, &mut baseline, bad, Some(b"x")),
                    Err(StateError::BadName(_))
                ),
                "{bad}"
            );
        }
        let _ = std::fs::remove_dir_all(layout.state_dir.parent().unwrap());
    }
}
