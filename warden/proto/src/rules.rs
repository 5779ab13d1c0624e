//! The Warden's refusal rules that the Worker applies too, in one copy:
//! the deny list and the secret paths. The Warden refuses a request that
//! hits either, and counts it toward the ladder; the Worker's assistant
//! refuses the same request before asking, so a path or a name the model
//! read in a log line cannot climb the ladder. Both sides link this
//! module, so both judge alike — the lists and the matching.
//!
//! ```
//! use aromba_warden_proto::rules::{SecretRule, deny_hit, secret_rule};
//!
//! assert_eq!(deny_hit("dd", &["if=/dev/zero".into(), "of=/dev/sda".into()]), Some("dd-device"));
//! assert_eq!(secret_rule("/proc/812/environ"), Some(SecretRule::Prefix("/proc/self")));
//! assert_eq!(secret_rule("/srv/app/.env.production"), Some(SecretRule::Name(".env*")));
//! assert_eq!(secret_rule("/var/log/syslog"), None);
//! ```

use regex::Regex;
use std::sync::OnceLock;

/// Matched against the whole request (the command and its arguments
/// joined by spaces, [`command_line`]); a hit refuses it and counts toward
/// the ladder.
pub const DENY: &[(&str, &str)] = &[
    (
        "rm-root",
        r#"\brm\b(?:\s+(?:-\S+|--\S+))*\s+-\S*[rR]\S*(?:\s+(?:-\S+|--\S+))*\s+(?:/|/\*|~|~/|\$HOME|\$HOME/|/(?:etc|usr|var|boot|bin|sbin|lib|lib64|home|root|opt|srv)/?)(?:\s|$)"#,
    ),
    ("dd-device", r#"\bdd\b.*\bof=/dev/"#),
    (
        "mkfs",
        r#"(?:^|[;&|]\s*|\bsudo\s+)(?:mkfs(?:\.\w+)?|wipefs|mkswap)\b"#,
    ),
    (
        "pipe-to-shell",
        r#"\b(?:curl|wget)\b.*\|\s*(?:sudo\s+)?(?:sh|bash|zsh|dash|ksh)\b"#,
    ),
    (
        "protected-path",
        r#"/etc/sudoers|/etc/aromba/|/etc/ssh/sshd_config|authorized_keys|/etc/g?shadow\b|\bvisudo\b"#,
    ),
    (
        "chmod-777",
        r#"\bchmod\b(?:.*\s-R\b.*\s[ugoa]*0?777\b|.*\s0?777\b.*\s-R\b)"#,
    ),
    (
        "power",
        r#"(?:^|[;&|]\s*|\bsudo\s+)(?:shutdown|reboot|halt|poweroff)\b|\bsystemctl\s+(?:reboot|poweroff|halt|kexec|suspend|hibernate)\b|(?:^|[;&|]\s*|\bsudo\s+)(?:tel)?init\s+[06]\b"#,
    ),
    (
        "firewall-flush",
        r#"\biptables\b.*\s(?:-F|--flush)\b|\bnft\s+flush\s+ruleset\b|\bufw\s+(?:disable|reset)\b"#,
    ),
    ("history", r#"\bhistory\s+-c\b"#),
    (
        "secret-path",
        r#"(?:^|[\s/=:'"])\.(?:ssh|aws|gnupg|kube|docker|azure|password-store)(?:/|\s|$)|(?:^|[\s/=:'"])\.env(?:\.[\w-]+)?\b|\.(?:pem|key|p12|pfx)\b|\bid_(?:rsa|dsa|ecdsa|ed25519)\b|\.netrc\b|secrets\.toml|\b\w*(?:secret|credential)s?\.(?:json|ya?ml|toml|txt|env)\b|/proc/\d+/(?:environ|cmdline|mem)\b"#,
    ),
];

/// Paths no read may name: a path that starts with one (`/proc/<pid>/…`
/// judged as `/proc/self/…`).
pub const SECRET_PREFIXES: &[&str] = &[
    "/etc/aromba/worker/secrets.toml",
    "/etc/aromba/worker/relay.toml",
    "/etc/aromba/worker/calendars.toml",
    "/etc/aromba/worker/intake.toml",
    "/etc/aromba/warden",
    "/var/lib/aromba-warden/state",
    "/var/lib/aromba-warden/journal",
    "/etc/sudoers",
    "/etc/sudoers.d",
    "/etc/shadow",
    "/etc/gshadow",
    "/var/backups/shadow",
    "/var/backups/gshadow",
    "/etc/ssh/ssh_host_",
    "/root/.ssh",
    "/proc/self",
    "/proc/thread-self",
    "/dev",
    "/sys/firmware",
];

/// Folders that are secret wherever they are on a path.
pub const SECRET_DIRS: &[&str] = &[
    ".ssh",
    ".aws",
    ".gnupg",
    ".kube",
    ".docker",
    ".azure",
    ".password-store",
    ".config/gcloud",
    ".config/gh",
];

/// Names that are secret as any component of a path (`*` matches any run
/// of bytes, [`glob`]).
pub const SECRET_NAMES: &[&str] = &[
    ".env*",
    "*.pem",
    "*.key",
    "*_key",
    "id_*",
    "*secret*",
    "*token*",
    "*credential*",
    "*password*",
    ".netrc",
    "authorized_keys",
    "secrets.toml",
    "*.p12",
    "*.pfx",
    "*.jks",
    "*.keystore",
    ".pgpass",
    ".my.cnf",
    ".npmrc",
    ".pypirc",
    ".git-credentials",
    "rclone.conf",
    "*_history",
];

/// The request as the deny list reads it: the command and its arguments
/// joined by single spaces.
pub fn command_line(cmd: &str, args: &[String]) -> String {
    let mut whole = String::from(cmd);
    for a in args {
        whole.push(' ');
        whole.push_str(a);
    }
    whole
}

/// The deny list compiled, or the name of the first pattern that does not
/// compile.
fn deny_patterns() -> Result<&'static [(&'static str, Regex)], &'static str> {
    static COMPILED: OnceLock<Result<Vec<(&'static str, Regex)>, &'static str>> = OnceLock::new();
    COMPILED
        .get_or_init(|| {
            DENY.iter()
                .map(|(name, pattern)| Regex::new(pattern).map(|re| (*name, re)).map_err(|_| *name))
                .collect()
        })
        .as_ref()
        .map(Vec::as_slice)
        .map_err(|name| *name)
}

/// The deny rule the request `cmd args…` hits, if any. Should a pattern
/// not compile (a test holds that each does), every request hits it: the
/// list fails closed, on both sides alike.
pub fn deny_hit(cmd: &str, args: &[String]) -> Option<&'static str> {
    let patterns = match deny_patterns() {
        Ok(p) => p,
        Err(broken) => return Some(broken),
    };
    let whole = command_line(cmd, args);
    patterns
        .iter()
        .find(|(_, re)| re.is_match(&whole))
        .map(|(name, _)| *name)
}

/// The secret-path rule that covers a path.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SecretRule {
    /// One of [`SECRET_PREFIXES`].
    Prefix(&'static str),
    /// One of [`SECRET_DIRS`], somewhere on the path.
    Dir(&'static str),
    /// One of [`SECRET_NAMES`], matching a component.
    Name(&'static str),
}

/// Which secret-path rule covers `path` (absolute, without `..`), if one
/// does: a prefix of the path (`/proc/<pid>/…` as `/proc/self/…`), a
/// folder anywhere on it, a name glob on any of its components — case and
/// all, first match in that order.
pub fn secret_rule(path: &str) -> Option<SecretRule> {
    let proc_self = as_proc_self(path);
    for prefix in SECRET_PREFIXES {
        if path.starts_with(prefix) || proc_self.as_deref().is_some_and(|p| p.starts_with(prefix)) {
            return Some(SecretRule::Prefix(prefix));
        }
    }
    let with_slashes = format!("{}/", path.trim_end_matches('/'));
    for dir in SECRET_DIRS {
        if with_slashes.contains(&format!("/{dir}/")) {
            return Some(SecretRule::Dir(dir));
        }
    }
    for component in path.split('/').filter(|c| !c.is_empty()) {
        for name in SECRET_NAMES {
            if glob(name.as_bytes(), component.as_bytes()) {
                return Some(SecretRule::Name(name));
            }
        }
    }
    None
}

/// `/proc/PID/…` (and `/proc/PID/task/TID/…`), as a resolved symlink into
/// `/proc/self` reads: judged as `/proc/self/…`.
pub fn as_proc_self(path: &str) -> Option<String> {
    let rest = path.strip_prefix("/proc/")?;
    let (pid, tail) = rest.split_once('/').unwrap_or((rest, ""));
    if pid.is_empty() || !pid.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    Some(if tail.is_empty() {
        "/proc/self".to_string()
    } else {
        format!("/proc/self/{tail}")
    })
}

/// `*` matches any run of bytes; every other byte matches itself.
pub fn glob(pattern: &[u8], name: &[u8]) -> bool {
    let (mut p, mut n) = (0, 0);
    let mut backtrack: Option<(usize, usize)> = None;
    while n < name.len() {
        if p < pattern.len() && pattern[p] == b'*' {
            backtrack = Some((p, n));
            p += 1;
        } else if p < pattern.len() && pattern[p] == name[n] {
            p += 1;
            n += 1;
        } else if let Some((bp, bn)) = backtrack {
            p = bp + 1;
            n = bn + 1;
            backtrack = Some((bp, bn + 1));
        } else {
            return false;
        }
    }
    pattern[p..].iter().all(|&b| b == b'*')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_deny_pattern_compiles() {
        assert_eq!(deny_patterns().map(<[_]>::len), Ok(DENY.len()));
    }

    #[test]
    fn globs_match_like_the_shell() {
        assert!(glob(b"*.pem", b"site.pem"));
        assert!(glob(b".env*", b".env.production"));
        assert!(glob(b"*secret*", b"my-secrets"));
        assert!(glob(b"id_*", b"id_ed25519"));
        assert!(!glob(b"*.key", b"keyring"));
        assert!(!glob(b"authorized_keys", b"authorized_keys2"));
        assert!(glob(b"*", b""));
        assert!(!glob(b"a", b""));
    }

    #[test]
    fn a_pid_under_proc_is_judged_as_proc_self() {
        assert_eq!(
            as_proc_self("/proc/1/environ").as_deref(),
            Some("/proc/self/environ")
        );
        assert_eq!(as_proc_self("/proc/812").as_deref(), Some("/proc/self"));
        assert_eq!(as_proc_self("/proc/meminfo"), None);
        assert_eq!(as_proc_self("/proc//x"), None);
    }

    #[test]
    fn each_kind_of_secret_rule_is_named() {
        assert_eq!(
            secret_rule("/etc/shadow"),
            Some(SecretRule::Prefix("/etc/shadow"))
        );
        assert_eq!(
            secret_rule("/home/ann/.aws/credentials"),
            Some(SecretRule::Dir(".aws"))
        );
        assert_eq!(
            secret_rule("/home/ann/.config/gh"),
            Some(SecretRule::Dir(".config/gh"))
        );
        assert_eq!(
            secret_rule("/var/tmp/x/server.pem"),
            Some(SecretRule::Name("*.pem"))
        );
        for plain in ["/var", "/var/log", "/home", "/srv/app", "/proc/meminfo"] {
            assert_eq!(secret_rule(plain), None, "{plain}");
        }
    }

    #[test]
    fn the_deny_list_reads_the_whole_command_line() {
        let args = |a: &[&str]| a.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert_eq!(deny_hit("rm", &args(&["-rf", "/"])), Some("rm-root"));
        assert_eq!(
            deny_hit("du", &args(&["-x", "/etc/aromba/x"])),
            Some("protected-path")
        );
        assert_eq!(
            deny_hit("journalctl", &args(&["--unit=id_rsa"])),
            Some("secret-path")
        );
        assert_eq!(deny_hit("du", &args(&["-x", "-h", "/var"])), None);
    }
}
