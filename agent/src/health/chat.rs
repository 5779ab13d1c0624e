//! `/status`, `/disk`, `/services`, `/updates`, `/digest`.

use crate::daemon::Daemon;
use crate::daemon::chat::{Reply, read};

pub async fn answer(daemon: &Daemon, name: &str, _args: &[String]) -> Reply {
    let out = match name {
        "disk" => read(daemon, "df", &["-P", "-h", "-T"]).await,
        _ => read(daemon, "uptime", &[]).await,
    };
    match out {
        Ok(text) => text.into(),
        Err(e) => e.into(),
    }
}
