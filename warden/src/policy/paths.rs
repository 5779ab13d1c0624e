//! Path arguments: absolute, no `..`, resolved through symlinks, then
//! checked — as given and as resolved — against `[paths]`, and refused when
//! the requester could swap any directory on the resolved path.
//!
//! The command is given the resolved path, never the one sent, so a symlink
//! swapped in after the check is not followed at the top. The program then
//! opens that path itself, later — 3 ms later was enough in review for a
//! Worker to swap a directory it owned for a symbolic link to `/etc`. So
//! every directory on the resolved path, from `/` down to the parent of its
//! last component, is looked at (`lstat`, in order) after the resolution:
//! if the Worker owns it or can write to it (group or other bits; a sticky
//! directory only for the Worker's own entries, see `writers.rs`), it could
//! rename the next component aside and put a link in its place, and the
//! request is refused. A directory that passes cannot be changed by the
//! Worker afterwards, and neither can anything above it, so the path the
//! program opens is the path that was judged.

#![forbid(unsafe_code)]

use super::data::PATHS;
use crate::users::WorkerAccount;
use crate::writers::{Against, Dir, replaceable};
use aromba_warden_proto::rules::{self, SecretRule};
use std::path::{Component, Path, PathBuf};

/// Who asks, for the path check: whose writes could swap a directory on a
/// path between the check and the program's own open.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Requester {
    /// The Worker: a path with a directory it owns or can write is refused.
    Worker(WorkerAccount),
    /// The Warden's own compiled-in reads and chore actions: a path with a
    /// directory any account but root could write is refused.
    Warden,
}

impl Requester {
    fn against(&self) -> Against<'_> {
        match self {
            Requester::Worker(w) => Against::Worker(w),
            Requester::Warden => Against::AllButRoot,
        }
    }
}

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
    /// A directory on the resolved path the requester could change: the
    /// path could be swapped before the program opens it.
    Swappable {
        dir: String,
        why: crate::writers::Swappable,
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
            PathRefusal::Swappable { dir, why } => write!(
                f,
                "{dir} {why}, so the path could be swapped between this check and the read"
            ),
        }
    }
}

pub const MAX_PATH: usize = 4096;

/// Checks a `path` argument from `requester` and returns the resolved path
/// to run with.
pub fn check_path(arg: &str, requester: &Requester) -> Result<String, PathRefusal> {
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
    unswappable(&resolved, requester)?;
    Ok(resolved)
}

/// Refuses `resolved` when a directory on it, from `/` down to the parent
/// of its last component, is one `requester` could change (see the module
/// doc). Each entry is looked at without following it, from the top: a
/// symbolic link found now was swapped in since the resolution.
fn unswappable(resolved: &str, requester: &Requester) -> Result<(), PathRefusal> {
    let unresolvable = |e: std::io::Error| PathRefusal::Unresolvable(e.to_string());
    let mut dir = PathBuf::from("/");
    // Each directory with its ACL: a named entry can give the Worker write
    // access that its mode does not show (`writers.rs`).
    let mut dir_meta = Dir::look(&dir).map_err(unresolvable)?;
    for c in Path::new(resolved).components() {
        let name = match c {
            Component::RootDir => continue,
            Component::Normal(n) => n,
            _ => return Err(PathRefusal::Unresolvable("not a resolved path".into())),
        };
        if !dir_meta.meta.is_dir() {
            return Err(PathRefusal::Unresolvable(format!(
                "{} is not a directory",
                dir.display()
            )));
        }
        let child = dir.join(name);
        let child_meta = Dir::look(&child).map_err(unresolvable)?;
        if child_meta.meta.file_type().is_symlink() {
            return Err(PathRefusal::Unresolvable(format!(
                "{} changed into a symbolic link while it was checked",
                child.display()
            )));
        }
        use std::os::unix::fs::MetadataExt;
        if let Some(why) = replaceable(&dir_meta, child_meta.meta.uid(), requester.against()) {
            return Err(PathRefusal::Swappable {
                dir: dir.to_string_lossy().into_owned(),
                why,
            });
        }
        dir = child;
        dir_meta = child_meta;
    }
    Ok(())
}

/// Refuses `path` when a rule of `[paths]` covers it: a secret path (the
/// contract crate's rules, which the Worker applies too) or a fence.
pub fn secret_rule(path: &str) -> Result<(), PathRefusal> {
    let refuse = |rule: String| PathRefusal::Secret {
        path: path.to_string(),
        rule,
    };
    match rules::secret_rule(path) {
        Some(SecretRule::Prefix(prefix)) => {
            return Err(refuse(format!("secret_prefixes {prefix:?}")));
        }
        Some(SecretRule::Dir(dir)) => return Err(refuse(format!("secret_dirs {dir:?}"))),
        Some(SecretRule::Name(name)) => return Err(refuse(format!("secret_names {name:?}"))),
        None => {}
    }
    for fence in PATHS.fences {
        let fence = fence.trim_end_matches('/');
        if path == fence || path.starts_with(&format!("{fence}/")) {
            return Err(refuse(format!("fences {fence:?}")));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    // `globs_match_like_the_shell` went with `glob` to the contract
    // crate (`aromba_warden_proto::rules`).

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
        let r = Requester::Warden;
        assert_eq!(check_path("etc", &r), Err(PathRefusal::NotAbsolute));
        assert_eq!(
            check_path("/var/../etc/shadow", &r),
            Err(PathRefusal::DotDot)
        );
    }

    /// `root/a/b/c`, every directory root's 0755 but `a`, which is `a_uid`'s
    /// with `a_mode`.
    fn tree(name: &str, a_uid: u32, a_mode: u32) -> PathBuf {
        use std::os::unix::fs::PermissionsExt;
        let root = std::env::temp_dir().join(format!("aromba-paths-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        std::fs::create_dir_all(root.join("a/b/c")).unwrap();
        std::os::unix::fs::chown(root.join("a"), Some(a_uid), Some(0)).unwrap();
        std::fs::set_permissions(root.join("a"), std::fs::Permissions::from_mode(a_mode)).unwrap();
        root
    }

    #[test]
    fn a_path_under_a_directory_the_worker_owns_is_refused_at_any_depth() {
        let w = Requester::Worker(WorkerAccount {
            uid: 4_242_011,
            gids: vec![4_242_011],
        });
        let root = tree("owned", 4_242_011, 0o755);
        let deep = format!("{}/a/b/c", root.display());
        match check_path(&deep, &w) {
            Err(PathRefusal::Swappable { dir, why }) => {
                assert_eq!(dir, format!("{}/a", root.display()));
                assert!(
                    matches!(why, crate::writers::Swappable::OwnedByWorker { .. }),
                    "{why:?}"
                );
                assert!(why.to_string().contains("the Worker's"), "{why}");
            }
            other => panic!("{other:?}"),
        }
        // Its own directory as the last component: its parent is root's.
        let top = format!("{}/a", root.display());
        assert_eq!(check_path(&top, &w), Ok(top.clone()));
        // Someone else's directory is no swap for the Worker, but it is
        // for the Warden's strictest rule.
        let other = Requester::Worker(WorkerAccount {
            uid: 4_242_012,
            gids: vec![4_242_012],
        });
        assert_eq!(check_path(&deep, &other), Ok(deep.clone()));
        assert!(matches!(
            check_path(&deep, &Requester::Warden),
            Err(PathRefusal::Swappable { .. })
        ));
        std::fs::remove_dir_all(&root).unwrap();
    }

    #[test]
    fn a_path_through_a_link_is_judged_where_it_resolves() {
        let w = Requester::Worker(WorkerAccount {
            uid: 4_242_013,
            gids: vec![4_242_013],
        });
        // A root-owned link in a root-owned tree, to a Worker-owned one.
        let root = tree("link", 4_242_013, 0o755);
        std::os::unix::fs::symlink(root.join("a/b"), root.join("l")).unwrap();
        let via = format!("{}/l/c", root.display());
        assert!(matches!(
            check_path(&via, &w),
            Err(PathRefusal::Swappable { .. })
        ));
        std::fs::remove_dir_all(&root).unwrap();
    }
}
