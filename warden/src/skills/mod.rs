//! Skills: signed bundles of chores (and assistant tools) bounded by a
//! manifest the person saw before install. A bundle is one JSON file:
//!
//! ```text
//! {"format": "aromba-skill-bundle-1",
//!  "manifest": "<skill.json, byte for byte>",
//!  "signature": "<skill.json.minisig>",
//!  "files": {"chores/tls-renew.sh": "<the script>", ...}}
//! ```
//!
//! The publisher signs the manifest (minisign), and the manifest names
//! every file with its SHA-256, so one signature covers the whole skill.
//! The Warden checks, in this order, before anything is written: the
//! bundle's shape and size, the signature with the key of the publisher
//! the manifest names (`publishers/NAME.pub` under the Warden's
//! configuration, root's alone; `aromba` is the release key), the manifest
//! ([`manifest`]), each file's hash — no file missing, none extra — and
//! each chore's header against the manifest ([`Skill::bounded`]): a chore
//! asking to write, read, run or reach anything the manifest does not
//! grant is refused with the sentence that says which.
//!
//! An installed skill is its bundle, verbatim, as a state record
//! (`skill-NAME.bundle`, under the integrity baseline), read and verified
//! again each time its chores are listed; the hosts the PIN was typed for
//! are a second record (`skill-NAME.network`), the values the owner set a
//! third (`skill-NAME.settings`).

#![forbid(unsafe_code)]

pub mod manifest;

use crate::chores::header::Header;
use crate::layout::Layout;
use manifest::Manifest;
use serde_json::Value;
use std::os::unix::fs::MetadataExt;

/// The bundle's `format`.
pub const BUNDLE_FORMAT: &str = "aromba-skill-bundle-1";
/// A bundle is at most this large.
pub const MAX_BUNDLE: u64 = 1 << 20;
/// One file of a bundle is at most this large.
pub const MAX_FILE: usize = 256 << 10;
/// The publisher whose key is the release key.
pub const RELEASE_PUBLISHER: &str = "aromba";
/// The most skills one server holds.
pub const MAX_INSTALLED: usize = 32;

/// A skill, verified: its manifest and its chores' scripts and headers.
#[derive(Clone, Debug)]
pub struct Skill {
    pub manifest: Manifest,
    /// The manifest's bytes, as signed.
    pub manifest_text: String,
    pub chores: Vec<(Header, String)>,
    /// Each tool's name and script.
    pub tools: Vec<(String, String)>,
    /// SHA-256 of the bundle's bytes.
    pub sha256: String,
}

/// What a skill is checked against: the keys of the publishers the owner
/// trusts, and the state records as the Warden last wrote them.
pub struct Trust<'a> {
    pub layout: &'a Layout,
    /// The release keys (base64 lines); `None`: the compiled-in ones.
    pub release_keys: Option<&'a [String]>,
    /// Each state record's SHA-256 as the Warden last wrote it (the running
    /// integrity baseline's); `None` where there is no baseline (not
    /// installed). A skill record that differs is not read: an older
    /// signed bundle or a grant written by anything else would otherwise
    /// count until the next integrity check.
    pub written: Option<std::collections::BTreeMap<String, String>>,
}

impl Trust<'_> {
    /// State record `name`, if it exists and is as the Warden wrote it.
    fn record(&self, name: &str) -> Result<Option<Vec<u8>>, String> {
        let bytes = crate::state::read(self.layout, name).map_err(|e| e.to_string())?;
        match (&bytes, &self.written) {
            (Some(b), Some(written))
                if written.get(name).map(String::as_str)
                    != Some(crate::journal::sha256_hex(b).as_str()) =>
            {
                Err(format!(
                    "its record {name} is not what the Warden wrote (changed behind its back)"
                ))
            }
            _ => Ok(bytes),
        }
    }

    /// The folder of the publishers' keys.
    pub fn dir(layout: &Layout) -> std::path::PathBuf {
        layout.config_dir.join("publishers")
    }

    /// The key of `publisher`, or why there is none to trust.
    fn keys(&self, publisher: &str) -> Result<aromba_release::Keys, String> {
        if publisher == RELEASE_PUBLISHER {
            return match self.release_keys {
                None => aromba_release::Keys::compiled(),
                Some(list) => {
                    let refs: Vec<&str> = list.iter().map(String::as_str).collect();
                    aromba_release::Keys::from_base64(&refs)
                }
            }
            .map_err(|e| match e {
                aromba_release::ReleaseError::NoKeys => format!(
                    "this build carries no release key, so it trusts no skill of the publisher {RELEASE_PUBLISHER}"
                ),
                e => e.to_string(),
            });
        }
        let dir = Trust::dir(self.layout);
        let path = dir.join(format!("{publisher}.pub"));
        let untrusted = || {
            format!(
                "the publisher {publisher} is not one this server trusts (no key at {})",
                path.display()
            )
        };
        for p in [&dir, &path] {
            let meta = std::fs::symlink_metadata(p).map_err(|_| untrusted())?;
            let kind_ok = if p == &dir {
                meta.is_dir()
            } else {
                meta.is_file()
            };
            if !kind_ok || meta.uid() != 0 || meta.mode() & 0o022 != 0 {
                return Err(format!(
                    "{} must be root's and writable by nobody else; the publisher {publisher} is not trusted until it is",
                    p.display()
                ));
            }
        }
        let text = std::fs::read_to_string(&path).map_err(|_| untrusted())?;
        // A minisign public key file: an untrusted comment, then the key.
        let key = text
            .lines()
            .map(str::trim)
            .find(|l| !l.is_empty() && !l.starts_with("untrusted comment:"))
            .ok_or_else(|| format!("{} holds no minisign public key", path.display()))?;
        aromba_release::Keys::from_base64(&[key]).map_err(|e| format!("{}: {e}", path.display()))
    }
}

impl Skill {
    /// The skill in `bytes`, verified whole, or the one sentence saying why
    /// not. Nothing is written.
    pub fn verify(bytes: &[u8], publishers: &Trust<'_>) -> Result<Skill, String> {
        if bytes.len() as u64 > MAX_BUNDLE {
            return Err(format!("the bundle is over {MAX_BUNDLE} bytes"));
        }
        let v: Value = serde_json::from_slice(bytes)
            .map_err(|e| format!("the file is not a skill bundle (not JSON: {e})"))?;
        let Value::Object(mut top) = v else {
            return Err("the file is not a skill bundle (not a JSON object)".to_string());
        };
        let mut string = |key: &str| match top.remove(key) {
            Some(Value::String(s)) => Ok(s),
            _ => Err(format!(
                "the file is not a skill bundle (no {key:?} string)"
            )),
        };
        let format = string("format")?;
        if format != BUNDLE_FORMAT {
            return Err(format!(
                "the bundle's format is {format:?}; this Warden reads {BUNDLE_FORMAT:?}"
            ));
        }
        let manifest_text = string("manifest")?;
        let signature = string("signature")?;
        let Some(Value::Object(files)) = top.remove("files") else {
            return Err("the file is not a skill bundle (no \"files\" object)".to_string());
        };
        if let Some(extra) = top.keys().next() {
            return Err(format!("the bundle has a field it may not have: {extra:?}"));
        }
        // The publisher's name is read before the signature is checked only
        // to pick its key; nothing else of the manifest is trusted yet.
        let claimed = serde_json::from_str::<Value>(&manifest_text)
            .ok()
            .and_then(|m| {
                m.get("publisher")
                    .and_then(Value::as_str)
                    .map(str::to_owned)
            })
            .ok_or_else(|| "the manifest names no publisher".to_string())?;
        if !manifest::valid_name(&claimed) {
            return Err(format!("the publisher's name {claimed:?} is not a name"));
        }
        let keys = publishers.keys(&claimed)?;
        keys.signed(manifest_text.as_bytes(), &signature)
            .map_err(|_| {
                format!(
                    "the manifest's signature does not verify with the key of {claimed}, the publisher it names: the bundle was changed or not signed by them"
                )
            })?;
        let manifest = Manifest::parse(manifest_text.as_bytes())?;
        let mut chores = Vec::new();
        let mut tools = Vec::new();
        for (path, v) in &files {
            if !manifest.files().any(|f| &f.path == path) {
                return Err(format!(
                    "the bundle holds {path:?}, which its manifest does not name"
                ));
            }
            if !v.is_string() {
                return Err(format!("the bundle's {path:?} is not text"));
            }
        }
        for f in manifest.files() {
            let Some(Value::String(text)) = files.get(&f.path) else {
                return Err(format!(
                    "the bundle lacks {}, which its manifest names",
                    f.path
                ));
            };
            if text.len() > MAX_FILE {
                return Err(format!("{} is over {MAX_FILE} bytes", f.path));
            }
            if crate::journal::sha256_hex(text.as_bytes()) != f.sha256 {
                return Err(format!(
                    "{} is not the file its signed manifest names (its SHA-256 differs)",
                    f.path
                ));
            }
        }
        for f in &manifest.chores {
            let Some(Value::String(script)) = files.get(&f.path) else {
                continue;
            };
            let header = Header::parse(script).map_err(|e| format!("{}: {e}", f.path))?;
            chores.push((header, script.clone()));
        }
        for t in &manifest.tools {
            if let Some(Value::String(script)) = files.get(&t.file.path) {
                tools.push((t.name.clone(), script.clone()));
            }
        }
        let skill = Skill {
            manifest,
            manifest_text,
            chores,
            tools,
            sha256: crate::journal::sha256_hex(bytes),
        };
        for (header, _) in &skill.chores {
            skill.bounded(header)?;
        }
        let mut names: Vec<&str> = skill.chores.iter().map(|(h, _)| h.name.as_str()).collect();
        names.sort_unstable();
        if let Some(w) = names.windows(2).find(|w| w[0] == w[1]) {
            return Err(format!("two of its chores are named {}", w[0]));
        }
        Ok(skill)
    }

    /// Whether `header` stays within the manifest: every touch a path it
    /// may write, every read one it may read, every action one of its root
    /// commands, network only with hosts declared.
    pub fn bounded(&self, header: &Header) -> Result<(), String> {
        let m = &self.manifest;
        let who = format!("{}'s chore {}", m.name, header.name);
        if let Some(t) = header.touches.iter().find(|t| !m.grants_write(t)) {
            return Err(format!(
                "{who} asks to write {}, which its manifest does not grant",
                t.display()
            ));
        }
        if let Some(r) = header.reads.iter().find(|r| !m.grants_read(r)) {
            return Err(format!(
                "{who} asks to read {}, which its manifest does not grant",
                r.display()
            ));
        }
        if let Some(a) = header
            .actions
            .iter()
            .find(|a| !m.root_commands.iter().any(|c| &&c.command == a))
        {
            return Err(format!(
                "{who} asks the Warden to run {}, which its manifest does not list",
                a.join(" ")
            ));
        }
        if header.network && m.hosts.is_empty() {
            return Err(format!(
                "{who} asks for the network, and its manifest declares no host"
            ));
        }
        Ok(())
    }

    /// What this version asks for beyond `older`, a line each: the
    /// manifest's rights, and each chore new, asking for fewer taps (a
    /// colour nearer green) or running by itself (a schedule where there was
    /// none).
    pub fn widening(&self, older: &Skill) -> Vec<String> {
        let mut more = self.manifest.widening(&older.manifest);
        for (h, _) in &self.chores {
            match older.chores.iter().find(|(o, _)| o.name == h.name) {
                None => more.push(format!(
                    "a new chore {} ({}, {})",
                    h.name,
                    h.color.name(),
                    h.schedule
                )),
                Some((o, _)) => {
                    if h.color < o.color {
                        more.push(format!(
                            "{} runs as {} (was {})",
                            h.name,
                            h.color.name(),
                            o.color.name()
                        ));
                    }
                    if o.schedule == crate::chores::header::Schedule::Manual
                        && h.schedule != o.schedule
                    {
                        more.push(format!("{} runs by itself, {}", h.name, h.schedule));
                    }
                }
            }
        }
        more
    }

    /// The manifest in plain words, as the person sees it before install.
    pub fn render(&self) -> String {
        let m = &self.manifest;
        let mut out = format!(
            "{} {}, from the publisher {}\n{}\n",
            m.name, m.version, m.publisher, m.description
        );
        let list = |out: &mut String, title: &str, lines: Vec<String>| {
            if !lines.is_empty() {
                out.push('\n');
                out.push_str(title);
                out.push('\n');
                for l in lines {
                    out.push_str("  ");
                    out.push_str(&l);
                    out.push('\n');
                }
            }
        };
        list(
            &mut out,
            "It will be able to write:",
            m.writes.iter().map(|p| p.display().to_string()).collect(),
        );
        list(
            &mut out,
            "It may read:",
            m.reads.iter().map(|p| p.display().to_string()).collect(),
        );
        list(
            &mut out,
            "It asks the Warden to run, as root, after a clean run:",
            m.root_commands
                .iter()
                .map(|c| format!("{} — {}", c.command.join(" "), c.why))
                .collect(),
        );
        if m.hosts.is_empty() {
            out.push_str("\nIt has no network.\n");
        } else {
            list(
                &mut out,
                "It talks to (only these, each allowed by your PIN):",
                m.hosts
                    .iter()
                    .map(|h| match h.setting() {
                        Some(set) => {
                            format!("the host you set as {set}, port {} — {}", h.port, h.why)
                        }
                        None => format!("{} — {}", h.address(), h.why),
                    })
                    .collect(),
            );
        }
        list(
            &mut out,
            &format!(
                "It needs you to set, from a root terminal (aromba skill set {} NAME):",
                m.name
            ),
            m.settings
                .iter()
                .map(|set| {
                    let kind = match set.kind {
                        manifest::SettingKind::Text => "",
                        manifest::SettingKind::Host => " (a host name; your PIN allows it)",
                        manifest::SettingKind::Secret => {
                            " (a secret: never shown, given to its chores only)"
                        }
                    };
                    format!("{}{kind} — {}", set.name, set.why)
                })
                .collect(),
        );
        list(
            &mut out,
            "Its chores:",
            self.chores
                .iter()
                .map(|(h, _)| {
                    format!(
                        "{} ({}, {}) — {}",
                        h.name,
                        h.color.name(),
                        h.schedule,
                        h.description
                    )
                })
                .collect(),
        );
        list(
            &mut out,
            "Its tools for the assistant (they run with nothing writable):",
            m.tools
                .iter()
                .map(|t| format!("{} — {}", t.name, t.description))
                .collect(),
        );
        out.trim_end().to_string()
    }
}

/// The state record holding skill `name`'s bundle.
pub fn bundle_record(name: &str) -> String {
    format!("skill-{name}.bundle")
}

/// The state record holding the hosts the PIN was typed for.
pub fn network_record(name: &str) -> String {
    format!("skill-{name}.network")
}

/// Makes each of the manifest's `writes` that does not exist yet (a
/// skill's own folder, such as `/var/cache/aromba-restic`): a directory of
/// root's, `0700`, made only where every directory above it is root's and
/// writable by nobody else, none a link, so no other account steers where
/// it is made. One that exists is left as it is: a chore's touches are
/// judged when it runs.
pub fn make_writes(m: &Manifest) -> Result<(), String> {
    use std::os::unix::fs::DirBuilderExt;
    for w in &m.writes {
        match std::fs::symlink_metadata(w) {
            Ok(_) => continue,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(format!("cannot look at {}: {e}", w.display())),
        }
        let mut above = w.parent();
        while let Some(dir) = above {
            let meta = std::fs::symlink_metadata(dir).map_err(|e| {
                format!(
                    "{} cannot be made: {} cannot be read ({e})",
                    w.display(),
                    dir.display()
                )
            })?;
            if !meta.is_dir() || meta.uid() != 0 || meta.mode() & 0o022 != 0 {
                return Err(format!(
                    "{} cannot be made: {} is not a directory of root's that nobody else may write",
                    w.display(),
                    dir.display()
                ));
            }
            above = dir.parent();
        }
        // `create`, not `create_all`: one level, and an error if something
        // took the name meanwhile.
        std::fs::DirBuilder::new()
            .mode(0o700)
            .create(w)
            .map_err(|e| format!("{} cannot be made: {e}", w.display()))?;
    }
    Ok(())
}

/// The state record holding the values the owner set (a JSON object).
pub fn settings_record(name: &str) -> String {
    format!("skill-{name}.settings")
}

/// The values the owner set for `skill`, as the Warden wrote them: only
/// the settings its manifest names, each a value of its kind (a setting an
/// update dropped, or changed the kind of, is not set).
pub fn settings(trust: &Trust<'_>, skill: &Skill) -> Settings {
    let stored = match trust
        .record(&settings_record(&skill.manifest.name))
        .ok()
        .flatten()
        .and_then(|b| serde_json::from_slice::<Value>(&b).ok())
    {
        Some(Value::Object(map)) => map,
        _ => serde_json::Map::new(),
    };
    Settings(
        skill
            .manifest
            .settings
            .iter()
            .filter_map(|set| {
                let v = stored.get(&set.name)?;
                // Set as another kind (an update turned a secret into
                // text): not set, so a secret is never shown as text.
                (v.get("kind")?.as_str()? == set.kind.word()).then_some(())?;
                let value = v.get("value")?.as_str()?;
                manifest::valid_setting_value(set.kind, value).ok()?;
                Some((set.name.clone(), value.to_string()))
            })
            .collect(),
    )
}

/// What a skill's run is given of its settings: the environment variables,
/// and the secrets' values to take out of its output.
pub type Environment = (Vec<(String, String)>, Vec<String>);

/// A skill's settings as set, by name.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Settings(pub std::collections::BTreeMap<String, String>);

impl Settings {
    /// The record's bytes: each value with the kind `skill` declares it.
    pub fn to_record(&self, skill: &Skill) -> Vec<u8> {
        // Each with the kind it was set as: read back only as that kind.
        let stored: serde_json::Map<String, Value> = skill
            .manifest
            .settings
            .iter()
            .filter_map(|set| {
                let value = self.0.get(&set.name)?;
                Some((
                    set.name.clone(),
                    serde_json::json!({"kind": set.kind.word(), "value": value}),
                ))
            })
            .collect();
        serde_json::to_vec(&stored).unwrap_or_default()
    }
}

impl Skill {
    /// The address (`name:port`) each host of the manifest stands for now:
    /// a host by setting, the value set (`None` while it is not).
    pub fn host_addresses(&self, settings: &Settings) -> Vec<Option<String>> {
        self.manifest
            .hosts
            .iter()
            .map(|h| match h.setting() {
                None => Some(h.address()),
                Some(set) => settings.0.get(set).map(|v| format!("{v}:{}", h.port)),
            })
            .collect()
    }

    /// The settings not set yet, by name.
    pub fn unset<'a>(&'a self, settings: &Settings) -> Vec<&'a str> {
        self.manifest
            .settings
            .iter()
            .filter(|set| !settings.0.contains_key(&set.name))
            .map(|set| set.name.as_str())
            .collect()
    }

    /// What a chore of the skill gets in its environment (every setting)
    /// and what is taken out of its output (the secrets' values); a tool
    /// gets the settings that are not secret and no secret.
    pub fn environment(
        &self,
        settings: &Settings,
        for_chore: bool,
    ) -> (Vec<(String, String)>, Vec<String>) {
        let mut env = Vec::new();
        let mut secrets = Vec::new();
        for set in &self.manifest.settings {
            let Some(v) = settings.0.get(&set.name) else {
                continue;
            };
            let secret = set.kind == manifest::SettingKind::Secret;
            if secret {
                secrets.push(v.clone());
                // As a JSON string writes it, too (a quote or a backslash
                // escaped).
                let json = serde_json::to_string(v).unwrap_or_default();
                if let Some(escaped) = json.strip_prefix('"').and_then(|j| j.strip_suffix('"'))
                    && escaped != v.as_str()
                {
                    secrets.push(escaped.to_string());
                }
            }
            if for_chore || !secret {
                env.push((set.name.clone(), v.clone()));
            }
        }
        (env, secrets)
    }
}

/// The names of the skills installed here, in order.
pub fn installed_names(layout: &Layout) -> Vec<String> {
    let Ok(entries) = std::fs::read_dir(&layout.state_dir) else {
        return Vec::new();
    };
    let mut names: Vec<String> = entries
        .filter_map(|e| {
            let name = e.ok()?.file_name().into_string().ok()?;
            let skill = name.strip_prefix("skill-")?.strip_suffix(".bundle")?;
            manifest::valid_name(skill).then(|| skill.to_string())
        })
        .collect();
    names.sort();
    names
}

/// Skill `name` as installed, verified again; `None` when it is not.
pub fn installed(publishers: &Trust<'_>, name: &str) -> Option<Result<Skill, String>> {
    if !manifest::valid_name(name) {
        return None;
    }
    let bytes = match publishers.record(&bundle_record(name)) {
        Ok(b) => b?,
        Err(e) => {
            return Some(Err(format!(
                "the installed skill {name} no longer verifies: {e}"
            )));
        }
    };
    Some(
        Skill::verify(&bytes, publishers)
            .and_then(|s| {
                if s.manifest.name == name {
                    Ok(s)
                } else {
                    Err(format!("its record holds the skill {}", s.manifest.name))
                }
            })
            .map_err(|e| format!("the installed skill {name} no longer verifies: {e}")),
    )
}

/// Every skill installed here, and each one that no longer verifies with
/// why.
pub fn all_installed(publishers: &Trust<'_>) -> (Vec<Skill>, Vec<String>) {
    let mut skills = Vec::new();
    let mut refused = Vec::new();
    for name in installed_names(publishers.layout) {
        match installed(publishers, &name) {
            Some(Ok(s)) => skills.push(s),
            Some(Err(e)) => refused.push(e),
            None => {}
        }
    }
    (skills, refused)
}

/// The hosts (`name:port`) the PIN was typed for, for skill `name`; none
/// when the record is not as the Warden wrote it.
pub fn network_granted(trust: &Trust<'_>, name: &str) -> Vec<String> {
    trust
        .record(&network_record(name))
        .ok()
        .flatten()
        .and_then(|b| String::from_utf8(b).ok())
        .map(|s| s.lines().map(str::to_owned).collect())
        .unwrap_or_default()
}

/// The chore names a bundle's scripts declare, read without verifying
/// anything (a record that no longer verifies, being removed).
pub fn chore_names_unverified(bytes: &[u8]) -> Vec<String> {
    let Ok(Value::Object(top)) = serde_json::from_slice::<Value>(bytes) else {
        return Vec::new();
    };
    let Some(Value::Object(files)) = top.get("files") else {
        return Vec::new();
    };
    files
        .iter()
        .filter(|(path, _)| path.starts_with("chores/"))
        .filter_map(|(_, v)| Header::parse(v.as_str()?).ok())
        .map(|h| h.name)
        .filter(|n| !n.is_empty())
        .collect()
}
