//! The assistant's tools: typed, never a command string. A model's tool
//! call is parsed strictly (its name one of [`NAMES`], its arguments a JSON
//! object with exactly the fields the tool takes, each of its type and
//! within its bounds) into a [`Tool`]; a read tool becomes exactly one
//! `read` request the Warden's policy allows, built here from the typed
//! fields — the model never writes an argument vector. The Warden then
//! judges the request as it judges any other: a refusal goes back to the
//! model as a refusal, and counts on the ladder like any other.
//!
//! Hostile values are refused here first (an option where a path or a
//! unit goes, `..`, a relative path, a control byte, a number out of
//! range), and again by the Warden, whose path check also refuses the
//! secret paths.
//!
//! ```ignore
//! let tool = tools::parse("disk_usage", r#"{"path": "/var", "depth": 1}"#)?;
//! assert_eq!(
//!     tool.read(&paths),
//!     Some(("du".into(), vec!["-x".into(), "-h".into(), "--max-depth=1".into(), "/var".into()]))
//! );
//! ```

use serde::Deserialize;
use serde_json::{Value, json};

/// Why a tool call is refused before anything is asked.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ToolError {
    #[error("there is no tool named {0:?}")]
    Unknown(String),
    #[error("the arguments of {tool} are not what it takes: {why}")]
    Arguments { tool: &'static str, why: String },
}

/// A tool call, parsed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Tool {
    /// Sizes of the folders under `path`, `depth` levels down.
    DiskUsage {
        path: String,
        depth: u8,
    },
    /// The journal: of one unit or all, since some hours ago, the last
    /// `lines` lines; `grep` keeps the lines holding it (applied to the
    /// Warden's redacted answer: the policy has no pattern argument).
    Journal {
        unit: Option<String>,
        since_hours: Option<u32>,
        lines: u32,
        grep: Option<String>,
    },
    ServiceStatus {
        unit: String,
    },
    Containers,
    ContainerLogs {
        name: String,
        tail: u32,
    },
    ListeningSockets,
    PendingUpdates,
    Memory,
    Load,
    /// Proposes a chore of the Warden's list; `why` is shown to nobody as
    /// an instruction (it is the model's note, kept in the answer's text).
    ProposeChore {
        name: String,
        why: String,
    },
    /// The tools the skills installed here brought, each with what it does.
    SkillTools,
    /// Runs tool `tool` of skill `skill`: the Warden runs it caged with
    /// nothing writable, its output redacted as a read's.
    SkillTool {
        skill: String,
        tool: String,
    },
    /// The skills of Aromba's catalogue (signed with the release key), each
    /// with whether and at which version it is installed here.
    SkillCatalogue,
    /// Proposes installing skill `name` of the catalogue: the Worker
    /// downloads it and the Warden proposes it, its whole manifest shown
    /// to the owner, who decides. `why` is the model's note, as a chore
    /// proposal's.
    ProposeSkill {
        name: String,
        why: String,
    },
}

/// Every tool's name, as the model calls it.
pub const NAMES: [&str; 14] = [
    "disk_usage",
    "journal",
    "service_status",
    "containers",
    "container_logs",
    "listening_sockets",
    "pending_updates",
    "memory",
    "load",
    "propose_chore",
    "skill_tools",
    "skill_tool",
    "skill_catalogue",
    "propose_skill",
];

const MAX_PATH: usize = 256;
const MAX_LINES: u32 = 500;
const MAX_SINCE_HOURS: u32 = 24 * 30;
const MAX_GREP: usize = 64;
const MAX_WHY: usize = 300;

fn bad(tool: &'static str, why: impl Into<String>) -> ToolError {
    ToolError::Arguments {
        tool,
        why: why.into(),
    }
}

/// A path as the tools take it: absolute, plain, no `..`, no option.
fn path(tool: &'static str, p: &str) -> Result<String, ToolError> {
    if !p.starts_with('/') {
        return Err(bad(tool, "the path must be absolute"));
    }
    if p.len() > MAX_PATH {
        return Err(bad(
            tool,
            format!("the path is longer than {MAX_PATH} bytes"),
        ));
    }
    if p.chars().any(char::is_control) {
        return Err(bad(tool, "the path holds a control character"));
    }
    if p.split('/').any(|c| c == "..") {
        return Err(bad(tool, "the path may not hold .."));
    }
    // The Warden refuses a secret path too, and climbs its ladder for it:
    // refused here first, as written (the conversation asks its host how
    // the path resolves, and judges that too).
    let normal: String = p
        .split('/')
        .filter(|c| !c.is_empty() && *c != ".")
        .fold(String::new(), |acc, c| acc + "/" + c);
    if let Some(rule) = super::secret_paths::covering(&normal) {
        return Err(bad(
            tool,
            format!("{normal} is a secret path ({rule}): nothing there is read"),
        ));
    }
    Ok(p.to_string())
}

/// A systemd unit or a container name: letters, digits and `@._-:`, not
/// an option.
fn name(tool: &'static str, what: &str, s: &str) -> Result<String, ToolError> {
    let ok = !s.is_empty()
        && s.len() <= 128
        && !s.starts_with('-')
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"@._-:".contains(&b));
    if ok {
        Ok(s.to_string())
    } else {
        Err(bad(
            tool,
            format!("{what} must be letters, digits and @ . _ - : (not starting with -)"),
        ))
    }
}

fn within(tool: &'static str, what: &str, n: u32, lo: u32, hi: u32) -> Result<u32, ToolError> {
    if (lo..=hi).contains(&n) {
        Ok(n)
    } else {
        Err(bad(tool, format!("{what} must be {lo} to {hi}")))
    }
}

fn args<T: for<'de> Deserialize<'de>>(tool: &'static str, text: &str) -> Result<T, ToolError> {
    // An empty argument string is an empty object (some servers send it).
    let text = if text.trim().is_empty() { "{}" } else { text };
    let value: Value = serde_json::from_str(text).map_err(|e| bad(tool, e.to_string()))?;
    if !value.is_object() {
        return Err(bad(tool, "the arguments must be a JSON object"));
    }
    serde_json::from_value(value).map_err(|e| bad(tool, e.to_string()))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct DiskUsageArgs {
    path: String,
    #[serde(default = "one")]
    depth: u8,
}

fn one() -> u8 {
    1
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct JournalArgs {
    unit: Option<String>,
    since_hours: Option<u32>,
    #[serde(default = "fifty")]
    lines: u32,
    grep: Option<String>,
}

fn fifty() -> u32 {
    50
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct UnitArgs {
    unit: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ContainerLogsArgs {
    name: String,
    #[serde(default = "fifty")]
    tail: u32,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct NoArgs {}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct SkillToolArgs {
    skill: String,
    tool: String,
}

/// A skill's or a tool's name: `[a-z][a-z0-9-]{1,31}`.
fn skill_name(tool: &'static str, field: &str, v: &str) -> Result<String, ToolError> {
    let b = v.as_bytes();
    let ok = (2..=32).contains(&b.len())
        && b[0].is_ascii_lowercase()
        && b.iter()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == b'-');
    if ok {
        Ok(v.to_string())
    } else {
        Err(bad(
            tool,
            format!("{field} must be 2 to 32 of a-z, 0-9 and -, starting with a letter"),
        ))
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ProposeArgs {
    name: String,
    why: String,
}

/// A proposal's reason: at most [`MAX_WHY`] bytes, no control character
/// but a line break.
fn why(tool: &'static str, why: String) -> Result<String, ToolError> {
    if why.len() > MAX_WHY || why.chars().any(|c| c.is_control() && c != '\n') {
        return Err(bad(
            tool,
            format!("why must be at most {MAX_WHY} plain bytes"),
        ));
    }
    Ok(why)
}

/// Parses the call of tool `tool_name` with the JSON `arguments`.
pub fn parse(tool_name: &str, arguments: &str) -> Result<Tool, ToolError> {
    let parsed = parse_fields(tool_name, arguments)?;
    // The Warden matches its deny list against the whole request first, and
    // a hit climbs its ladder: refused here instead.
    if let Some((cmd, args)) = parsed.read(&|rel| format!("/{rel}"))
        && let Some(rule) = aromba_warden_proto::rules::deny_hit(&cmd, &args)
    {
        return Err(ToolError::Arguments {
            tool: NAMES
                .iter()
                .find(|n| **n == tool_name)
                .copied()
                .unwrap_or("the tool"),
            why: format!("the request would match the Warden's deny rule {rule:?}"),
        });
    }
    Ok(parsed)
}

fn parse_fields(tool_name: &str, arguments: &str) -> Result<Tool, ToolError> {
    let Some(&tool) = NAMES.iter().find(|n| **n == tool_name) else {
        return Err(ToolError::Unknown(tool_name.chars().take(64).collect()));
    };
    Ok(match tool {
        "disk_usage" => {
            let a: DiskUsageArgs = args(tool, arguments)?;
            Tool::DiskUsage {
                path: path(tool, &a.path)?,
                depth: within(tool, "depth", a.depth.into(), 1, 3)? as u8,
            }
        }
        "journal" => {
            let a: JournalArgs = args(tool, arguments)?;
            let grep = match a.grep {
                Some(g)
                    if g.is_empty() || g.len() > MAX_GREP || g.chars().any(char::is_control) =>
                {
                    return Err(bad(
                        tool,
                        format!("grep must be 1 to {MAX_GREP} plain characters"),
                    ));
                }
                g => g,
            };
            Tool::Journal {
                unit: a.unit.map(|u| name(tool, "unit", &u)).transpose()?,
                since_hours: a
                    .since_hours
                    .map(|h| within(tool, "since_hours", h, 1, MAX_SINCE_HOURS))
                    .transpose()?,
                lines: within(tool, "lines", a.lines, 1, MAX_LINES)?,
                grep,
            }
        }
        "service_status" => {
            let a: UnitArgs = args(tool, arguments)?;
            Tool::ServiceStatus {
                unit: name(tool, "unit", &a.unit)?,
            }
        }
        "container_logs" => {
            let a: ContainerLogsArgs = args(tool, arguments)?;
            Tool::ContainerLogs {
                name: name(tool, "name", &a.name)?,
                tail: within(tool, "tail", a.tail, 1, MAX_LINES)?,
            }
        }
        "propose_chore" => {
            let a: ProposeArgs = args(tool, arguments)?;
            Tool::ProposeChore {
                name: name(tool, "name", &a.name)?,
                why: why(tool, a.why)?,
            }
        }
        "propose_skill" => {
            let a: ProposeArgs = args(tool, arguments)?;
            Tool::ProposeSkill {
                name: skill_name(tool, "name", &a.name)?,
                why: why(tool, a.why)?,
            }
        }
        "skill_tool" => {
            let a: SkillToolArgs = args(tool, arguments)?;
            Tool::SkillTool {
                skill: skill_name(tool, "skill", &a.skill)?,
                tool: skill_name(tool, "tool", &a.tool)?,
            }
        }
        other => {
            let _: NoArgs = args(tool, arguments)?;
            match other {
                "skill_tools" => Tool::SkillTools,
                "skill_catalogue" => Tool::SkillCatalogue,
                "containers" => Tool::Containers,
                "listening_sockets" => Tool::ListeningSockets,
                "pending_updates" => Tool::PendingUpdates,
                "memory" => Tool::Memory,
                _ => Tool::Load,
            }
        }
    })
}

impl Tool {
    /// The one read this tool asks of the Warden (`cmd`, its arguments),
    /// with paths under `system` (`/`, or a test's root); `None` for
    /// the proposals, and the skills' tools and catalogue, which the Warden
    /// or the Worker serve otherwise.
    pub fn read(&self, system: &dyn Fn(&str) -> String) -> Option<(String, Vec<String>)> {
        let v = |items: &[&str]| items.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        Some(match self {
            Tool::DiskUsage { path, depth } => (
                "du".into(),
                vec![
                    "-x".into(),
                    "-h".into(),
                    format!("--max-depth={depth}"),
                    system(path.trim_start_matches('/')),
                ],
            ),
            Tool::Journal {
                unit,
                since_hours,
                lines,
                ..
            } => {
                let mut a = v(&["--no-pager", "-q"]);
                if let Some(unit) = unit {
                    a.push(format!("--unit={unit}"));
                }
                if let Some(h) = since_hours {
                    a.push(format!("--since={h} hours ago"));
                }
                a.push(format!("--lines={lines}"));
                ("journalctl".into(), a)
            }
            Tool::ServiceStatus { unit } => (
                "systemctl".into(),
                vec![
                    "status".into(),
                    "--no-pager".into(),
                    "--lines=20".into(),
                    unit.clone(),
                ],
            ),
            Tool::Containers => ("docker".into(), v(&["ps", "-a"])),
            Tool::ContainerLogs { name, tail } => (
                "docker".into(),
                vec!["logs".into(), format!("--tail={tail}"), name.clone()],
            ),
            Tool::ListeningSockets => ("ss".into(), v(&["-tulnH"])),
            Tool::PendingUpdates => ("apt".into(), v(&["list", "--upgradable"])),
            Tool::Memory => ("free".into(), v(&["-h"])),
            Tool::Load => ("uptime".into(), Vec::new()),
            Tool::ProposeChore { .. }
            | Tool::SkillTools
            | Tool::SkillTool { .. }
            | Tool::SkillCatalogue
            | Tool::ProposeSkill { .. } => {
                return None;
            }
        })
    }

    /// The same read of `resolved` (the host's resolution of
    /// [`Tool::path`]); any other tool unchanged.
    pub fn at(self, resolved: String) -> Tool {
        match self {
            Tool::DiskUsage { depth, .. } => Tool::DiskUsage {
                path: resolved,
                depth,
            },
            other => other,
        }
    }

    /// The path a read names, for the host to resolve.
    pub fn path(&self) -> Option<&str> {
        match self {
            Tool::DiskUsage { path, .. } => Some(path),
            _ => None,
        }
    }

    /// What the Worker does to the Warden's (redacted) answer before the
    /// model sees it: the journal's `grep`.
    pub fn filter(&self, text: &str) -> String {
        match self {
            Tool::Journal {
                grep: Some(needle), ..
            } => {
                let needle = needle.to_lowercase();
                text.lines()
                    .filter(|l| l.to_lowercase().contains(&needle))
                    .collect::<Vec<_>>()
                    .join("\n")
            }
            _ => text.to_string(),
        }
    }
}

/// The tools as the model is told of them (OpenAI's `tools` shape; the
/// Anthropic client reshapes them).
pub fn definitions() -> Value {
    let tool = |name: &str, description: &str, properties: Value, required: &[&str]| {
        json!({
            "type": "function",
            "function": {
                "name": name,
                "description": description,
                "parameters": {
                    "type": "object",
                    "properties": properties,
                    "required": required,
                    "additionalProperties": false,
                },
            },
        })
    };
    json!([
        tool(
            "disk_usage",
            "Sizes of the folders under an absolute path (du), 1 to 3 levels down.",
            json!({"path": {"type": "string"}, "depth": {"type": "integer", "minimum": 1, "maximum": 3}}),
            &["path"],
        ),
        tool(
            "journal",
            "The system journal: one unit's or all, since some hours ago, the last lines; grep keeps the lines holding a word.",
            json!({
                "unit": {"type": "string"},
                "since_hours": {"type": "integer", "minimum": 1, "maximum": MAX_SINCE_HOURS},
                "lines": {"type": "integer", "minimum": 1, "maximum": MAX_LINES},
                "grep": {"type": "string", "maxLength": MAX_GREP},
            }),
            &[],
        ),
        tool(
            "service_status",
            "A systemd unit's status and its last log lines.",
            json!({"unit": {"type": "string"}}),
            &["unit"],
        ),
        tool(
            "containers",
            "Every Docker container and its state.",
            json!({}),
            &[]
        ),
        tool(
            "container_logs",
            "The last lines of a Docker container's log.",
            json!({"name": {"type": "string"}, "tail": {"type": "integer", "minimum": 1, "maximum": MAX_LINES}}),
            &["name"],
        ),
        tool(
            "listening_sockets",
            "The TCP and UDP ports listening here.",
            json!({}),
            &[]
        ),
        tool(
            "pending_updates",
            "Packages with an update waiting.",
            json!({}),
            &[]
        ),
        tool("memory", "Memory and swap in use.", json!({}), &[]),
        tool("load", "Uptime and load averages.", json!({}), &[]),
        tool(
            "propose_chore",
            "Propose one of the server's chores (by its name in the chore list) to the person, who decides with a button. It runs nothing.",
            json!({"name": {"type": "string"}, "why": {"type": "string", "maxLength": MAX_WHY}}),
            &["name", "why"],
        ),
        tool(
            "skill_tools",
            "The read-only tools the skills installed here brought, each with what it does (a skill is a signed add-on the owner installed).",
            json!({}),
            &[]
        ),
        tool(
            "skill_tool",
            "Run one of the tools skill_tools lists, by its skill's name and its own. It reads only: it can write nothing.",
            json!({"skill": {"type": "string"}, "tool": {"type": "string"}}),
            &["skill", "tool"],
        ),
        tool(
            "skill_catalogue",
            "The skills of Aromba's catalogue (signed add-ons the owner may install), each with what it does and whether it is installed here, at which version.",
            json!({}),
            &[]
        ),
        tool(
            "propose_skill",
            "Propose installing one skill of skill_catalogue, by its name, to the owner, who sees everything it would be able to do and decides in the app. It installs nothing. At most one an answer.",
            json!({"name": {"type": "string"}, "why": {"type": "string", "maxLength": MAX_WHY}}),
            &["name", "why"],
        ),
    ])
}

#[cfg(test)]
mod tests {
    use super::*;

    fn system(rel: &str) -> String {
        format!("/{rel}")
    }

    fn read(name: &str, args: &str) -> (String, Vec<String>) {
        parse(name, args)
            .unwrap_or_else(|e| panic!("{name} {args}: {e}"))
            .read(&system)
            .expect("a read")
    }

    #[test]
    fn each_read_tool_is_one_request_the_wardens_policy_allows() {
        use aromba_warden::policy::{Requester, Table, check};
        let calls = [
            ("disk_usage", r#"{"path": "/var/log", "depth": 2}"#),
            ("disk_usage", r#"{"path": "/"}"#),
            ("journal", r#"{}"#),
            (
                "journal",
                r#"{"unit": "nginx.service", "since_hours": 6, "lines": 200, "grep": "error"}"#,
            ),
            ("service_status", r#"{"unit": "nginx"}"#),
            ("containers", ""),
            ("container_logs", r#"{"name": "web_1", "tail": 100}"#),
            ("listening_sockets", "{}"),
            ("pending_updates", "{}"),
            ("memory", "{}"),
            ("load", "{}"),
        ];
        for (name, args) in calls {
            let (cmd, argv) = read(name, args);
            let judged = check(Table::Allow, &cmd, &argv, &Requester::Warden);
            assert!(judged.is_ok(), "{name} {args} → {cmd} {argv:?}: {judged:?}");
        }
        // Every tool but the proposal and the skills' (the Warden runs those
        // from the skill's own bundle, not its policy) is covered.
        for name in NAMES.iter().filter(|n| {
            ![
                "propose_chore",
                "skill_tools",
                "skill_tool",
                "skill_catalogue",
                "propose_skill",
            ]
            .contains(n)
        }) {
            assert!(calls.iter().any(|(n, _)| n == name), "{name} untested");
        }
    }

    #[test]
    fn hostile_arguments_are_refused_before_the_warden() {
        for (name, args) in [
            ("disk_usage", r#"{"path": "var"}"#),
            ("disk_usage", r#"{"path": "/var/../etc/shadow"}"#),
            ("disk_usage", r#"{"path": "-x"}"#),
            ("disk_usage", r#"{"path": "/var", "depth": 9}"#),
            (
                "disk_usage",
                r#"{"path": "/var\n--files0-from=/etc/shadow"}"#,
            ),
            (
                "disk_usage",
                r#"{"path": "/var", "args": ["--files0-from=x"]}"#,
            ),
            ("journal", r#"{"unit": "--file=/etc/shadow"}"#),
            ("journal", r#"{"unit": "nginx; rm -rf /"}"#),
            ("journal", r#"{"lines": 100000}"#),
            ("journal", r#"{"since_hours": 0}"#),
            ("journal", r#"{"grep": ""}"#),
            ("service_status", r#"{"unit": "-H root@elsewhere"}"#),
            ("service_status", r#"{}"#),
            ("container_logs", r#"{"name": "../x"}"#),
            ("container_logs", r#"{"name": "web", "tail": -1}"#),
            ("containers", r#"{"all": true}"#),
            ("memory", "[]"),
            ("propose_chore", r#"{"name": "--all", "why": "x"}"#),
            (
                "propose_chore",
                r#"{"name": "tidy", "why": "x", "button": "Run"}"#,
            ),
            ("propose_skill", r#"{"name": "../certs", "why": "x"}"#),
            ("propose_skill", r#"{"name": "Certs", "why": "x"}"#),
            ("propose_skill", r#"{"name": "certs"}"#),
            (
                "propose_skill",
                r#"{"name": "certs", "why": "x", "version": "9.9.9"}"#,
            ),
            (
                "propose_skill",
                r#"{"name": "certs", "why": "x", "url": "https://evil.example/x.skill"}"#,
            ),
            ("propose_skill", r#"{"name": "certs", "why": "a\u0007b"}"#),
            ("skill_catalogue", r#"{"publisher": "anyone"}"#),
        ] {
            assert!(
                matches!(parse(name, args), Err(ToolError::Arguments { .. })),
                "{name} {args} was taken: {:?}",
                parse(name, args)
            );
        }
        assert!(matches!(
            parse("shell", r#"{"cmd": "rm -rf /"}"#),
            Err(ToolError::Unknown(_))
        ));
    }

    #[test]
    fn a_secret_path_is_refused_by_the_grammar_and_by_the_warden() {
        use aromba_warden::policy::{Requester, Table, check};
        for path in [
            "/root/.ssh",
            "/home/ann/.aws",
            "/srv/app/.env",
            "/proc/1/environ",
        ] {
            let args = format!(r#"{{"path": "{path}"}}"#);
            let refused = parse("disk_usage", &args).expect_err(path);
            assert!(refused.to_string().contains("secret path"), "{refused}");
            let argv = ["-x", "-h", "--max-depth=1", path]
                .map(String::from)
                .to_vec();
            assert!(check(Table::Allow, "du", &argv, &Requester::Warden).is_err());
        }
    }

    #[test]
    fn the_journals_grep_keeps_only_matching_lines() {
        let tool = parse("journal", r#"{"grep": "ERROR"}"#).unwrap();
        assert_eq!(
            tool.filter("a error here\nfine\nERROR again"),
            "a error here\nERROR again"
        );
        let plain = parse("memory", "{}").unwrap();
        assert_eq!(plain.filter("x\ny"), "x\ny");
    }

    #[test]
    fn the_definitions_name_every_tool_once() {
        let defs = definitions();
        let names: Vec<&str> = defs
            .as_array()
            .unwrap()
            .iter()
            .map(|d| d["function"]["name"].as_str().unwrap())
            .collect();
        assert_eq!(names, NAMES);
    }

    #[test]
    fn the_catalogue_and_a_skill_proposal_are_parsed_and_ask_no_read() {
        let listed = parse("skill_catalogue", "").unwrap();
        assert_eq!(listed, Tool::SkillCatalogue);
        let proposal = parse(
            "propose_skill",
            r#"{"name": "restic-backup", "why": "no backup runs here"}"#,
        )
        .unwrap();
        assert_eq!(
            proposal,
            Tool::ProposeSkill {
                name: "restic-backup".into(),
                why: "no backup runs here".into()
            }
        );
        assert_eq!(listed.read(&system), None);
        assert_eq!(proposal.read(&system), None);
    }
}
