//! The Worker's small records in its home (which events were told, what
//! the schedule handled, the digest's time, undo offers): JSON, read as a
//! default when missing or unreadable, written whole (a temporary file
//! renamed over the old one).

use super::Daemon;
use serde::Serialize;
use serde::de::DeserializeOwned;

/// The record `name`, or `None` when it is missing or unreadable.
pub fn read<T: DeserializeOwned>(daemon: &Daemon, name: &str) -> Option<T> {
    read_in(&daemon.paths.home, name)
}

/// The record `name` in `home`, before there is a daemon to ask.
pub fn read_in<T: DeserializeOwned>(home: &std::path::Path, name: &str) -> Option<T> {
    let bytes = std::fs::read(home.join(name)).ok()?;
    serde_json::from_slice(&bytes).ok()
}

/// The record `name`, or its default.
pub fn load<T: DeserializeOwned + Default>(daemon: &Daemon, name: &str) -> T {
    read(daemon, name).unwrap_or_default()
}

/// Writes the record `name` whole.
pub fn save<T: Serialize>(daemon: &Daemon, name: &str, value: &T) -> Result<(), String> {
    let path = daemon.paths.home.join(name);
    let tmp = path.with_extension("tmp");
    let bytes = serde_json::to_vec(value).map_err(|e| e.to_string())?;
    std::fs::write(&tmp, bytes)
        .and_then(|()| std::fs::rename(&tmp, &path))
        .map_err(|e| format!("{}: {e}", path.display()))
}
