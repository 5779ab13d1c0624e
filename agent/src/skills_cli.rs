//! `aromba skill install|list|show|set|remove`, from a root terminal. The
//! Warden reads and verifies the bundle itself; this shows what it says
//! the skill asks for — what more than the version installed, first —
//! asks, takes the PIN when it has hosts not granted before, and asks the
//! Warden to install exactly the bundle it showed.

use crate::terminal::{confirmed, read_hidden, read_secret_line};
use crate::warden_client::control;
use aromba_warden_proto::{Request, Response, printable};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

fn fail(why: impl std::fmt::Display) -> ExitCode {
    eprintln!("aromba: {why}");
    ExitCode::from(1)
}

/// The most a bundle is (the Warden's bound): a download stops there.
const MAX_BUNDLE: usize = 1 << 20;

/// `aromba skill install URL`: the bundle downloaded into a folder of
/// root's alone, then installed as a file is (the Warden verifies it).
pub fn install_from(root: Option<PathBuf>, url: &str, yes: bool) -> ExitCode {
    let Some((folder, file)) = url.rsplit_once('/') else {
        return fail(format!("{url} names no file"));
    };
    let plain = !file.is_empty()
        && file.len() <= 128
        && file
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'));
    if !plain || file.starts_with('.') {
        return fail(format!(
            "{url} does not end in a plain file name (letters, digits, . _ -)"
        ));
    }
    let base = match crate::config::BaseUrl::parse(folder) {
        Ok(b) => b,
        Err(e) => return fail(e.replace("release URL", "skill's URL")),
    };
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(r) => r,
        Err(e) => return fail(format!("cannot start: {e}")),
    };
    out!("downloading {url}");
    let bytes = runtime.block_on(async {
        tokio::time::timeout(
            crate::download::DEADLINE,
            crate::download::one_file(&aromba_relay_proto::client::Direct, &base, file, MAX_BUNDLE),
        )
        .await
        .map_err(|_| crate::download::DownloadError::Timeout)?
    });
    let bytes = match bytes {
        Ok(b) => b,
        Err(e) => return fail(format!("the skill could not be downloaded: {e}")),
    };
    let dir = match crate::lifecycle::fresh_folder() {
        Ok(d) => d,
        Err(e) => return fail(e),
    };
    let _cleanup = crate::lifecycle::Cleanup(dir.clone());
    let path = dir.join("bundle.skill");
    if let Err(e) = std::fs::write(&path, &bytes) {
        return fail(format!("cannot write {}: {e}", path.display()));
    }
    install(root, &path, yes)
}

/// The PIN, after saying `why`, when `needed`.
fn pin_if(needed: bool, why: &str) -> Result<Option<aromba_warden_proto::Pin>, ExitCode> {
    if !needed {
        return Ok(None);
    }
    out!("{why}");
    read_secret_line("PIN: ").map(|p| Some(p.into()))
}

/// `aromba skill install FILE`.
pub fn install(root: Option<PathBuf>, file: &Path, yes: bool) -> ExitCode {
    let path = match std::path::absolute(file) {
        Ok(p) => p.to_string_lossy().into_owned(),
        Err(e) => return fail(format!("{}: {e}", file.display())),
    };
    let shown = match control(
        root.clone(),
        &Request::SkillCheck { path: path.clone() },
        "skill install",
    ) {
        Ok(r) => r,
        Err(code) => return code,
    };
    let (name, version, sha256, needs_pin) = match shown {
        Response::SkillShown {
            name,
            version,
            sha256,
            text,
            installed,
            widening,
            needs_pin,
        } => {
            match &installed {
                Some(old) if widening.is_empty() => out!(
                    "Update {name} from {old} to {version}: it asks for nothing more than {old} did.\n"
                ),
                Some(old) => {
                    out!(
                        "Update {name} from {old} to {version}: this is a new install, because it asks for more than {old} did:"
                    );
                    for w in &widening {
                        out!("  + {}", printable(w.as_bytes()));
                    }
                    out!("");
                }
                None => out!("Install the skill {name} {version}?\n"),
            }
            out!("{}\n", printable(text.as_bytes()));
            (name, version, sha256, needs_pin)
        }
        Response::Refused { reason, .. } => return fail(format!("not installed: {reason}")),
        other => return fail(format!("unexpected answer from the Warden: {other:?}")),
    };
    if let Err(why) = confirmed(&format!("Install {name} {version}?"), yes, "skill install") {
        return fail(why);
    }
    let pin = match pin_if(
        needs_pin,
        "It talks to hosts on the network: your PIN gives it that.",
    ) {
        Ok(p) => p,
        Err(code) => return code,
    };
    match control(
        root,
        &Request::SkillInstall { path, sha256, pin },
        "skill install",
    ) {
        Ok(Response::Noted { journal_seq }) => {
            out!("{name} {version} is installed (journal seq {journal_seq}).");
            ExitCode::SUCCESS
        }
        Ok(Response::Refused { reason, .. }) => fail(format!("not installed: {reason}")),
        Ok(other) => fail(format!("unexpected answer from the Warden: {other:?}")),
        Err(code) => code,
    }
}

/// `aromba skill list` (`name = None`) and `aromba skill show NAME`.
pub fn list(root: Option<PathBuf>, name: Option<&str>) -> ExitCode {
    let (skills, refused) = match control(root, &Request::Skills, "skill list") {
        Ok(Response::Skills { skills, refused }) => (skills, refused),
        Ok(other) => return fail(format!("unexpected answer from the Warden: {other:?}")),
        Err(code) => return code,
    };
    if let Some(name) = name {
        let Some(s) = skills.iter().find(|s| s.name == name) else {
            return fail(format!("no skill named {name} is installed"));
        };
        out!("{}\n", printable(s.text.as_bytes()));
        out!("Network now: {}", printable(s.network.as_bytes()));
        for t in &s.settings {
            out!(
                "Setting {} ({}): {}",
                printable(t.name.as_bytes()),
                printable(t.kind.as_bytes()),
                printable(t.shown.as_bytes())
            );
        }
        return ExitCode::SUCCESS;
    }
    if skills.is_empty() && refused.is_empty() {
        out!("No skill is installed.");
    }
    for s in &skills {
        out!(
            "{} {} (from {}) — network: {}",
            s.name,
            s.version,
            s.publisher,
            printable(s.network.as_bytes())
        );
    }
    for r in &refused {
        out!("refused: {}", printable(r.as_bytes()));
    }
    if refused.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    }
}

/// `aromba skill remove NAME`.
pub fn remove(root: Option<PathBuf>, name: &str, yes: bool) -> ExitCode {
    if let Err(why) = confirmed(
        &format!("This removes the skill {name}, its chores and their records."),
        yes,
        "skill remove",
    ) {
        return fail(why);
    }
    match control(
        root,
        &Request::SkillRemove {
            name: name.to_string(),
        },
        "skill remove",
    ) {
        Ok(Response::Noted { journal_seq }) => {
            out!("{name} is removed (journal seq {journal_seq}).");
            ExitCode::SUCCESS
        }
        Ok(Response::Refused { reason, .. }) => fail(format!("not removed: {reason}")),
        Ok(other) => fail(format!("unexpected answer from the Warden: {other:?}")),
        Err(code) => code,
    }
}

/// `aromba skill set NAME SETTING [VALUE]`: a text or host setting's value
/// on the command line; a secret's typed without echo, never on the
/// command line (the shell's history and `ps` would keep it). A host
/// setting takes the PIN: the skill reaches the host it names.
pub fn set(root: Option<PathBuf>, name: &str, setting: &str, value: Option<String>) -> ExitCode {
    let skills = match control(root.clone(), &Request::Skills, "skill set") {
        Ok(Response::Skills { skills, .. }) => skills,
        Ok(other) => return fail(format!("unexpected answer from the Warden: {other:?}")),
        Err(code) => return code,
    };
    let Some(skill) = skills.iter().find(|s| s.name == name) else {
        return fail(format!("no skill named {name} is installed"));
    };
    let Some(declared) = skill.settings.iter().find(|t| t.name == setting) else {
        let names: Vec<&str> = skill.settings.iter().map(|t| t.name.as_str()).collect();
        return fail(if names.is_empty() {
            format!("{name} has no setting")
        } else {
            format!(
                "{name} has no setting named {setting}; its settings: {}",
                names.join(", ")
            )
        });
    };
    let value = match (declared.kind.as_str(), value) {
        ("secret", Some(_)) => {
            return fail(format!(
                "{setting} is a secret: it is never given on the command line, where the shell's history and ps would keep it. Run `aromba skill set {name} {setting}` and type it"
            ));
        }
        ("secret", None) => match read_hidden(&format!("{setting}: "), "value") {
            Ok(v) => v,
            Err(code) => return code,
        },
        (_, Some(v)) => v,
        (_, None) => {
            return fail(format!(
                "give {setting}'s value: aromba skill set {name} {setting} VALUE"
            ));
        }
    };
    let pin = match pin_if(
        declared.kind == "host",
        &format!("{setting} names a host {name} will talk to: your PIN allows it."),
    ) {
        Ok(p) => p,
        Err(code) => return code,
    };
    match control(
        root,
        &Request::SkillSet {
            name: name.to_string(),
            setting: setting.to_string(),
            value: aromba_warden_proto::SettingValue::new(value),
            pin,
        },
        "skill set",
    ) {
        Ok(Response::Noted { journal_seq }) => {
            out!("{name}'s {setting} is set (journal seq {journal_seq}).");
            ExitCode::SUCCESS
        }
        Ok(Response::Refused { reason, .. }) => fail(format!("not set: {reason}")),
        Ok(other) => fail(format!("unexpected answer from the Warden: {other:?}")),
        Err(code) => code,
    }
}
