//! The chore header: what a chore script declares about itself, parsed by a
//! small hand-written parser that refuses anything it does not know. The
//! format is documented in `docs/chores.md`.
//!
//! ```text
//! #!/bin/sh
//! # aromba-chore: 1
//! # name: apt-clean
//! # description: Empty the apt package cache
//! # color: green
//! # touches: /var/cache/apt/archives
//! # reads: /var/lib/dpkg
//! # max_changes: 1000 files, 20 GB
//! # network: no
//! # schedule: weekly sun 04:00
//! # action: timedatectl set-ntp true
//! # env: KEEP_DAYS=7
//! # end
//! ```

#![forbid(unsafe_code)]

use std::fmt;
use std::path::PathBuf;

pub const MAX_TOUCHES: usize = 16;
pub const MAX_READS: usize = 16;
pub const MAX_ACTIONS: usize = 8;
pub const MAX_ENV: usize = 16;
/// The default damage cap: 1,000 files or 20 GB in one run.
pub const DEFAULT_MAX_FILES: u64 = 1000;
pub const DEFAULT_MAX_GB: u64 = 20;

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Color {
    Green,
    Yellow,
    Red,
}

impl Color {
    pub fn name(self) -> &'static str {
        match self {
            Color::Green => "green",
            Color::Yellow => "yellow",
            Color::Red => "red",
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Schedule {
    Manual,
    Daily {
        hour: u8,
        minute: u8,
    },
    /// `day`: 0 = Monday … 6 = Sunday.
    Weekly {
        day: u8,
        hour: u8,
        minute: u8,
    },
    Monthly {
        day: u8,
        hour: u8,
        minute: u8,
    },
}

const DAYS: [&str; 7] = ["mon", "tue", "wed", "thu", "fri", "sat", "sun"];

impl fmt::Display for Schedule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Schedule::Manual => f.write_str("manual"),
            Schedule::Daily { hour, minute } => write!(f, "daily {hour:02}:{minute:02}"),
            Schedule::Weekly { day, hour, minute } => {
                write!(
                    f,
                    "weekly {} {hour:02}:{minute:02}",
                    DAYS[usize::from(*day) % 7]
                )
            }
            Schedule::Monthly { day, hour, minute } => {
                write!(f, "monthly {day} {hour:02}:{minute:02}")
            }
        }
    }
}

/// A chore's header, validated.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Header {
    pub name: String,
    pub description: String,
    pub color: Color,
    /// The only paths the chore may write; empty for `touches: none`.
    pub touches: Vec<PathBuf>,
    /// Paths the cage shows read-only beyond the system directories; empty
    /// for `reads: none` or no `reads:` line.
    pub reads: Vec<PathBuf>,
    pub max_files: u64,
    pub max_gb: u64,
    pub network: bool,
    pub schedule: Schedule,
    /// Chore actions it may request after a clean real run, each a command
    /// and its arguments, judged by the policy's `[[chore_action]]` list.
    pub actions: Vec<Vec<String>>,
    pub env: Vec<(String, String)>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HeaderError {
    pub line: usize,
    pub what: String,
}

impl fmt::Display for HeaderError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "chore header line {}: {}", self.line, self.what)
    }
}

impl std::error::Error for HeaderError {}

fn is_name(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 48
        && s.bytes()
            .next()
            .is_some_and(|b| b.is_ascii_lowercase() || b.is_ascii_digit())
        && s.bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
}

fn printable(s: &str, max: usize) -> bool {
    !s.is_empty() && s.len() <= max && s.chars().all(|c| !c.is_control())
}

fn parse_clock(s: &str) -> Option<(u8, u8)> {
    let (h, m) = s.split_once(':')?;
    if h.len() != 2 || m.len() != 2 {
        return None;
    }
    let (h, m): (u8, u8) = (h.parse().ok()?, m.parse().ok()?);
    (h < 24 && m < 60).then_some((h, m))
}

fn parse_schedule(v: &str) -> Option<Schedule> {
    let parts: Vec<&str> = v.split(' ').collect();
    match parts.as_slice() {
        ["manual"] => Some(Schedule::Manual),
        ["daily", t] => parse_clock(t).map(|(hour, minute)| Schedule::Daily { hour, minute }),
        ["weekly", d, t] => {
            let day = DAYS.iter().position(|x| x == d)? as u8;
            parse_clock(t).map(|(hour, minute)| Schedule::Weekly { day, hour, minute })
        }
        ["monthly", d, t] => {
            let day: u8 = d.parse().ok().filter(|d| (1..=28).contains(d))?;
            if d.starts_with('0') {
                return None;
            }
            parse_clock(t).map(|(hour, minute)| Schedule::Monthly { day, hour, minute })
        }
        _ => None,
    }
}

/// A `touches:` or `reads:` path: absolute, clean (no `//`, `.`, `..` or
/// trailing `/`), of plain characters, and no secret path of the policy.
fn parse_path(key: &str, v: &str) -> Result<PathBuf, String> {
    if !v.starts_with('/') || v == "/" {
        return Err(format!(
            "{key}: {v:?} must be an absolute path other than /"
        ));
    }
    if v.len() > 4096
        || v.contains("//")
        || v.ends_with('/')
        || v.split('/').any(|c| c == ".." || c == ".")
    {
        return Err(format!("{key}: {v:?} must be a clean absolute path"));
    }
    if !v
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'/' | b'.' | b'_' | b'-' | b'@' | b'+'))
    {
        return Err(format!(
            "{key}: {v:?} holds a character a path here may not"
        ));
    }
    crate::policy::secret_rule(v).map_err(|e| format!("{key}: {e}"))?;
    Ok(PathBuf::from(v))
}

fn parse_touch(v: &str) -> Result<PathBuf, String> {
    parse_path("touches", v)
}

/// The cage makes `/proc`, `/dev` and `/tmp` itself: a read there would
/// put the host's own over them (the host's processes, its devices).
const NOT_READABLE: [&str; 3] = ["/proc", "/dev", "/tmp"];

fn parse_read(v: &str) -> Result<PathBuf, String> {
    let path = parse_path("reads", v)?;
    if let Some(top) = NOT_READABLE.iter().find(|t| path.starts_with(t)) {
        return Err(format!(
            "reads: {v:?} is under {top}, which the cage makes itself"
        ));
    }
    Ok(path)
}

fn parse_max_changes(v: &str) -> Option<(u64, u64)> {
    let (files, gb) = v.split_once(", ")?;
    let files: u64 = files.strip_suffix(" files")?.parse().ok()?;
    let gb: u64 = gb.strip_suffix(" GB")?.parse().ok()?;
    (files > 0 && gb > 0 && files <= 10_000_000 && gb <= 100_000).then_some((files, gb))
}

fn parse_env(v: &str) -> Option<(String, String)> {
    let (k, val) = v.split_once('=')?;
    let key_ok = !k.is_empty()
        && k.len() <= 32
        && k.bytes().next().is_some_and(|b| b.is_ascii_uppercase())
        && k.bytes()
            .all(|b| b.is_ascii_uppercase() || b.is_ascii_digit() || b == b'_')
        && k != "PATH";
    let val_ok = val.len() <= 256
        && val.bytes().all(|b| {
            b.is_ascii_alphanumeric()
                || matches!(b, b'_' | b'.' | b',' | b':' | b'/' | b'=' | b'+' | b'-')
        });
    (key_ok && val_ok).then(|| (k.to_string(), val.to_string()))
}

/// Lists the Warden fills in when a chore runs, from reads of its own: an
/// action may end in one of these.
pub const PLACEHOLDERS: [&str; 2] = ["@security-upgrades", "@failed-services"];

fn parse_action(v: &str) -> Option<Vec<String>> {
    let words: Vec<String> = v.split(' ').map(String::from).collect();
    let ok = !words.is_empty()
        && words.len() <= 24
        && words
            .iter()
            .all(|w| !w.is_empty() && w.len() <= 128 && w.bytes().all(|b| b.is_ascii_graphic()));
    // A placeholder is known and comes last; no other word starts with `@`.
    let placeholders_ok = words.iter().enumerate().all(|(i, w)| {
        !w.starts_with('@') || (i == words.len() - 1 && PLACEHOLDERS.contains(&w.as_str()))
    });
    (ok && placeholders_ok).then_some(words)
}

impl Header {
    /// Parses the header at the top of `script`.
    pub fn parse(script: &str) -> Result<Header, HeaderError> {
        let mut lines = script.lines().enumerate().peekable();
        let err = |line: usize, what: String| HeaderError {
            line: line + 1,
            what,
        };
        if lines.peek().is_some_and(|(_, l)| l.starts_with("#!")) {
            lines.next();
        }
        match lines.next() {
            Some((_, "# aromba-chore: 1")) => {}
            Some((n, _)) => {
                return Err(err(
                    n,
                    "the header must start with \"# aromba-chore: 1\"".into(),
                ));
            }
            None => return Err(err(0, "the script is empty".into())),
        }
        let (mut name, mut description, mut color, mut touches, mut max, mut network, mut schedule) =
            (None, None, None, None::<Vec<PathBuf>>, None, None, None);
        let mut reads = None::<Vec<PathBuf>>;
        let mut actions = Vec::new();
        let mut env = Vec::new();
        for (n, line) in lines.by_ref() {
            if line == "# end" {
                let missing = [
                    ("name", name.is_none()),
                    ("description", description.is_none()),
                    ("color", color.is_none()),
                    ("touches", touches.is_none()),
                    ("network", network.is_none()),
                    ("schedule", schedule.is_none()),
                ]
                .into_iter()
                .find(|(_, m)| *m);
                if let Some((field, _)) = missing {
                    return Err(err(n, format!("the header lacks {field}")));
                }
                let (max_files, max_gb) = max.unwrap_or((DEFAULT_MAX_FILES, DEFAULT_MAX_GB));
                return Ok(Header {
                    name: name.unwrap_or_default(),
                    description: description.unwrap_or_default(),
                    color: color.unwrap_or(Color::Red),
                    touches: touches.unwrap_or_default(),
                    reads: reads.unwrap_or_default(),
                    max_files,
                    max_gb,
                    network: network.unwrap_or(false),
                    schedule: schedule.unwrap_or(Schedule::Manual),
                    actions,
                    env,
                });
            }
            let Some(rest) = line.strip_prefix("# ") else {
                return Err(err(
                    n,
                    "every header line is \"# key: value\" until \"# end\"".into(),
                ));
            };
            let Some((key, value)) = rest.split_once(": ") else {
                return Err(err(n, format!("{rest:?} is not \"key: value\"")));
            };
            if value.is_empty() || value != value.trim() {
                return Err(err(n, format!("{key}: the value is empty or padded")));
            }
            let once = |slot_is_some: bool| {
                if slot_is_some {
                    Err(err(n, format!("{key} is given twice")))
                } else {
                    Ok(())
                }
            };
            match key {
                "name" => {
                    once(name.is_some())?;
                    if !is_name(value) {
                        return Err(err(
                            n,
                            format!(
                                "name: {value:?} must be lower-case letters, digits and -, at most 48"
                            ),
                        ));
                    }
                    name = Some(value.to_string());
                }
                "description" => {
                    once(description.is_some())?;
                    if !printable(value, 200) {
                        return Err(err(
                            n,
                            "description: at most 200 printable characters".into(),
                        ));
                    }
                    description = Some(value.to_string());
                }
                "color" => {
                    once(color.is_some())?;
                    color = Some(match value {
                        "green" => Color::Green,
                        "yellow" => Color::Yellow,
                        "red" => Color::Red,
                        _ => {
                            return Err(err(
                                n,
                                format!("color: {value:?} is not green, yellow or red"),
                            ));
                        }
                    });
                }
                "touches" => {
                    if value == "none" {
                        once(touches.is_some())?;
                        touches = Some(Vec::new());
                    } else {
                        if touches.as_ref().is_some_and(Vec::is_empty) {
                            return Err(err(n, "touches: none, and then a path".into()));
                        }
                        let t = touches.get_or_insert_with(Vec::new);
                        let path = parse_touch(value).map_err(|w| err(n, w))?;
                        if t.contains(&path) || t.len() >= MAX_TOUCHES {
                            return Err(err(
                                n,
                                format!(
                                    "touches: {value:?} is repeated or one too many (at most {MAX_TOUCHES})"
                                ),
                            ));
                        }
                        t.push(path);
                    }
                }
                "reads" => {
                    if value == "none" {
                        once(reads.is_some())?;
                        reads = Some(Vec::new());
                    } else {
                        if reads.as_ref().is_some_and(Vec::is_empty) {
                            return Err(err(n, "reads: none, and then a path".into()));
                        }
                        let r = reads.get_or_insert_with(Vec::new);
                        let path = parse_read(value).map_err(|w| err(n, w))?;
                        if r.contains(&path) || r.len() >= MAX_READS {
                            return Err(err(
                                n,
                                format!(
                                    "reads: {value:?} is repeated or one too many (at most {MAX_READS})"
                                ),
                            ));
                        }
                        r.push(path);
                    }
                }
                "max_changes" => {
                    once(max.is_some())?;
                    max = Some(parse_max_changes(value).ok_or_else(|| {
                        err(
                            n,
                            format!("max_changes: {value:?} is not \"N files, M GB\""),
                        )
                    })?);
                }
                "network" => {
                    once(network.is_some())?;
                    network = Some(match value {
                        "yes" => true,
                        "no" => false,
                        _ => return Err(err(n, format!("network: {value:?} is not yes or no"))),
                    });
                }
                "schedule" => {
                    once(schedule.is_some())?;
                    schedule = Some(parse_schedule(value).ok_or_else(|| {
                        err(n, format!("schedule: {value:?} is not manual, daily HH:MM, weekly DAY HH:MM or monthly D HH:MM"))
                    })?);
                }
                "action" => {
                    if actions.len() >= MAX_ACTIONS {
                        return Err(err(n, format!("at most {MAX_ACTIONS} actions")));
                    }
                    actions.push(parse_action(value).ok_or_else(|| {
                        err(
                            n,
                            format!("action: {value:?} is not a command and its arguments"),
                        )
                    })?);
                }
                "env" => {
                    if env.len() >= MAX_ENV {
                        return Err(err(n, format!("at most {MAX_ENV} env lines")));
                    }
                    let (k, v) = parse_env(value)
                        .ok_or_else(|| err(n, format!("env: {value:?} is not NAME=value")))?;
                    if env.iter().any(|(e, _)| e == &k) {
                        return Err(err(n, format!("env: {k} is given twice")));
                    }
                    env.push((k, v));
                }
                other => return Err(err(n, format!("unknown header key {other:?}"))),
            }
        }
        Err(err(
            script.lines().count(),
            "the header has no \"# end\" line".into(),
        ))
    }

    /// The header as text: `parse(render())` gives back the same header.
    pub fn render(&self) -> String {
        let mut out = String::from("# aromba-chore: 1\n");
        out.push_str(&format!(
            "# name: {}\n# description: {}\n# color: {}\n",
            self.name,
            self.description,
            self.color.name()
        ));
        if self.touches.is_empty() {
            out.push_str("# touches: none\n");
        }
        for t in &self.touches {
            out.push_str(&format!("# touches: {}\n", t.display()));
        }
        for r in &self.reads {
            out.push_str(&format!("# reads: {}\n", r.display()));
        }
        out.push_str(&format!(
            "# max_changes: {} files, {} GB\n",
            self.max_files, self.max_gb
        ));
        out.push_str(&format!(
            "# network: {}\n",
            if self.network { "yes" } else { "no" }
        ));
        out.push_str(&format!("# schedule: {}\n", self.schedule));
        for a in &self.actions {
            out.push_str(&format!("# action: {}\n", a.join(" ")));
        }
        for (k, v) in &self.env {
            out.push_str(&format!("# env: {k}={v}\n"));
        }
        out.push_str("# end\n");
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const APT: &str = "#!/bin/sh\n# aromba-chore: 1\n# name: apt-clean\n# description: Empty the apt package cache\n# color: green\n# touches: /var/cache/apt/archives\n# network: no\n# schedule: weekly sun 04:00\n# end\napt-get clean\n";

    #[test]
    fn parses_a_header_and_renders_it_back() {
        let h = Header::parse(APT).unwrap();
        assert_eq!(h.name, "apt-clean");
        assert_eq!(h.color, Color::Green);
        assert_eq!(
            h.schedule,
            Schedule::Weekly {
                day: 6,
                hour: 4,
                minute: 0
            }
        );
        assert_eq!((h.max_files, h.max_gb), (1000, 20));
        assert_eq!(Header::parse(&h.render()).unwrap(), h);
    }

    #[test]
    fn refuses_unknown_keys_duplicates_and_bad_values() {
        let bad = [
            APT.replace("# network: no", "# network: no\n# sudo: yes"),
            APT.replace("# color: green", "# color: green\n# color: red"),
            APT.replace("# color: green", "# color: blue"),
            APT.replace("/var/cache/apt/archives", "/var/../etc"),
            APT.replace("/var/cache/apt/archives", "/"),
            APT.replace("/var/cache/apt/archives", "/root/.ssh"),
            APT.replace("/var/cache/apt/archives", "/etc/aromba/warden"),
            APT.replace("weekly sun 04:00", "weekly sun 24:00"),
            APT.replace("# name: apt-clean", "# name: Apt Clean"),
            APT.replace("# end\n", ""),
            APT.replace("# name: apt-clean\n", ""),
            APT.replace("# network: no", "# env: PATH=/tmp"),
            APT.replace("# aromba-chore: 1", "# aromba-chore: 2"),
            APT.replace("# network: no", "#network: no"),
            APT.replace(
                "# network: no",
                "# network: no\n# action: apt-get install -y @everything",
            ),
            APT.replace(
                "# network: no",
                "# network: no\n# action: systemctl restart @failed-services now",
            ),
            APT.replace("# network: no", "# touches: none\n# network: no"),
        ];
        for script in bad {
            assert!(Header::parse(&script).is_err(), "accepted:\n{script}");
        }
    }

    fn with_reads(lines: &str) -> String {
        APT.replace("# network: no", &format!("{lines}# network: no"))
    }

    #[test]
    fn parses_reads_one_path_a_line_and_renders_them_back() {
        let h = Header::parse(&with_reads(
            "# reads: /var/lib/dpkg\n# reads: /srv/www-data\n",
        ))
        .unwrap();
        assert_eq!(
            h.reads,
            [
                PathBuf::from("/var/lib/dpkg"),
                PathBuf::from("/srv/www-data")
            ]
        );
        assert!(
            h.render()
                .contains("# reads: /var/lib/dpkg\n# reads: /srv/www-data\n")
        );
        assert_eq!(Header::parse(&h.render()).unwrap(), h);
        // Optional: no line, or `none`, is no read at all.
        assert!(Header::parse(APT).unwrap().reads.is_empty());
        let none = Header::parse(&with_reads("# reads: none\n")).unwrap();
        assert!(none.reads.is_empty());
        assert_eq!(Header::parse(&none.render()).unwrap(), none);
    }

    #[test]
    fn refuses_reads_that_are_relative_unclean_repeated_secret_or_made_by_the_cage() {
        let bad = [
            "# reads: var/lib/dpkg\n",
            "# reads: /var/lib/../../etc\n",
            "# reads: /var/lib/./dpkg\n",
            "# reads: /var//lib\n",
            "# reads: /var/lib/\n",
            "# reads: /\n",
            "# reads: \n",
            "# reads:\n",
            "# reads: /var/lib/dpkg /srv\n",
            "# reads: /var/lib/dpkg,/srv\n",
            "# reads: /var/lib/dpkg \n",
            "# reads: /var/lib/dpkg\n# reads: /var/lib/dpkg\n",
            "# reads: none\n# reads: none\n",
            "# reads: none\n# reads: /srv\n",
            "# reads: /srv\n# reads: none\n",
            "# reads: /root/.ssh\n",
            "# reads: /home/alice/.aws\n",
            "# reads: /etc/ssl/private/server.key\n",
            "# reads: /etc/shadow\n",
            "# reads: /etc/aromba/warden\n",
            "# reads: /srv/app/.env\n",
            "# reads: /proc\n",
            "# reads: /proc/1/root\n",
            "# reads: /dev/sda\n",
            "# reads: /tmp/x\n",
        ];
        for lines in bad {
            let script = with_reads(lines);
            assert!(Header::parse(&script).is_err(), "accepted:\n{script}");
        }
        let many: String = (0..=MAX_READS)
            .map(|i| format!("# reads: /srv/d{i}\n"))
            .collect();
        assert!(Header::parse(&with_reads(&many)).is_err());
        let why = Header::parse(&with_reads("# reads: /etc/ssl/private/server.key\n"))
            .unwrap_err()
            .to_string();
        assert!(
            why.contains("reads:") && why.contains("secret_names"),
            "{why}"
        );
    }
}
