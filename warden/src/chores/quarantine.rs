//! The quarantine: what chores of ours take away goes to
//! `/var/lib/aromba-warden/quarantine/<chore>-<time>/` (the layout's
//! `quarantine_dir`, in the Warden's own tree), never deleted outright.
//! A quarantined folder is purged after 7 days — never in prod mode, where
//! nothing is deleted (the prod-mode flag is a file of the Warden's state).

#![forbid(unsafe_code)]

use crate::layout::Layout;
use std::path::PathBuf;
use std::time::{Duration, SystemTime};

pub const KEEP: Duration = Duration::from_secs(7 * 86_400);

/// The prod-mode flag: set by the first scan, cleared only by a PIN action.
pub fn prod_mode_file(layout: &Layout) -> PathBuf {
    layout.state_dir.join("prod-mode")
}

/// The quarantine, once it is checked to be what install made: a real
/// directory in a tree of root's (no symbolic link, nothing another account
/// owns or can write from `/` down to it). Root moves and removes things in
/// it, so a quarantine a chore or a user could have replaced is refused.
pub fn checked_dir(layout: &Layout) -> std::io::Result<PathBuf> {
    let dir = layout.quarantine_dir.clone();
    if !std::fs::symlink_metadata(&dir)?.is_dir() {
        return Err(std::io::Error::other(format!(
            "{} is not a directory",
            dir.display()
        )));
    }
    crate::layout::check_chain(&dir)?;
    Ok(dir)
}

/// Removes quarantined folders older than [`KEEP`] at `now`, unless in prod
/// mode; returns what it removed.
pub fn purge(layout: &Layout, now: SystemTime) -> std::io::Result<Vec<PathBuf>> {
    if prod_mode_file(layout).exists() {
        return Ok(Vec::new());
    }
    if !layout.quarantine_dir.exists() {
        return Ok(Vec::new());
    }
    let quarantine = checked_dir(layout)?;
    let mut purged = Vec::new();
    let entries = match std::fs::read_dir(&quarantine) {
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
    fn a_quarantine_replaced_by_a_link_or_writable_by_others_is_refused() {
        let root =
            std::env::temp_dir().join(format!("aromba-quarantine-chk-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        let layout = Layout::rooted(&root);
        std::fs::create_dir_all(&root).unwrap();
        std::fs::create_dir_all(root.join("elsewhere/old")).unwrap();
        std::os::unix::fs::symlink(root.join("elsewhere"), &layout.quarantine_dir).unwrap();
        assert!(checked_dir(&layout).is_err());
        let later = SystemTime::now() + KEEP + Duration::from_secs(60);
        assert!(purge(&layout, later).is_err(), "no purge through a link");
        assert!(root.join("elsewhere/old").exists());
        std::fs::remove_file(&layout.quarantine_dir).unwrap();
        std::fs::create_dir_all(&layout.quarantine_dir).unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(
            &layout.quarantine_dir,
            std::fs::Permissions::from_mode(0o777),
        )
        .unwrap();
        assert!(checked_dir(&layout).is_err());
        std::fs::set_permissions(
            &layout.quarantine_dir,
            std::fs::Permissions::from_mode(0o700),
        )
        .unwrap();
        assert!(checked_dir(&layout).is_ok());
        std::fs::remove_dir_all(&root).unwrap();
    }

    #[test]
    fn purges_after_seven_days_but_never_in_prod_mode() {
        let root = std::env::temp_dir().join(format!("aromba-quarantine-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        let layout = Layout::rooted(&root);
        std::fs::create_dir_all(layout.quarantine_dir.join("apt-clean-1")).unwrap();
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
        assert!(!layout.quarantine_dir.join("apt-clean-1").exists());
        std::fs::remove_dir_all(&root).unwrap();
    }
}
