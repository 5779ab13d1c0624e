//! The Warden's secret paths, as the assistant's grammar refuses them
//! before asking: a read of one is refused by the Warden too, but there it
//! is also a signal that climbs the ladder — and the path may come from a
//! line the model read (a file name, a log line), so an injection could
//! otherwise slow or freeze the Worker. The rules and their matching are
//! the contract crate's (`aromba_warden_proto::rules`), the one copy the
//! Warden judges by too.

use aromba_warden_proto::rules::{self, SecretRule};

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

/// Which rule covers `path` (absolute, without `..`), if one does, in the
/// words the model is told. Judged as the Warden judges it
/// ([`rules::secret_rule`]).
pub fn covering(path: &str) -> Option<String> {
    rules::secret_rule(path).map(|rule| match rule {
        SecretRule::Prefix(prefix) => prefix.to_string(),
        SecretRule::Dir(dir) => format!("a {dir} folder"),
        SecretRule::Name(name) => format!("a name like {name}"),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    // `the_lists_are_the_wardens` is gone with the copy: the lists are
    // the contract crate's (`aromba_warden_proto::rules`).

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
