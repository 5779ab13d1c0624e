//! The Warden's secret paths, as the assistant's grammar refuses them
//! before asking: a read of one is refused by the Warden too, but there it
//! is also a signal that climbs the ladder — and the path may come from a
//! line the model read (a file name, a log line), so an injection could
//! otherwise slow or freeze the Worker. These lists are the Warden's
//! `[paths]` (`aromba_warden::policy::PATHS`); a test keeps them equal.
//! The Worker links no Warden code, hence the copy.

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
    "/etc/ssh/ssh_host_",
    "/root/.ssh",
    "/proc/self",
    "/proc/thread-self",
    "/dev",
    "/sys/firmware",
];

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
];

/// The first uid and gid of a person's account on Debian and Ubuntu.
const FIRST_PERSONS_ID: u32 = 1000;

/// Why `real` (a resolved path) could lead elsewhere by the time the
/// Warden reads it, if it could: a folder on the way, from `/` to the
/// path's own parent, that an account other than root may change — one
/// it owns, or one others may write without the sticky bit (or with it,
/// around an entry that is not root's). Any of them could swap the next
/// name for a link, so the Warden would read where the link leads.
pub fn swappable_by_another(real: &std::path::Path) -> Option<String> {
    use std::os::unix::fs::MetadataExt;
    let parts: Vec<_> = real.components().collect();
    let mut at = std::path::PathBuf::new();
    for (i, part) in parts.iter().enumerate() {
        at.push(part);
        let Some(next) = parts.get(i + 1) else {
            break;
        };
        let meta = match std::fs::symlink_metadata(&at) {
            Ok(m) => m,
            Err(e) => return Some(format!("{} cannot be looked at ({e})", at.display())),
        };
        if meta.uid() != 0 {
            return Some(format!(
                "the folder {} belongs to uid {}, who could swap what is in it for a link",
                at.display(),
                meta.uid()
            ));
        }
        // Group-writable for a system group (`/var/log`, root:syslog on
        // Ubuntu) is left: the accounts this guards against are people's,
        // whose groups are numbered from 1000.
        let others_write = meta.mode() & 0o002 != 0
            || (meta.mode() & 0o020 != 0 && meta.gid() >= FIRST_PERSONS_ID);
        if others_write {
            let entry_is_roots =
                std::fs::symlink_metadata(at.join(next)).is_ok_and(|m| m.uid() == 0);
            if meta.mode() & 0o1000 == 0 || !entry_is_roots {
                return Some(format!(
                    "the folder {} can be changed by other accounts, who could swap what is in it for a link",
                    at.display()
                ));
            }
        }
    }
    None
}

/// Which rule covers `path` (absolute, without `..`), if one does. Judged
/// as the Warden judges it: a prefix of the path (`/proc/<pid>/…` as
/// `/proc/self/…`), a folder anywhere on it, a name glob on any of its
/// components — case and all.
pub fn covering(path: &str) -> Option<String> {
    let proc_self = as_proc_self(path);
    for prefix in SECRET_PREFIXES {
        if path.starts_with(prefix) || proc_self.as_deref().is_some_and(|p| p.starts_with(prefix)) {
            return Some((*prefix).to_string());
        }
    }
    let with_slashes = format!("{}/", path.trim_end_matches('/'));
    for dir in SECRET_DIRS {
        if with_slashes.contains(&format!("/{dir}/")) {
            return Some(format!("a {dir} folder"));
        }
    }
    for component in path.split('/').filter(|c| !c.is_empty()) {
        for name in SECRET_NAMES {
            if glob(name.as_bytes(), component.as_bytes()) {
                return Some(format!("a name like {name}"));
            }
        }
    }
    None
}

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

/// `*` matches any run of bytes; every other byte matches itself.
fn glob(pattern: &[u8], name: &[u8]) -> bool {
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
    fn the_lists_are_the_wardens() {
        let paths = aromba_warden::policy::PATHS;
        assert_eq!(SECRET_PREFIXES, paths.secret_prefixes);
        assert_eq!(SECRET_DIRS, paths.secret_dirs);
        assert_eq!(SECRET_NAMES, paths.secret_names);
    }

    #[test]
    fn judges_each_path_as_the_warden_does() {
        for path in [
            "/root/.ssh",
            "/root/.ssh/id_ed25519",
            "/home/ann/.aws/credentials",
            "/proc/1/environ",
            "/proc/self/environ",
            "/srv/app/.env.production",
            "/etc/shadow",
            "/var/tmp/x/server.pem",
            "/var/lib/aromba-warden/journal/x",
            "/var",
            "/var/log",
            "/home",
            "/srv/app",
            "/proc/meminfo",
        ] {
            let warden = aromba_warden::policy::secret_rule(path).is_err();
            assert_eq!(covering(path).is_some(), warden, "{path}");
        }
    }
}
