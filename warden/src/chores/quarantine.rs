//! The quarantine: what chores of ours take away goes to
//! `/var/lib/aromba/quarantine/<chore>-<time>/`, never deleted outright.
//! A quarantined folder is purged after 7 days — never in prod mode, where
//! nothing is deleted (the prod-mode flag is a file of the Warden's state).

#![forbid(unsafe_code)]

use crate::layout::Layout;
use std::path::PathBuf;
use std::time::{Duration, SystemTime};

pub const KEEP: Duration = Duration::from_secs(7 * 86_400);

pub fn dir(layout: &Layout) -> PathBuf {
    layout.worker_home.join("quarantine")
}

/// The prod-mode flag: set by the first scan, cleared only by a PIN action.
pub fn prod_mode_file(layout: &Layout) -> PathBuf {
    layout.state_dir.join("prod-mode")
}

/// Removes quarantined folders older than [`KEEP`] at `now`, unless in prod
/// mode; returns what it removed.
pub fn purge(layout: &Layout, now: SystemTime) -> std::io::Result<Vec<PathBuf>> {
    if prod_mode_file(layout).exists() {
        return Ok(Vec::new());
    }
    let mut purged = Vec::new();
    let entries = match std::fs::read_dir(dir(layout)) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(purged),
        Err(e) => return Err(e),
    };
    for entry in entries {
        let entry = entry?;
        let meta = std::fs::symlink_metadata(entry.path())?;
        if !meta.is_dir() {
            continue;
        }
        let age = now.duration_since(meta.modified()?).unwrap_or_default();
        if age > KEEP {
            std::fs::remove_dir_all(entry.path())?;
            purged.push(entry.path());
        }
    }
    Ok(purged)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn purges_after_seven_days_but_never_in_prod_mode() {
        let root = std::env::temp_dir().join(format!("aromba-quarantine-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        let layout = Layout::rooted(&root);
        std::fs::create_dir_all(dir(&layout).join("apt-clean-1")).unwrap();
        std::fs::create_dir_all(&layout.state_dir).unwrap();
        let soon = SystemTime::now() + Duration::from_secs(86_400);
        assert!(purge(&layout, soon).unwrap().is_empty());
        let later = SystemTime::now() + KEEP + Duration::from_secs(60);
        std::fs::write(prod_mode_file(&layout), "").unwrap();
        assert!(
            purge(&layout, later).unwrap().is_empty(),
            "prod mode deletes nothing"
        );
        std::fs::remove_file(prod_mode_file(&layout)).unwrap();
        assert_eq!(purge(&layout, later).unwrap().len(), 1);
        assert!(!dir(&layout).join("apt-clean-1").exists());
        std::fs::remove_dir_all(&root).unwrap();
    }
}
