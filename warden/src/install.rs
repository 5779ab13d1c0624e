//! `aromba-warden install`: lays out the Warden's directories and writes the
//! policy rendering to `etc/policy.toml` (`/etc/aromba/warden/policy.toml`),
//! for people to read. The Warden never reads it back.

#![forbid(unsafe_code)]

use crate::layout::Layout;
use crate::policy;
use std::io::Write;
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::PathBuf;

/// What install wrote.
#[derive(Debug)]
pub struct Installed {
    pub policy: PathBuf,
}

/// Creates the directories and writes the policy rendering atomically
/// (a temporary file, `fsync`, then `rename`).
pub fn install(layout: &Layout) -> std::io::Result<Installed> {
    for dir in [&layout.config_dir, &layout.state_dir, &layout.journal_dir] {
        std::fs::create_dir_all(dir)?;
    }
    std::fs::set_permissions(&layout.config_dir, std::fs::Permissions::from_mode(0o755))?;
    std::fs::set_permissions(&layout.state_dir, std::fs::Permissions::from_mode(0o700))?;
    let path = layout.config_dir.join("policy.toml");
    let tmp = layout.config_dir.join(".policy.toml.new");
    let _ = std::fs::remove_file(&tmp);
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o644)
        .open(&tmp)?;
    f.write_all(policy::render().as_bytes())?;
    f.sync_all()?;
    std::fs::rename(&tmp, &path)?;
    std::fs::File::open(&layout.config_dir)?.sync_all()?;
    Ok(Installed { policy: path })
}
