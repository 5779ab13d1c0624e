//! `aromba-warden install`: checks that no other account can change the
//! Warden's trees, plants the honeypots (in the Worker's directories,
//! through descriptors, following no link), lays out the Warden's
//! directories, writes the policy rendering to `etc/policy.toml`
//! (`/etc/aromba/warden/policy.toml`) for people to read (the Warden never
//! reads it back), resets the ladder and records the integrity baseline —
//! last, over everything written before it.

#![forbid(unsafe_code)]

use crate::integrity::Baseline;
use crate::ladder::{Clock, Ladder};
use crate::layout::{Layout, make_dir};
use crate::policy;
use crate::worker_dirs;
use std::path::Path;
use std::path::PathBuf;

/// The mode of a honeypot: the Worker's group may read it (it must look
/// like a secret a compromised Worker could take).
pub const HONEYPOT_MODE: u32 = 0o640;

/// What install wrote.
#[derive(Debug)]
pub struct Installed {
    pub policy: PathBuf,
    /// Honeypots planted, or found planted already as install leaves them.
    pub honeypots: Vec<PathBuf>,
    /// Honeypots not planted, and why: a link or something else where a
    /// directory must be (the Worker owns its home and could plant one). A
    /// missing honeypot never stops an install — the documented recovery
    /// from Disarm — and the Warden journals each one it cannot watch.
    pub honeypots_skipped: Vec<(PathBuf, String)>,
    pub baseline: PathBuf,
}

/// Who and what install records.
pub struct InstallOptions<'a> {
    pub layout: &'a Layout,
    /// The Warden's binary (`/proc/self/exe` when installing for real).
    pub warden_bin: &'a Path,
    pub worker_bin: &'a Path,
    /// The Worker's group, which may read the honeypots (they must look
    /// readable to a compromised Worker).
    pub worker_gid: u32,
    pub clock: std::sync::Arc<dyn Clock>,
    /// The key Telegram's Mini App launches are checked with, when root
    /// pins one other than Telegram's production key (the demo's fake).
    pub telegram_key: Option<crate::init_data::TelegramKey>,
}

/// Decoy secrets: realistic in shape, random, never valid anywhere.
pub(crate) fn decoy(path: &Path) -> std::io::Result<String> {
    use std::io::Read;
    let mut random = [0u8; 48];
    std::fs::File::open("/dev/urandom")?.read_exact(&mut random)?;
    const A: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let text: String = random
        .iter()
        .map(|b| char::from(A[usize::from(b & 63)]))
        .collect();
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    Ok(match name.as_str() {
        "credentials" => format!(
            "[default]\naws_access_key_id = AKIA{}\naws_secret_access_key = {}\n",
            text[..16].to_uppercase().replace(['+', '/'], "Q"),
            &text[..40]
        ),
        "id_ed25519" => format!(
            "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQAAAAAAAAABAAAAMwAAAAtzc2gtZW\n{text}\n-----END OPENSSH PRIVATE KEY-----\n"
        ),
        _ => format!(
            "[assistant]\napi_key = \"sk-proj-{}\"\n",
            text.replace(['+', '/'], "x")
        ),
    })
}

/// Refuses unless every directory from `/` down to each of the Warden's is
/// root's and writable by no one else (naming the one that is not), plants
/// the honeypots in the Worker's directories without following a link,
/// makes the Warden's directories, writes the policy rendering atomically
/// (a temporary file, `fsync`, then `rename`), resets the ladder and
/// records the baseline.
pub fn install(o: &InstallOptions<'_>) -> std::io::Result<Installed> {
    let layout = o.layout;
    layout.check()?;
    // First, so a refusal here (a link where a directory must be) leaves no
    // sign of an install behind: the Worker's directories are written only
    // through descriptors, each opened without following a link.
    let mut honeypots = Vec::new();
    let mut honeypots_skipped = Vec::new();
    for pot in layout.honeypots() {
        // One planted already is left as it is: replacing it under a
        // running Warden would read as the honeypot deleted.
        if worker_dirs::is_planted(&pot, o.worker_gid, HONEYPOT_MODE) {
            honeypots.push(pot);
            continue;
        }
        match worker_dirs::write_file(
            &pot,
            decoy(&pot)?.as_bytes(),
            o.worker_gid,
            HONEYPOT_MODE,
            0o755,
        ) {
            Ok(()) => honeypots.push(pot),
            Err(e @ worker_dirs::WorkerDirError::Refused { .. }) => {
                honeypots_skipped.push((pot, e.to_string()));
            }
            Err(e) => return Err(e.into()),
        }
    }
    // The Warden's own trees, checked above and again as they are made:
    // nobody but root can change them, so paths are safe to use in them.
    make_dir(&layout.config_dir, 0o755)?;
    make_dir(&layout.state_dir, 0o700)?;
    make_dir(&layout.journal_dir, 0o755)?;
    // Where chores of ours move what they take away (never deleted outright).
    make_dir(&layout.quarantine_dir, 0o700)?;
    let path = layout.policy_file();
    crate::atomic_file::replace(&path, policy::render().as_bytes(), 0o644)?;
    let fences = layout.fences_file();
    if std::fs::symlink_metadata(&fences).is_err() {
        std::fs::write(&fences, "")?;
    }
    crate::approvals::server_id(layout)?;
    // Before the baseline: the record is one of the state records it
    // covers.
    crate::telegram::pin_key_at_install(layout, o.telegram_key.as_ref())?;
    Ladder::reset(layout.ladder_file(), o.clock.clone()).map_err(std::io::Error::other)?;
    Baseline::take(layout, o.warden_bin, o.worker_bin, o.clock.now())?.write(layout)?;
    Ok(Installed {
        policy: path,
        honeypots,
        honeypots_skipped,
        baseline: layout.baseline_file(),
    })
}
