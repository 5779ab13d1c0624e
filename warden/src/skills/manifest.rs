//! A skill's manifest (`skill.json`): what the skill may do on this server,
//! strictly parsed — every field known, every value checked, nothing extra
//! — and what a newer manifest asks for beyond an older one. The format is
//! documented in `docs/skills.md`.

#![forbid(unsafe_code)]

use serde_json::{Map, Value};
use std::path::{Component, Path, PathBuf};

/// The manifest's `format`.
pub const FORMAT: &str = "aromba-skill-1";
pub const MAX_MANIFEST: usize = 32 << 10;
pub const MAX_PATHS: usize = 16;
pub const MAX_ROOT_COMMANDS: usize = 8;
pub const MAX_HOSTS: usize = 8;
pub const MAX_CHORES: usize = 16;
pub const MAX_TOOLS: usize = 8;
pub const MAX_SETTINGS: usize = 8;
const MAX_WHY: usize = 200;
const MAX_DESCRIPTION: usize = 300;
const MAX_ARGS: usize = 16;

/// A root command the skill's chores may ask for after a clean run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RootCommand {
    pub command: Vec<String>,
    pub why: String,
}

/// A host the skill's chores talk to, by name and port.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Host {
    /// A DNS name, or `@SETTING`: the host the owner sets as that setting
    /// (an S3 endpoint differs from one owner to the next).
    pub name: String,
    pub port: u16,
    pub why: String,
}

impl Host {
    /// `name:port` as the manifest writes it (`@S3_HOST:443`).
    pub fn address(&self) -> String {
        format!("{}:{}", self.name, self.port)
    }

    /// The setting that names this host, for one the owner sets.
    pub fn setting(&self) -> Option<&str> {
        self.name.strip_prefix('@')
    }
}

/// What kind of value a setting holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SettingKind {
    /// Shown, given to chores and tools.
    Text,
    /// A DNS name a `hosts` entry names as `@SETTING`; setting it to a
    /// host not granted before needs the PIN.
    Host,
    /// Never shown, never in a journal line; given to the skill's chores
    /// only (not to its tools), in their environment, and taken out of
    /// their output.
    Secret,
}

impl SettingKind {
    pub fn word(self) -> &'static str {
        match self {
            SettingKind::Text => "text",
            SettingKind::Host => "host",
            SettingKind::Secret => "secret",
        }
    }
}

/// A value the owner sets for the skill (`aromba skill set NAME SETTING`),
/// given to its chores as an environment variable of the same name.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Setting {
    pub name: String,
    pub kind: SettingKind,
    pub why: String,
}

/// A file of the bundle, named with its SHA-256.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct File {
    /// `chores/NAME.sh` or `tools/NAME.sh`.
    pub path: String,
    pub sha256: String,
}

/// An assistant tool the skill brings.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Tool {
    pub name: String,
    pub description: String,
    pub file: File,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Manifest {
    pub name: String,
    pub version: aromba_release::Version,
    pub publisher: String,
    pub description: String,
    /// The only paths its chores may write (and read).
    pub writes: Vec<PathBuf>,
    /// Paths its chores may read besides.
    pub reads: Vec<PathBuf>,
    pub root_commands: Vec<RootCommand>,
    pub hosts: Vec<Host>,
    pub settings: Vec<Setting>,
    pub chores: Vec<File>,
    pub tools: Vec<Tool>,
}

/// A name of a skill, publisher, or tool: `[a-z][a-z0-9-]{1,31}`.
pub fn valid_name(s: &str) -> bool {
    let b = s.as_bytes();
    (2..=32).contains(&b.len())
        && b[0].is_ascii_lowercase()
        && b.iter()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == b'-')
}

/// Text a person reads: printable, one line, bounded.
fn plain_line(s: &str, max: usize) -> bool {
    !s.trim().is_empty() && s.len() <= max && !s.chars().any(char::is_control) && s.trim() == s
}

/// An absolute, normal path (no `.`, `..`, empty or trailing component),
/// not `/` itself.
fn normal_path(s: &str) -> Option<PathBuf> {
    let p = Path::new(s);
    let normal = s.starts_with('/')
        && s.len() > 1
        && s.len() <= 4096
        && !s.ends_with('/')
        && !s.contains("//")
        && !s.chars().any(char::is_control)
        // `components` drops a `.` in the middle: look at the text too.
        && !s.split('/').any(|c| c == "." || c == "..")
        && p.components()
            .skip(1)
            .all(|c| matches!(c, Component::Normal(_)));
    normal.then(|| p.to_path_buf())
}

/// A host name as DNS writes it: lower-case labels of letters, digits and
/// hyphens, at least two, the last not all digits (no IP literal).
pub fn valid_host(s: &str) -> bool {
    let labels: Vec<&str> = s.split('.').collect();
    s.len() <= 253
        && labels.len() >= 2
        && labels.iter().all(|l| {
            (1..=63).contains(&l.len())
                && !l.starts_with('-')
                && !l.ends_with('-')
                && l.bytes()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == b'-')
        })
        && labels
            .last()
            .is_some_and(|l| !l.bytes().all(|c| c.is_ascii_digit()))
}

/// A setting's name, which is its environment variable's:
/// `[A-Z][A-Z0-9_]{1,31}`, none the Warden or the loader gives a meaning
/// (`PATH`, `HOME`, `AROMBA_*`, `LD_*`, a proxy's).
pub fn valid_setting_name(s: &str) -> bool {
    let b = s.as_bytes();
    (2..=32).contains(&b.len())
        && b[0].is_ascii_uppercase()
        && b.iter()
            .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || *c == b'_')
        && !matches!(
            s,
            "PATH" | "HOME" | "SHELL" | "IFS" | "ENV" | "BASH_ENV" | "TMPDIR"
        )
        && !s.starts_with("AROMBA_")
        && !s.starts_with("LD_")
        && !s.ends_with("PROXY")
}

/// Whether `value` may be the value of a setting of `kind`.
pub fn valid_setting_value(kind: SettingKind, value: &str) -> Result<(), String> {
    match kind {
        SettingKind::Host if valid_host(value) => Ok(()),
        SettingKind::Host => Err(
            "a host setting is a lower-case DNS name, such as s3.eu-central-1.example.com (an IP address is not one)"
                .into(),
        ),
        SettingKind::Text
            if !value.is_empty()
                && value.len() <= 256
                && value.bytes().all(|c| {
                    c.is_ascii_alphanumeric() || b"_.,:/=+@-".contains(&c)
                }) =>
        {
            Ok(())
        }
        SettingKind::Text => Err(
            "a text setting is 1 to 256 of letters, digits and _.,:/=+@- (no spaces)".into(),
        ),
        SettingKind::Secret
            if (8..=256).contains(&value.len())
                && !value.chars().any(char::is_control) =>
        {
            Ok(())
        }
        SettingKind::Secret => Err(
            "a secret setting is 8 to 256 bytes on one line, no control characters".into(),
        ),
    }
}

fn lower_hex(s: &str, n: usize) -> bool {
    s.len() == n && s.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}

/// A JSON object taken field by field; a field left over is refused.
struct Fields<'a> {
    what: &'a str,
    map: Map<String, Value>,
}

impl<'a> Fields<'a> {
    fn of(what: &'a str, v: Value) -> Result<Fields<'a>, String> {
        match v {
            Value::Object(map) => Ok(Fields { what, map }),
            _ => Err(format!("{what} must be a JSON object")),
        }
    }

    fn take(&mut self, key: &str) -> Result<Value, String> {
        self.map
            .remove(key)
            .ok_or_else(|| format!("{} has no {key:?}", self.what))
    }

    fn string(&mut self, key: &str) -> Result<String, String> {
        match self.take(key)? {
            Value::String(s) => Ok(s),
            _ => Err(format!("{}'s {key:?} must be a string", self.what)),
        }
    }

    fn array(&mut self, key: &str, max: usize) -> Result<Vec<Value>, String> {
        match self.take(key)? {
            Value::Array(a) if a.len() <= max => Ok(a),
            Value::Array(_) => Err(format!(
                "{}'s {key:?} has more than {max} entries",
                self.what
            )),
            _ => Err(format!("{}'s {key:?} must be a list", self.what)),
        }
    }

    fn done(self) -> Result<(), String> {
        match self.map.keys().next() {
            None => Ok(()),
            Some(k) => Err(format!("{} has a field it may not have: {k:?}", self.what)),
        }
    }
}

fn paths(values: Vec<Value>, key: &str) -> Result<Vec<PathBuf>, String> {
    let mut out: Vec<PathBuf> = Vec::new();
    for v in values {
        let Value::String(s) = v else {
            return Err(format!("the manifest's {key:?} must list paths as strings"));
        };
        let p = normal_path(&s).ok_or_else(|| {
            format!("the manifest's {key:?} path {s:?} is not an absolute path without . or ..")
        })?;
        if out.contains(&p) {
            return Err(format!("the manifest's {key:?} names {s} twice"));
        }
        out.push(p);
    }
    Ok(out)
}

fn file(v: Value, what: &str, dir: &str) -> Result<File, String> {
    let mut f = Fields::of(what, v)?;
    let path = f.string("file")?;
    let sha256 = f.string("sha256")?;
    f.done()?;
    let stem = path
        .strip_prefix(dir)
        .and_then(|r| r.strip_prefix('/'))
        .and_then(|r| r.strip_suffix(".sh"));
    if !stem.is_some_and(valid_name) {
        return Err(format!(
            "{what}'s file {path:?} must be {dir}/NAME.sh, NAME of a-z, 0-9 and -"
        ));
    }
    if !lower_hex(&sha256, 64) {
        return Err(format!("{what}'s sha256 must be 64 lower-case hex digits"));
    }
    Ok(File { path, sha256 })
}

impl Manifest {
    /// The manifest in `bytes`, or why it is not one.
    pub fn parse(bytes: &[u8]) -> Result<Manifest, String> {
        if bytes.len() > MAX_MANIFEST {
            return Err(format!("the manifest is over {MAX_MANIFEST} bytes"));
        }
        let v: Value =
            serde_json::from_slice(bytes).map_err(|e| format!("the manifest is not JSON: {e}"))?;
        let mut f = Fields::of("the manifest", v)?;
        let format = f.string("format")?;
        if format != FORMAT {
            return Err(format!(
                "the manifest's format is {format:?}; this Warden reads {FORMAT:?}"
            ));
        }
        let name = f.string("name")?;
        if !valid_name(&name) {
            return Err(format!(
                "the skill's name {name:?} must be 2 to 32 of a-z, 0-9 and -, starting with a letter"
            ));
        }
        let version = aromba_release::Version::parse(&f.string("version")?)
            .map_err(|e| format!("the skill's version: {e}"))?;
        let publisher = f.string("publisher")?;
        if !valid_name(&publisher) {
            return Err(format!(
                "the publisher's name {publisher:?} must be 2 to 32 of a-z, 0-9 and -"
            ));
        }
        let description = f.string("description")?;
        if !plain_line(&description, MAX_DESCRIPTION) {
            return Err(format!(
                "the description must be one line of at most {MAX_DESCRIPTION} bytes, no control characters"
            ));
        }
        let writes = paths(f.array("writes", MAX_PATHS)?, "writes")?;
        let reads = paths(f.array("reads", MAX_PATHS)?, "reads")?;
        let mut root_commands: Vec<RootCommand> = Vec::new();
        for v in f.array("root_commands", MAX_ROOT_COMMANDS)? {
            let mut c = Fields::of("a root command", v)?;
            let words = c.array("command", MAX_ARGS)?;
            let why = c.string("why")?;
            c.done()?;
            let command: Vec<String> = words
                .into_iter()
                .map(|w| match w {
                    Value::String(s) if plain_line(&s, 256) && !s.contains(' ') => Ok(s),
                    _ => Err("a root command's words must be strings without spaces".to_string()),
                })
                .collect::<Result<_, _>>()?;
            if command.is_empty() {
                return Err("a root command is empty".into());
            }
            if !plain_line(&why, MAX_WHY) {
                return Err(format!(
                    "the root command {:?} must say why, in one line of at most {MAX_WHY} bytes",
                    command.join(" ")
                ));
            }
            if root_commands.iter().any(|r| r.command == command) {
                return Err(format!(
                    "the root command {:?} is listed twice",
                    command.join(" ")
                ));
            }
            root_commands.push(RootCommand { command, why });
        }
        let mut settings: Vec<Setting> = Vec::new();
        for v in f.array("settings", MAX_SETTINGS)? {
            let mut t = Fields::of("a setting", v)?;
            let name = t.string("name")?;
            let kind = t.string("kind")?;
            let why = t.string("why")?;
            t.done()?;
            if !valid_setting_name(&name) {
                return Err(format!(
                    "the setting {name:?} must be 2 to 32 of A-Z, 0-9 and _, starting with a letter, and not one the Warden or the system gives a meaning (PATH, HOME, AROMBA_*, LD_*, *PROXY)"
                ));
            }
            let kind = match kind.as_str() {
                "text" => SettingKind::Text,
                "host" => SettingKind::Host,
                "secret" => SettingKind::Secret,
                _ => {
                    return Err(format!(
                        "the setting {name}'s kind must be text, host or secret"
                    ));
                }
            };
            if !plain_line(&why, MAX_WHY) {
                return Err(format!(
                    "the setting {name} must say why, in one line of at most {MAX_WHY} bytes"
                ));
            }
            if settings.iter().any(|o| o.name == name) {
                return Err(format!("the setting {name} is listed twice"));
            }
            settings.push(Setting { name, kind, why });
        }
        let mut hosts: Vec<Host> = Vec::new();
        for v in f.array("hosts", MAX_HOSTS)? {
            let mut h = Fields::of("a host", v)?;
            let name = h.string("name")?;
            let port = h.take("port")?;
            let why = h.string("why")?;
            h.done()?;
            let by_setting = name.strip_prefix('@').map(|set| {
                settings
                    .iter()
                    .any(|o| o.name == set && o.kind == SettingKind::Host)
            });
            match by_setting {
                None if valid_host(&name) => {}
                None => {
                    return Err(format!(
                        "the host {name:?} must be a lower-case DNS name (an IP address is not one), or @ and the name of a host setting"
                    ));
                }
                Some(true) => {}
                Some(false) => {
                    return Err(format!(
                        "the host {name:?} names no host setting of the manifest"
                    ));
                }
            }
            let port = port
                .as_u64()
                .and_then(|p| u16::try_from(p).ok())
                .filter(|p| *p > 0)
                .ok_or_else(|| {
                    format!("the host {name}'s port must be a number from 1 to 65535")
                })?;
            if !plain_line(&why, MAX_WHY) {
                return Err(format!(
                    "the host {name} must say why, in one line of at most {MAX_WHY} bytes"
                ));
            }
            if hosts.iter().any(|o| o.name == name && o.port == port) {
                return Err(format!("the host {name}:{port} is listed twice"));
            }
            hosts.push(Host { name, port, why });
        }
        let mut chores: Vec<File> = Vec::new();
        for v in f.array("chores", MAX_CHORES)? {
            let c = file(v, "a chore", "chores")?;
            if chores.iter().any(|o| o.path == c.path) {
                return Err(format!("the chore file {} is listed twice", c.path));
            }
            chores.push(c);
        }
        let mut tools: Vec<Tool> = Vec::new();
        for v in f.array("tools", MAX_TOOLS)? {
            let mut t = Fields::of("a tool", v)?;
            let name = t.string("name")?;
            let description = t.string("description")?;
            let file_name = t.string("file")?;
            let sha256 = t.string("sha256")?;
            t.done()?;
            if !valid_name(&name) {
                return Err(format!(
                    "the tool's name {name:?} must be 2 to 32 of a-z, 0-9 and -"
                ));
            }
            if !plain_line(&description, MAX_WHY) {
                return Err(format!(
                    "the tool {name} must say what it does, in one line of at most {MAX_WHY} bytes"
                ));
            }
            let mut obj = Map::new();
            obj.insert("file".into(), Value::from(file_name));
            obj.insert("sha256".into(), Value::from(sha256));
            let file = file(Value::Object(obj), "a tool", "tools")?;
            if tools
                .iter()
                .any(|o| o.name == name || o.file.path == file.path)
            {
                return Err(format!("the tool {name} is listed twice"));
            }
            tools.push(Tool {
                name,
                description,
                file,
            });
        }
        f.done()?;
        if chores.is_empty() && tools.is_empty() {
            return Err("the skill brings no chore and no tool".into());
        }
        Ok(Manifest {
            name,
            version,
            publisher,
            description,
            writes,
            reads,
            root_commands,
            hosts,
            settings,
            chores,
            tools,
        })
    }

    /// Every file of the bundle the manifest names.
    pub fn files(&self) -> impl Iterator<Item = &File> {
        self.chores.iter().chain(self.tools.iter().map(|t| &t.file))
    }

    /// Whether the manifest lets a chore write `path`.
    pub fn grants_write(&self, path: &Path) -> bool {
        self.writes.iter().any(|w| path.starts_with(w))
    }

    /// Whether the manifest lets a chore read `path`.
    pub fn grants_read(&self, path: &Path) -> bool {
        self.grants_write(path) || self.reads.iter().any(|r| path.starts_with(r))
    }

    /// What this manifest asks for that `older` did not grant, a line each
    /// in plain words; empty when it asks for nothing more (it may ask for
    /// less).
    pub fn widening(&self, older: &Manifest) -> Vec<String> {
        let mut more = Vec::new();
        for w in &self.writes {
            if !older.grants_write(w) {
                more.push(format!("write {}", w.display()));
            }
        }
        for r in &self.reads {
            if !older.grants_read(r) {
                more.push(format!("read {}", r.display()));
            }
        }
        for c in &self.root_commands {
            if !older.root_commands.iter().any(|o| o.command == c.command) {
                more.push(format!("run {} as root", c.command.join(" ")));
            }
        }
        for h in &self.hosts {
            if !older
                .hosts
                .iter()
                .any(|o| o.name == h.name && o.port == h.port)
            {
                more.push(format!("talk to {}", h.address()));
            }
        }
        for t in &self.tools {
            if !older.tools.iter().any(|o| o.name == t.name) {
                more.push(format!("give the assistant the tool {}", t.name));
            }
        }
        // A setting is something the owner is asked to hand over (a secret
        // above all): one the older manifest lacks, or of another kind.
        for s in &self.settings {
            if !older
                .settings
                .iter()
                .any(|o| o.name == s.name && o.kind == s.kind)
            {
                more.push(format!("a new setting {} ({})", s.name, s.kind.word()));
            }
        }
        more
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn manifest(edit: impl FnOnce(&mut Map<String, Value>)) -> Result<Manifest, String> {
        let mut v: Map<String, Value> = serde_json::from_str(
            r#"{"format":"aromba-skill-1","name":"tls-certs","version":"1.0.0",
            "publisher":"acme-tools","description":"Renew TLS certificates",
            "writes":["/etc/letsencrypt"],"reads":["/etc/nginx"],
            "root_commands":[{"command":["systemctl","reload","nginx"],"why":"serve the new certificate"}],
            "hosts":[{"name":"acme-v02.api.letsencrypt.org","port":443,"why":"issues certificates"}],
            "settings":[],
            "chores":[{"file":"chores/tls-renew.sh","sha256":"0000000000000000000000000000000000000000000000000000000000000000"}],
            "tools":[]}"#,
        )
        .unwrap();
        edit(&mut v);
        Manifest::parse(&serde_json::to_vec(&Value::Object(v)).unwrap())
    }

    #[test]
    fn a_complete_manifest_parses() {
        let m = manifest(|_| {}).unwrap();
        assert_eq!(m.name, "tls-certs");
        assert_eq!(m.hosts[0].address(), "acme-v02.api.letsencrypt.org:443");
        assert!(m.grants_write(Path::new("/etc/letsencrypt/live/x")));
        assert!(!m.grants_write(Path::new("/etc/letsencrypt2")));
        assert!(m.grants_read(Path::new("/etc/nginx/sites-enabled")));
    }

    #[test]
    fn refuses_an_unknown_field_anywhere() {
        assert!(
            manifest(|m| {
                m.insert("extra".into(), Value::Bool(true));
            })
            .is_err()
        );
        let e = manifest(|m| {
            m["hosts"][0]
                .as_object_mut()
                .unwrap()
                .insert("ip".into(), Value::from("1.2.3.4"));
        })
        .unwrap_err();
        assert!(e.contains("\"ip\""), "{e}");
    }

    #[test]
    fn refuses_an_ip_literal_or_odd_host() {
        for host in [
            "169.254.169.254",
            "localhost",
            "Example.com",
            "a..b",
            "-a.com",
            "[::1]",
        ] {
            let e = manifest(|m| m["hosts"][0]["name"] = Value::from(host)).unwrap_err();
            assert!(e.contains("DNS name"), "{host}: {e}");
        }
        assert!(manifest(|m| m["hosts"][0]["port"] = Value::from(0)).is_err());
        assert!(manifest(|m| m["hosts"][0]["port"] = Value::from(70000)).is_err());
    }

    #[test]
    fn refuses_relative_or_dotted_paths() {
        for p in ["etc/x", "/etc/../root", "/etc/./x", "/", "/etc/", "//etc"] {
            assert!(
                manifest(|m| m["writes"] = Value::from(vec![p])).is_err(),
                "{p}"
            );
        }
    }

    #[test]
    fn refuses_a_file_outside_its_folder() {
        for f in [
            "chores/../x.sh",
            "tools/x.sh",
            "chores/x",
            "chores/sub/x.sh",
            "/chores/x.sh",
        ] {
            assert!(
                manifest(|m| m["chores"][0]["file"] = Value::from(f)).is_err(),
                "{f}"
            );
        }
    }

    #[test]
    fn widening_names_each_new_right_and_narrowing_none() {
        let old = manifest(|_| {}).unwrap();
        let wider = manifest(|m| {
            m["writes"] = Value::from(vec!["/etc/letsencrypt", "/var/www"]);
            m["hosts"][0]["port"] = Value::from(80);
            m["root_commands"][0]["command"] = Value::from(vec!["systemctl", "restart", "nginx"]);
        })
        .unwrap();
        assert_eq!(
            wider.widening(&old),
            vec![
                "write /var/www",
                "run systemctl restart nginx as root",
                "talk to acme-v02.api.letsencrypt.org:80"
            ]
        );
        let narrower = manifest(|m| {
            m["writes"] = Value::from(vec!["/etc/letsencrypt/live"]);
            m["hosts"] = Value::Array(vec![]);
            m["reads"] = Value::Array(vec![]);
        })
        .unwrap();
        assert!(narrower.widening(&old).is_empty());
    }

    #[test]
    fn refuses_a_setting_named_as_the_warden_or_the_loader_uses_or_a_host_naming_none() {
        for name in [
            "PATH",
            "HOME",
            "LD_PRELOAD",
            "HTTPS_PROXY",
            "AROMBA_DRY_RUN",
            "lower",
            "X",
            "BASH_ENV",
        ] {
            let e = manifest(|m| {
                m["settings"] = serde_json::json!([{"name": name, "kind": "text", "why": "w"}]);
            })
            .unwrap_err();
            assert!(e.contains("the setting"), "{name}: {e}");
        }
        assert!(
            manifest(|m| {
                m["settings"] = serde_json::json!([{"name": "S3", "kind": "password", "why": "w"}]);
            })
            .unwrap_err()
            .contains("text, host or secret")
        );
        for (settings, host) in [
            (serde_json::json!([]), "@S3_HOST"),
            (
                serde_json::json!([{"name": "S3_HOST", "kind": "text", "why": "w"}]),
                "@S3_HOST",
            ),
            (
                serde_json::json!([{"name": "S3_HOST", "kind": "host", "why": "w"}]),
                "@S3_OTHER",
            ),
        ] {
            let e = manifest(|m| {
                m["settings"] = settings.clone();
                m["hosts"][0]["name"] = Value::from(host);
            })
            .unwrap_err();
            assert!(e.contains("names no host setting"), "{host}: {e}");
        }
        let m = manifest(|m| {
            m["settings"] = serde_json::json!([{"name": "S3_HOST", "kind": "host", "why": "w"}]);
            m["hosts"][0]["name"] = Value::from("@S3_HOST");
        })
        .unwrap();
        assert_eq!(m.hosts[0].setting(), Some("S3_HOST"));
    }

    #[test]
    fn a_setting_value_must_be_of_its_kind() {
        assert!(valid_setting_value(SettingKind::Host, "s3.example.com").is_ok());
        for v in ["10.0.0.1", "localhost", "S3.example.com", "a b.com"] {
            assert!(valid_setting_value(SettingKind::Host, v).is_err(), "{v}");
        }
        assert!(valid_setting_value(SettingKind::Text, "s3:https://h/b").is_ok());
        assert!(valid_setting_value(SettingKind::Text, "a b").is_err());
        assert!(valid_setting_value(SettingKind::Secret, "twelve chars").is_ok());
        assert!(valid_setting_value(SettingKind::Secret, "short").is_err());
        assert!(valid_setting_value(SettingKind::Secret, "tab\there-long").is_err());
    }

    #[test]
    fn a_new_setting_or_one_of_another_kind_is_widening() {
        let old = manifest(|m| {
            m["settings"] = serde_json::json!([{"name": "REPO", "kind": "text", "why": "w"}]);
        })
        .unwrap();
        let same = manifest(|m| {
            m["settings"] =
                serde_json::json!([{"name": "REPO", "kind": "text", "why": "other words"}]);
        })
        .unwrap();
        assert!(same.widening(&old).is_empty());
        let wider = manifest(|m| {
            m["settings"] = serde_json::json!([
                {"name": "REPO", "kind": "secret", "why": "w"},
                {"name": "TOKEN", "kind": "secret", "why": "w"}
            ]);
        })
        .unwrap();
        assert_eq!(
            wider.widening(&old),
            vec![
                "a new setting REPO (secret)",
                "a new setting TOKEN (secret)"
            ]
        );
        let fewer = manifest(|_| {}).unwrap();
        assert!(
            fewer.widening(&old).is_empty(),
            "dropping a setting asks nothing"
        );
    }
}
