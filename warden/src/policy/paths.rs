//! Path arguments: absolute, no `..`, resolved through symlinks, then
//! checked — as given and as resolved — against `[paths]`.
//!
//! The command is then given the resolved path, so a symlink swapped in
//! after the check is not followed; what remains of the check-then-use
//! window is a directory on the resolved path being replaced between the
//! check and the program's own open (see SECURITY.md).

#![forbid(unsafe_code)]

use super::data::PATHS;
use std::path::Path;

/// Why a path was refused.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PathRefusal {
    NotAbsolute,
    DotDot,
    TooLong,
    /// It does not exist (or a component is not a directory): it cannot be
    /// resolved, so it cannot be judged.
    Unresolvable(String),
    NotUnicode,
    /// A secret or fenced path; the rule is named. This is a ladder signal.
    Secret {
        path: String,
        rule: String,
    },
}

impl std::fmt::Display for PathRefusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            PathRefusal::NotAbsolute => write!(f, "a path must be absolute"),
            PathRefusal::DotDot => write!(f, "a path must not contain \"..\""),
            PathRefusal::TooLong => write!(f, "a path must be at most {MAX_PATH} bytes"),
            PathRefusal::Unresolvable(e) => write!(f, "the path cannot be resolved: {e}"),
            PathRefusal::NotUnicode => write!(f, "the resolved path is not valid UTF-8"),
            PathRefusal::Secret { path, rule } => {
                write!(f, "{path} is a secret or fenced path ({rule})")
            }
        }
    }
}

pub const MAX_PATH: usize = 4096;

/// Checks a `path` argument and returns the resolved path to run with.
pub fn check_path(arg: &str) -> Result<String, PathRefusal> {
    if arg.len() > MAX_PATH {
        return Err(PathRefusal::TooLong);
    }
    if !arg.starts_with('/') {
        return Err(PathRefusal::NotAbsolute);
    }
    if arg.split('/').any(|c| c == "..") {
        return Err(PathRefusal::DotDot);
    }
    secret_rule(arg)?;
    let resolved = std::fs::canonicalize(Path::new(arg))
        .map_err(|e| PathRefusal::Unresolvable(e.to_string()))?;
    let resolved = resolved
        .to_str()
        .ok_or(PathRefusal::NotUnicode)?
        .to_string();
    secret_rule(&resolved)?;
    Ok(resolved)
}

/// `/proc/PID/…` (and `/proc/PID/task/TID/…`), as a resolved symlink into
/// `/proc/self` reads: judged as `/proc/self/…`.
fn as_proc_self(path: &str) -> Option<String> {
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

/// Refuses `path` when a rule of `[paths]` covers it.
pub fn secret_rule(path: &str) -> Result<(), PathRefusal> {
    let refuse = |rule: String| PathRefusal::Secret {
        path: path.to_string(),
        rule,
    };
    let proc_self = as_proc_self(path);
    for prefix in PATHS.secret_prefixes {
        let hit =
            path.starts_with(prefix) || proc_self.as_deref().is_some_and(|p| p.starts_with(prefix));
        if hit {
            return Err(refuse(format!("secret_prefixes {prefix:?}")));
        }
    }
    let with_slashes = format!("{}/", path.trim_end_matches('/'));
    for dir in PATHS.secret_dirs {
        if with_slashes.contains(&format!("/{dir}/")) {
            return Err(refuse(format!("secret_dirs {dir:?}")));
        }
    }
    for component in path.split('/').filter(|c| !c.is_empty()) {
        for name in PATHS.secret_names {
            if glob(name.as_bytes(), component.as_bytes()) {
                return Err(refuse(format!("secret_names {name:?}")));
            }
        }
    }
    for fence in PATHS.fences {
        let fence = fence.trim_end_matches('/');
        if path == fence || path.starts_with(&format!("{fence}/")) {
            return Err(refuse(format!("fences {fence:?}")));
        }
    }
    Ok(())
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
    fn globs_match_like_the_shell() {
        assert!(glob(b"*.pem", b"site.pem"));
        assert!(glob(b".env*", b".env.production"));
        assert!(glob(b"*secret*", b"my-secrets"));
        assert!(glob(b"id_*", b"id_ed25519"));
        assert!(!glob(b"*.key", b"keyring"));
        assert!(!glob(b"authorized_keys", b"authorized_keys2"));
    }

    #[test]
    fn refuses_each_kind_of_secret_path_without_touching_the_disk() {
        assert!(secret_rule("/etc/shadow").is_err());
        assert!(secret_rule("/etc/ssh/ssh_host_ed25519_key").is_err());
        assert!(secret_rule("/home/u/.ssh").is_err());
        assert!(secret_rule("/home/u/.config/gcloud/creds").is_err());
        assert!(secret_rule("/srv/app/.env").is_err());
        assert!(secret_rule("/proc/self/environ").is_err());
        assert!(secret_rule("/proc/4242/environ").is_err());
        assert!(secret_rule("/proc/meminfo").is_ok());
        assert!(secret_rule("/srv/app").is_ok());
        assert!(secret_rule("/var/log").is_ok());
    }

    #[test]
    fn refuses_relative_and_dotdot_paths() {
        assert_eq!(check_path("etc"), Err(PathRefusal::NotAbsolute));
        assert_eq!(check_path("/var/../etc/shadow"), Err(PathRefusal::DotDot));
    }
}
