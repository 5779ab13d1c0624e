//! The skill requests: what a bundle asks for (nothing installed), its
//! install from a root terminal or on the person's approval in the Mini
//! App of a bundle the Worker downloaded from the catalogue (the bundle
//! shown must be the one installed; hosts not granted before need the
//! PIN), an update the Worker downloaded that asks for nothing more
//! (applied by itself; one that asks for more is proposed as a new
//! install), its removal (the bundle, the hosts granted and every record
//! of its chores' runs), and the list. `skills/` verifies; this file
//! decides and journals.

#![forbid(unsafe_code)]

use super::chores::{frozen, runs_dir, skill_trust};
use super::event::{Event, Outcome, Peer, ToolRun};
use super::intent::intend;
use super::owner::{check_pin, noted_outcome};
use super::{Shared, journal};
use crate::approvals::SkillFacts;
use crate::chores::run::{NO_ISOLATION, Origin};
use crate::exec::Bounds;
use crate::skills::{self, Skill};
use crate::system::PeerCred;
use aromba_warden_proto::{Response, SkillInfo};
use std::io::Read;
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

fn refuse(reason: impl Into<String>) -> Response {
    Response::Refused {
        reason: reason.into(),
        journal_seq: None,
    }
}

/// The bundle's bytes at `path`, read within the bound.
fn read_bundle(path: &str) -> Result<Vec<u8>, String> {
    let p = Path::new(path);
    if !p.is_absolute() {
        return Err(format!("{path} is not an absolute path"));
    }
    // Without blocking: a FIFO's open would wait for a writer, holding a
    // running slot (and, for an install, every other change) meanwhile.
    // What was opened is then checked to be a regular file.
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(p)
        .map_err(|e| format!("cannot open {path}: {e}"))?;
    let meta = file
        .metadata()
        .map_err(|e| format!("cannot read {path}: {e}"))?;
    if !meta.is_file() {
        return Err(format!("{path} is not a file"));
    }
    let mut bytes = Vec::new();
    file.take(skills::MAX_BUNDLE + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| format!("cannot read {path}: {e}"))?;
    if bytes.len() as u64 > skills::MAX_BUNDLE {
        return Err(format!(
            "{path} is over {} bytes: no skill bundle is that large",
            skills::MAX_BUNDLE
        ));
    }
    Ok(bytes)
}

/// Where the Worker leaves a bundle it downloaded from the catalogue
/// (`NAME.skill`): its own folder, read without following a link.
pub(super) fn worker_downloads(shared: &Shared) -> std::path::PathBuf {
    shared.options.layout.worker_home.join("skill-downloads")
}

/// The bundle the Worker downloaded for skill `name`: its bytes.
fn offered_bytes(shared: &Shared, name: &str) -> Result<Vec<u8>, String> {
    if !skills::manifest::valid_name(name) {
        return Err(format!("{name:?} is not a skill's name"));
    }
    let bytes = crate::update::read_from(
        &worker_downloads(shared),
        &format!("{name}.skill"),
        skills::MAX_BUNDLE,
    )
    .map_err(|e| format!("there is no download of the skill {name} to install: {e}"))?;
    // A file that is not a bundle is refused without a word of it: where
    // the kernel lets the Worker hard-link another's file there, the
    // bundle's parser would quote its fields (found by the attack round).
    let format = serde_json::from_slice::<serde_json::Value>(&bytes)
        .ok()
        .and_then(|v| v.get("format")?.as_str().map(str::to_owned));
    if format.as_deref() != Some(skills::BUNDLE_FORMAT) {
        return Err(format!(
            "the download of the skill {name} is not a skill bundle ({})",
            skills::BUNDLE_FORMAT
        ));
    }
    Ok(bytes)
}

/// The bundle the Worker downloaded for skill `name`, judged for an
/// install here; it must be that skill.
pub(super) fn offered(shared: &Shared, name: &str) -> Result<SkillFacts, String> {
    let judged = judge(shared, &offered_bytes(shared, name)?)?;
    if judged.skill.manifest.name != name {
        return Err(format!(
            "the download for the skill {name} holds the skill {}",
            judged.skill.manifest.name
        ));
    }
    Ok(judged)
}

/// Where an install comes from, as the journal says it.
pub(super) enum InstallOrigin {
    /// `aromba skill install` in a root terminal.
    RootTerminal,
    /// The person's approval in the Mini App, of this action id.
    Approved { action_id: String },
    /// The Worker's daily check: an update of the skill `name` asking
    /// for nothing more.
    Update { name: String },
}

impl InstallOrigin {
    pub(super) fn name(&self) -> &'static str {
        match self {
            InstallOrigin::RootTerminal => "root terminal",
            InstallOrigin::Approved { .. } => "approved in the app",
            InstallOrigin::Update { .. } => "update asking nothing more",
        }
    }
}

/// The PIN an install needs when its bundle asks for hosts not granted.
enum PinGate<'a> {
    /// Typed in a root terminal (or not).
    Given(Option<&'a str>),
    /// Checked already, with the approval that carries this install.
    Checked,
    /// None comes: an install that needs one is refused.
    None,
}

fn judge(shared: &Shared, bytes: &[u8]) -> Result<SkillFacts, String> {
    let layout = &shared.options.layout;
    let trusted = skill_trust(shared);
    let skill = Skill::verify(bytes, &trusted)?;
    let name = &skill.manifest.name;
    // The specification's rule: no isolation, no skill chore; one that
    // could never run is not installed.
    if !shared.isolation.starts_with(super::watch::ISOLATED) {
        return Err(NO_ISOLATION.into());
    }
    let installed = match skills::installed(&trusted, name) {
        None => None,
        Some(Ok(s)) => Some(s),
        // A record that no longer verifies is replaced only after it is
        // removed: `aromba skill remove` says what it held.
        Some(Err(e)) => return Err(format!("{e}; remove it first")),
    };
    if let Some(old) = &installed {
        if old.manifest.publisher != skill.manifest.publisher {
            return Err(format!(
                "{name} is installed from the publisher {}; this one is from {}. A skill of another publisher takes its name only after `aromba skill remove {name}`",
                old.manifest.publisher, skill.manifest.publisher
            ));
        }
        if old.sha256 == skill.sha256 {
            return Err(format!(
                "{name} {} is installed already",
                skill.manifest.version
            ));
        }
        if skill.manifest.version <= old.manifest.version {
            return Err(format!(
                "{name} {} is installed; {} is not newer, and a skill only moves up",
                old.manifest.version, skill.manifest.version
            ));
        }
    } else if skills::installed_names(layout).len() >= skills::MAX_INSTALLED {
        return Err(format!(
            "{} skills are installed, the most one server holds",
            skills::MAX_INSTALLED
        ));
    }
    // Its chores may take no name another chore has here.
    let (chores, _) = crate::chores::catalog::all(layout, &trusted);
    for (header, _) in &skill.chores {
        if let Some(other) = chores
            .iter()
            .find(|c| c.header.name == header.name && c.origin != Origin::Skill(name.clone()))
        {
            return Err(format!(
                "its chore {} has the name of {}",
                header.name,
                other.origin.described()
            ));
        }
    }
    let widening = installed
        .as_ref()
        .map(|old| skill.widening(old))
        .unwrap_or_default();
    let granted = skills::network_granted(&trusted, name);
    let settings = skills::settings(&trusted, &skill);
    let needs_pin = skill
        .host_addresses(&settings)
        .iter()
        .flatten()
        .any(|a| !granted.contains(a));
    Ok(SkillFacts {
        skill,
        installed,
        widening,
        needs_pin,
    })
}

/// `aromba skill install` before it asks: what the bundle at `path` asks.
pub(super) fn check(shared: &Shared, path: &str) -> Response {
    let judged = match read_bundle(path).and_then(|b| judge(shared, &b)) {
        Ok(j) => j,
        Err(why) => return refuse(why),
    };
    let m = &judged.skill.manifest;
    Response::SkillShown {
        name: m.name.clone(),
        version: m.version.to_string(),
        sha256: judged.skill.sha256.clone(),
        text: judged.skill.render(),
        installed: judged
            .installed
            .as_ref()
            .map(|s| s.manifest.version.to_string()),
        widening: judged.widening,
        needs_pin: judged.needs_pin,
    }
}

const FROZEN: &str = "the ladder is at Freeze or above: nothing is installed until it comes down";

/// Installs the bundle at `path`, the one shown (`sha256`).
pub(super) fn install(shared: &Shared, path: &str, sha256: &str, pin: Option<&str>) -> Response {
    if frozen(shared) {
        return refuse(FROZEN);
    }
    // Read before the change lock: nothing of the file's holds it.
    let bytes = match read_bundle(path) {
        Ok(b) => b,
        Err(why) => return refuse(why),
    };
    let changed =
        format!("{path} changed since it was shown; nothing was installed (check it again)");
    install_bytes(
        shared,
        &bytes,
        sha256,
        &changed,
        PinGate::Given(pin),
        InstallOrigin::RootTerminal,
    )
}

/// Installs the bundle the Worker downloaded for skill `name` on the
/// person's approval of exactly that bundle (`sha256`); `pin_checked`
/// when the approval carried the PIN, checked already (one that did not
/// installs nothing that needs it).
pub(super) fn install_approved(
    shared: &Shared,
    name: &str,
    sha256: &str,
    pin_checked: bool,
    action_id: String,
) -> Response {
    if frozen(shared) {
        return refuse(FROZEN);
    }
    let bytes = match offered_bytes(shared, name) {
        Ok(b) => b,
        Err(why) => return refuse(why),
    };
    install_bytes(
        shared,
        &bytes,
        sha256,
        "the download is not the skill that was approved; nothing was installed (propose it again)",
        if pin_checked {
            PinGate::Checked
        } else {
            PinGate::None
        },
        InstallOrigin::Approved { action_id },
    )
}

/// The Worker's update of the installed skill `name` from its download:
/// applied when it asks for nothing more than the installed version (no
/// path, command, host, setting, chore or tool more, no host to allow);
/// else refused with [`aromba_warden_proto::SKILL_WIDENS`], before any
/// journal line: the Worker then proposes it, as a new install.
pub(super) fn update(shared: &Shared, name: &str) -> Response {
    if frozen(shared) {
        return refuse(FROZEN);
    }
    let trusted = skill_trust(shared);
    if skills::installed(&trusted, name).is_none() {
        return refuse(format!(
            "the skill {name} is not installed here: propose it as an install"
        ));
    }
    let bytes = match offered_bytes(shared, name) {
        Ok(b) => b,
        Err(why) => return refuse(why),
    };
    let sha256 = crate::journal::sha256_hex(&bytes);
    install_bytes(
        shared,
        &bytes,
        &sha256,
        "",
        PinGate::None,
        InstallOrigin::Update {
            name: name.to_string(),
        },
    )
}

/// Installs `bytes`, which must be the bundle of `sha256` (else refused
/// with `changed`), judged again under the change lock.
fn install_bytes(
    shared: &Shared,
    bytes: &[u8],
    sha256: &str,
    changed: &str,
    pin: PinGate<'_>,
    origin: InstallOrigin,
) -> Response {
    let _changing = match shared.one_change_at_a_time() {
        Ok(g) => g,
        Err(why) => return refuse(why),
    };
    if crate::journal::sha256_hex(bytes) != sha256 {
        return refuse(changed);
    }
    let judged = match judge(shared, bytes) {
        Ok(j) => j,
        Err(why) => return refuse(why),
    };
    if let InstallOrigin::Update { name } = &origin {
        if judged.skill.manifest.name != *name {
            return refuse(format!(
                "the download for the skill {name} holds the skill {}",
                judged.skill.manifest.name
            ));
        }
        // Only an installed skill updates by itself (checked again here:
        // one removed meanwhile is a new install, which the person
        // approves).
        if judged.installed.is_none() {
            return refuse(format!(
                "the skill {name} is not installed here: propose it as an install"
            ));
        }
    }
    // An update applied by itself never widens: judged here, under the
    // lock, on the very bytes installed.
    if matches!(origin, InstallOrigin::Update { .. })
        && (!judged.widening.is_empty() || judged.needs_pin)
    {
        let mut more = judged.widening.clone();
        if judged.needs_pin {
            more.push("hosts this server has not allowed".into());
        }
        return refuse(format!(
            "{}: {}",
            aromba_warden_proto::SKILL_WIDENS,
            more.join("; ")
        ));
    }
    let m = &judged.skill.manifest;
    let version = m.version.to_string();
    let previous = judged
        .installed
        .as_ref()
        .map(|s| s.manifest.version.to_string());
    // The hosts it may reach: by name, and by the settings set before (an
    // update keeps them).
    let settings = skills::settings(&skill_trust(shared), &judged.skill);
    let hosts: Vec<String> = judged
        .skill
        .host_addresses(&settings)
        .into_iter()
        .flatten()
        .collect();
    let act = Event::SkillInstall {
        name: &m.name,
        version: &version,
        publisher: &m.publisher,
        sha256,
        previous: previous.as_deref(),
        hosts: &hosts,
        widening: &judged.widening,
        origin: &origin,
    };
    let intent = match intend(shared, act) {
        Ok(i) => i,
        Err(e) => return e.into(),
    };
    let pin_refused = match pin {
        _ if !judged.needs_pin => None,
        PinGate::Checked => None,
        PinGate::Given(pin) => check_pin(shared, None, pin).err(),
        PinGate::None => Some("installing it needs the PIN".to_string()),
    };
    if let Some(why) = pin_refused {
        let seq = intent.outcome(shared, Outcome::Refused { reason: &why });
        return Response::Refused {
            reason: why,
            journal_seq: seq,
        };
    }
    // The hosts first: a bundle recorded before its grant would find the
    // older grant, never a wider one.
    let network = if hosts.is_empty() {
        None
    } else {
        Some(format!("{}\n", hosts.join("\n")))
    };
    let changed = shared
        .change_state(
            &skills::network_record(&m.name),
            network.as_deref().map(str::as_bytes),
        )
        .and_then(|()| shared.change_state(&skills::bundle_record(&m.name), Some(bytes)));
    if changed.is_ok()
        && let Some(old) = &judged.installed
    {
        // A chore the new version no longer has leaves nothing behind.
        let kept: Vec<&str> = judged
            .skill
            .chores
            .iter()
            .map(|(h, _)| h.name.as_str())
            .collect();
        let dropped: Vec<String> = old
            .chores
            .iter()
            .map(|(h, _)| h.name.clone())
            .filter(|n| !kept.contains(&n.as_str()))
            .collect();
        forget_runs(shared, &dropped);
    }
    noted_outcome(shared, &intent, changed, "the skill is installed")
}

/// Removes each record the runs of `chores` (of a skill just removed or
/// updated without them) left: the receipt, the dry run's, the schedule's
/// stamp. A name another chore has now (an owner's chore written since)
/// keeps its records: they are that chore's.
fn forget_runs(shared: &Shared, chores: &[String]) {
    let (now, _) = crate::chores::catalog::all(&shared.options.layout, &skill_trust(shared));
    let runs = runs_dir(shared);
    for chore in chores {
        if now.iter().any(|c| &c.header.name == chore) {
            continue;
        }
        for suffix in ["last", "last-real", "dry-run-seen", "dry-ran", "scheduled"] {
            let _ = std::fs::remove_file(runs.join(format!("{chore}.{suffix}")));
        }
    }
}

/// `aromba skill remove NAME`: the bundle, the hosts granted, and the
/// records of its chores' runs. The journal keeps what it did.
/// How a change to the installed skill `name` opens: its name checked,
/// the one-change lock taken, and the skill as its record is now
/// (verified or why not).
fn changing_installed<'a>(
    shared: &'a Shared,
    name: &str,
) -> Result<(std::sync::MutexGuard<'a, ()>, Result<Skill, String>), String> {
    if !skills::manifest::valid_name(name) {
        return Err(format!("{name:?} is not a skill's name"));
    }
    let changing = shared.one_change_at_a_time()?;
    match skills::installed(&skill_trust(shared), name) {
        None => Err(format!("no skill named {name} is installed")),
        Some(found) => Ok((changing, found)),
    }
}

pub(super) fn remove(shared: &Shared, name: &str) -> Response {
    let (_changing, found) = match changing_installed(shared, name) {
        Ok(c) => c,
        Err(why) => return refuse(why),
    };
    // One that no longer verifies is removed all the same: its chores are
    // named by what its record still parses to, if anything.
    let (version, chores) = match &found {
        Ok(s) => (
            s.manifest.version.to_string(),
            s.chores.iter().map(|(h, _)| h.name.clone()).collect(),
        ),
        Err(_) => (
            "unverified".to_string(),
            crate::state::read(&shared.options.layout, &skills::bundle_record(name))
                .ok()
                .flatten()
                .map(|b| skills::chore_names_unverified(&b))
                .unwrap_or_default(),
        ),
    };
    let intent = match intend(
        shared,
        Event::SkillRemove {
            name,
            version: &version,
        },
    ) {
        Ok(i) => i,
        Err(e) => return e.into(),
    };
    let changed = shared
        .change_state(&skills::bundle_record(name), None)
        .and_then(|()| shared.change_state(&skills::network_record(name), None))
        .and_then(|()| shared.change_state(&skills::settings_record(name), None));
    if changed.is_ok() {
        forget_runs(shared, &chores);
    }
    noted_outcome(shared, &intent, changed, "the skill is removed")
}

/// What each installed skill may do on the network now, in words.
fn network_words(trust: &skills::Trust<'_>, skill: &Skill, settings: &skills::Settings) -> String {
    if skill.manifest.hosts.is_empty() {
        return "none: its manifest declares no host".into();
    }
    let granted = skills::network_granted(trust, &skill.manifest.name);
    let hosts: Vec<String> = skill
        .host_addresses(settings)
        .into_iter()
        .flatten()
        .filter(|a| granted.contains(a))
        .collect();
    if hosts.is_empty() {
        return "none: the PIN was not typed for its hosts (or their settings are not set)".into();
    }
    format!(
        "only {}, through the Warden's proxy, each connection journaled",
        hosts.join(", ")
    )
}

/// Each setting of `skill` and what it holds, in words.
fn setting_words(skill: &Skill, set: &skills::Settings) -> Vec<aromba_warden_proto::SettingInfo> {
    skill
        .manifest
        .settings
        .iter()
        .map(|s| {
            let words = match (set.0.get(&s.name), s.kind) {
                (None, _) => format!(
                    "not set (aromba skill set {} {})",
                    skill.manifest.name, s.name
                ),
                (Some(_), skills::manifest::SettingKind::Secret) => "set (a secret)".into(),
                (Some(v), _) => v.clone(),
            };
            aromba_warden_proto::SettingInfo {
                name: s.name.clone(),
                kind: s.kind.word().into(),
                shown: words,
            }
        })
        .collect()
}

/// `aromba skill set NAME SETTING`: the value kept for the skill's chores
/// (a secret never shown or journaled); a host setting needs the PIN, and
/// the host it named before is no longer granted.
pub(super) fn set(
    shared: &Shared,
    name: &str,
    setting: &str,
    value: &str,
    pin: Option<&str>,
) -> Response {
    let (_changing, skill) = match changing_installed(shared, name) {
        Ok((changing, Ok(s))) => (changing, s),
        Ok((_, Err(why))) | Err(why) => return refuse(why),
    };
    let trusted = skill_trust(shared);
    let Some(declared) = skill.manifest.settings.iter().find(|s| s.name == setting) else {
        return refuse(format!("{name} has no setting named {setting:?}"));
    };
    if let Err(why) = skills::manifest::valid_setting_value(declared.kind, value) {
        return refuse(format!("{setting}: {why}"));
    }
    let mut settings = skills::settings(&trusted, &skill);
    settings.0.insert(setting.to_string(), value.to_string());
    let after = skill.host_addresses(&settings);
    let granted = skills::network_granted(&trusted, name);
    // Granted after: what was granted and is still named, and what this
    // setting names now (with the PIN). What it named
    // before is no longer named, so no longer granted.
    let mut hosts: Vec<String> = Vec::new();
    for (h, now) in skill.manifest.hosts.iter().zip(&after) {
        let Some(now) = now else { continue };
        if granted.contains(now) || h.setting() == Some(setting) {
            hosts.push(now.clone());
        }
    }
    hosts.sort();
    hosts.dedup();
    let shown = if declared.kind == skills::manifest::SettingKind::Secret {
        "(a secret)"
    } else {
        value
    };
    let intent = match intend(
        shared,
        Event::SkillSet {
            name,
            setting,
            shown,
            hosts: &hosts,
        },
    ) {
        Ok(i) => i,
        Err(e) => return e.into(),
    };
    // A host setting always asks for the PIN: the skill reaches what it
    // names.
    if declared.kind == skills::manifest::SettingKind::Host
        && let Err(why) = check_pin(shared, None, pin)
    {
        let seq = intent.outcome(shared, Outcome::Refused { reason: &why });
        return Response::Refused {
            reason: why,
            journal_seq: seq,
        };
    }
    let network = (!hosts.is_empty()).then(|| format!("{}\n", hosts.join("\n")));
    let changed = shared
        .change_state(
            &skills::network_record(name),
            network.as_deref().map(str::as_bytes),
        )
        .and_then(|()| {
            shared.change_state(
                &skills::settings_record(name),
                Some(&settings.to_record(&skill)),
            )
        });
    noted_outcome(shared, &intent, changed, "the setting is kept")
}

/// The skills installed here.
pub(super) fn list(shared: &Shared) -> Response {
    let trust = skill_trust(shared);
    let (skills, refused) = skills::all_installed(&trust);
    Response::Skills {
        skills: skills
            .iter()
            .map(|s| (s, skills::settings(&trust, s)))
            .map(|(s, set)| SkillInfo {
                name: s.manifest.name.clone(),
                version: s.manifest.version.to_string(),
                publisher: s.manifest.publisher.clone(),
                text: s.render(),
                network: network_words(&trust, s, &set),
                settings: setting_words(s, &set),
                tools: s
                    .manifest
                    .tools
                    .iter()
                    .map(|t| (t.name.clone(), t.description.clone()))
                    .collect(),
            })
            .collect(),
        refused,
    }
}

/// How long a skill's tool may run.
const TOOL_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(30);

/// An assistant tool of an installed skill, run for the Worker: in a cage
/// with nothing writable at all — not even the skill's own paths, because
/// it runs on the model's word rather than on a button — no network, its
/// output capped and redacted as a read's, and journaled as one.
pub(super) fn tool(shared: &Shared, peer: &PeerCred, skill: &str, tool: &str) -> Response {
    let refused = |why: String| {
        let line = Event::SkillTool {
            peer: Peer::worker(peer),
            skill,
            tool,
            ran: Err(&why),
        };
        let journal_seq = journal(shared, line);
        Response::Refused {
            reason: why,
            journal_seq,
        }
    };
    if frozen(shared) {
        return refused(
            "the ladder is at Freeze or above: nothing runs until it comes down".into(),
        );
    }
    if !shared.isolation.starts_with(super::watch::ISOLATED) {
        return refused(NO_ISOLATION.into());
    }
    let trust = skill_trust(shared);
    let installed = match skills::installed(&trust, skill) {
        None => return refused(format!("no skill named {skill:?} is installed")),
        Some(Err(e)) => return refused(e),
        Some(Ok(s)) => s,
    };
    let Some((_, script)) = installed.tools.iter().find(|(name, _)| name == tool) else {
        return refused(format!("the skill {skill} brings no tool named {tool:?}"));
    };
    let script = script.clone();
    // It reads what its manifest lets the skill read, checked as a chore's
    // reads are; it gets the settings that are not secret.
    let reads: Vec<std::path::PathBuf> = installed
        .manifest
        .writes
        .iter()
        .chain(&installed.manifest.reads)
        .cloned()
        .collect();
    if let Err(why) = crate::cage::reads_allowed(tool, &reads, &shared.options.layout) {
        return refused(why);
    }
    // Its secrets are not given, but a chore may have written one where
    // the tool reads: taken out of its output all the same.
    let (env, secrets) = installed.environment(&skills::settings(&trust, &installed), false);
    let bounds = Bounds {
        timeout: TOOL_TIMEOUT,
        max_output_bytes: usize::try_from(crate::policy::LIMITS.max_output_bytes)
            .unwrap_or(usize::MAX),
        low_priority: true,
        keep_fd: None,
        stop: None,
        tripwire: None,
        cgroup: Default::default(),
        known_secrets: secrets,
    };
    let mut spec = crate::cage::tool_spec(&shared.options.layout, env);
    spec.reads = reads;
    let args = vec!["-c".to_string(), script.clone(), tool.to_string()];
    let slot = shared.running.take();
    let outcome = crate::cage::run_caged(&spec, Path::new("/bin/sh"), &args, &bounds);
    drop(slot);
    let outcome = match outcome {
        Ok(o) => o,
        Err(e) => return refused(format!("the tool could not run: {e}")),
    };
    let (stdout, stderr) = (&outcome.stdout, &outcome.stderr);
    let redactions = outcome.redactions();
    let duration_ms = u64::try_from(outcome.duration.as_millis()).unwrap_or(u64::MAX);
    let script_sha256 = crate::journal::sha256_hex(script.as_bytes());
    let (stdout_sha256, stderr_sha256) = (
        crate::journal::sha256_hex(stdout.text()),
        crate::journal::sha256_hex(stderr.text()),
    );
    let run = ToolRun {
        script_sha256: &script_sha256,
        exit_code: outcome.exit_code,
        cut: outcome.cut,
        timed_out: outcome.timed_out,
        redactions: &redactions,
        stdout_sha256: &stdout_sha256,
        stderr_sha256: &stderr_sha256,
        duration_ms,
    };
    let line = Event::SkillTool {
        peer: Peer::worker(peer),
        skill,
        tool,
        ran: Ok(&run),
    };
    // The answer goes only with its line, as a read's.
    let Some(journal_seq) = journal(shared, line) else {
        return super::unjournaled();
    };
    Response::Result(outcome.into_result(journal_seq))
}
