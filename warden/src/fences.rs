//! The fence list: the data folders no chore may touch (`fences` in the
//! configuration directory, one absolute path a line, in the integrity
//! baseline). The Worker's scan adds to it; nothing from the Worker can
//! take a fence away. Each folder asked for is checked and resolved here:
//! an existing directory, through its symbolic links, below a top-level
//! folder and never one of Aromba's own; what is kept is the resolved path,
//! as the cage compares resolved paths.
//!
//! A hostile Worker gains nothing from fencing: a fence only takes rights
//! away from chores (a chore whose touches meet a fence is refused whole).

#![forbid(unsafe_code)]

use crate::layout::Layout;
use std::path::{Component, Path, PathBuf};

/// The most fences the list holds: a scan finds tens, not thousands, and
/// every chore run compares its touches against each.
pub const MAX_FENCES: usize = 1024;
/// The most fences one folder of a top-level folder's (a user's home
/// `/home/eve`, an app's `/srv/app`) may hold: past it, that folder is
/// fenced whole. A local user who makes new data-like folders every week
/// would otherwise fill the list, and the next database found would find
/// it full.
pub const MAX_PER_FOLDER: usize = 16;

/// The folder of a top-level folder's that `path` is in (`/home/eve` for
/// `/home/eve/r.git`; under `/var`, one level deeper: `/var/www/site`,
/// `/var/lib/postgresql`); `None` for a path that short.
pub fn owner_folder(path: &Path) -> Option<PathBuf> {
    let depth = if path.starts_with("/var") { 4 } else { 3 };
    let owner: PathBuf = path.components().take(depth).collect();
    (owner.components().count() == depth && owner != path).then_some(owner)
}

/// The longest path a fence may be.
const MAX_FENCE_PATH: usize = 1024;

/// The system's own hierarchies: programs, libraries, configuration, boot,
/// kernel interfaces, package databases, caches and logs. The scan looks
/// for data elsewhere (`/srv`, `/home`, `/var/lib/<database>` …); a folder
/// asked for that resolves into one of these (or holds one) is a link
/// planted in a scanned folder, or a Worker's own idea, and not data.
const SYSTEM: &[&str] = &[
    "/bin",
    "/boot",
    "/dev",
    "/etc",
    "/lib",
    "/lib32",
    "/lib64",
    "/libx32",
    "/proc",
    "/run",
    "/sbin",
    "/sys",
    "/usr",
    "/var/cache",
    "/var/lib/apt",
    "/var/lib/dpkg",
    "/var/lib/systemd",
    "/var/log",
];

/// A character a fence may not hold: a control character, a direction
/// override or a line or paragraph separator (text that would read as
/// something else in the list, the journal or the chat).
fn unshowable(c: char) -> bool {
    c.is_control()
        || matches!(c, '\u{200E}' | '\u{200F}' | '\u{202A}'..='\u{202E}' | '\u{2066}'..='\u{2069}')
        || matches!(c, '\u{2028}' | '\u{2029}')
}

/// Why a folder is not fenced.
#[derive(Debug)]
pub enum NotFenced {
    TooLong,
    Unshowable,
    NotAbsolute,
    DotSegments,
    /// A top-level folder (as asked, or once resolved).
    TopLevel(PathBuf),
    Unresolvable(std::io::Error),
    Unreadable(std::io::Error),
    NotAFolder,
    /// It resolves to a path the list cannot hold as text.
    UnholdableResolved {
        utf8: bool,
    },
    /// It is, or holds, or is inside one of Aromba's folders.
    ArombasOwn {
        resolved: PathBuf,
        own: PathBuf,
    },
    /// It meets what one of Aromba's chores touches or reads.
    MeetsChore {
        resolved: PathBuf,
        chore: String,
        touch: PathBuf,
    },
    /// It is, or holds, or is inside one of the system's folders.
    SystemsOwn {
        resolved: PathBuf,
        system: PathBuf,
    },
}

impl std::fmt::Display for NotFenced {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            NotFenced::TooLong => write!(f, "a fence is at most {MAX_FENCE_PATH} bytes long"),
            NotFenced::Unshowable => f.write_str("a fence holds no control characters"),
            NotFenced::NotAbsolute => f.write_str("a fence is an absolute path"),
            NotFenced::DotSegments => f.write_str("a fence holds no \"..\" or \".\""),
            NotFenced::TopLevel(p) => write!(
                f,
                "{} is a top-level folder: a fence is a folder below one",
                p.display()
            ),
            NotFenced::Unresolvable(e) => write!(f, "cannot resolve it: {e}"),
            NotFenced::Unreadable(e) => write!(f, "cannot look at it: {e}"),
            NotFenced::NotAFolder => f.write_str("a fence is a folder"),
            NotFenced::UnholdableResolved { utf8: false } => {
                f.write_str("it resolves to a path a fence cannot hold (not UTF-8)")
            }
            NotFenced::UnholdableResolved { utf8: true } => {
                f.write_str("it resolves to a path a fence cannot hold")
            }
            NotFenced::ArombasOwn { resolved, own } => write!(
                f,
                "{} is Aromba's own ({}), not data",
                resolved.display(),
                own.display()
            ),
            NotFenced::MeetsChore {
                resolved,
                chore,
                touch,
            } => write!(
                f,
                "{} meets what Aromba's chore {chore} touches or reads ({}): a fence would stop it for good",
                resolved.display(),
                touch.display()
            ),
            NotFenced::SystemsOwn { resolved, system } => write!(
                f,
                "{} is the system's own ({}), not data",
                resolved.display(),
                system.display()
            ),
        }
    }
}

impl std::error::Error for NotFenced {}

/// The folder `asked` as it would be fenced (resolved), or why it is not.
pub fn check(layout: &Layout, asked: &str) -> Result<PathBuf, NotFenced> {
    if asked.len() > MAX_FENCE_PATH {
        return Err(NotFenced::TooLong);
    }
    if asked.chars().any(unshowable) {
        return Err(NotFenced::Unshowable);
    }
    let path = Path::new(asked);
    if !path.is_absolute() {
        return Err(NotFenced::NotAbsolute);
    }
    if path
        .components()
        .any(|c| matches!(c, Component::ParentDir | Component::CurDir))
    {
        return Err(NotFenced::DotSegments);
    }
    if path.components().count() < 3 {
        return Err(NotFenced::TopLevel(path.to_path_buf()));
    }
    let resolved = std::fs::canonicalize(path).map_err(NotFenced::Unresolvable)?;
    let meta = std::fs::metadata(&resolved).map_err(NotFenced::Unreadable)?;
    if !meta.is_dir() {
        return Err(NotFenced::NotAFolder);
    }
    // The list is text, one path a line, read back trimmed: a path that
    // is not UTF-8, or ends in white space, would come back as another.
    let Some(text) = resolved.to_str() else {
        return Err(NotFenced::UnholdableResolved { utf8: false });
    };
    if text.chars().any(unshowable)
        || text.len() > MAX_FENCE_PATH
        || text.ends_with(char::is_whitespace)
    {
        return Err(NotFenced::UnholdableResolved { utf8: true });
    }
    if resolved.components().count() < 3 {
        return Err(NotFenced::TopLevel(resolved));
    }
    for own in aromba_dirs(layout) {
        if own.starts_with(&resolved) || resolved.starts_with(&own) {
            return Err(NotFenced::ArombasOwn { resolved, own });
        }
    }
    // The system skill's chores touch caches and logs, never data, and the
    // owner's touch and read what the owner wrote them for; a fence
    // meeting one would stop it for good — what a folder swapped for a
    // link into `/var/log` between the scan and this check would do.
    let chores = crate::chores::catalog::system()
        .into_iter()
        .chain(crate::chores::catalog::mine(layout).0);
    for chore in chores {
        for touch in chore.header.touches.iter().chain(&chore.header.reads) {
            let touch = std::fs::canonicalize(touch).unwrap_or_else(|_| touch.clone());
            if touch.starts_with(&resolved) || resolved.starts_with(&touch) {
                return Err(NotFenced::MeetsChore {
                    resolved,
                    chore: chore.header.name.clone(),
                    touch,
                });
            }
        }
    }
    for system in SYSTEM {
        let system = Path::new(system);
        let system = std::fs::canonicalize(system).unwrap_or_else(|_| system.to_path_buf());
        if system.starts_with(&resolved) || resolved.starts_with(&system) {
            return Err(NotFenced::SystemsOwn { resolved, system });
        }
    }
    Ok(resolved)
}

/// Aromba's own folders, resolved where they exist: a fence may neither be
/// one nor hold one.
fn aromba_dirs(layout: &Layout) -> Vec<PathBuf> {
    let mut dirs = layout.warden_dirs();
    dirs.push(layout.worker_config_dir.clone());
    dirs.push(layout.worker_home.clone());
    dirs.into_iter()
        .map(|d| std::fs::canonicalize(&d).unwrap_or(d))
        .collect()
}

/// The fence list's new text: `current` with `added` appended, each path
/// once, in the order they came.
pub fn with_added(current: &[PathBuf], added: &[PathBuf]) -> String {
    let mut out = String::new();
    for p in current.iter().chain(added) {
        out.push_str(&p.to_string_lossy());
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn layout_in(dir: &Path) -> Layout {
        Layout::rooted(&dir.join("aromba"))
    }

    fn scratch(name: &str) -> PathBuf {
        let root =
            std::env::temp_dir().join(format!("aromba-fences-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        std::fs::create_dir_all(&root).unwrap();
        root
    }

    #[test]
    fn keeps_the_resolved_folder() {
        let dir = scratch("resolved");
        let data = dir.join("srv/app/uploads");
        std::fs::create_dir_all(&data).unwrap();
        std::os::unix::fs::symlink(&data, dir.join("link")).unwrap();
        let layout = layout_in(&dir);
        let asked = dir.join("link");
        assert_eq!(
            check(&layout, asked.to_str().unwrap()).unwrap(),
            std::fs::canonicalize(&data).unwrap()
        );
    }

    #[test]
    fn refuses_what_is_not_a_data_folder() {
        let dir = scratch("refused");
        let layout = layout_in(&dir);
        let file = dir.join("file");
        std::fs::write(&file, "").unwrap();
        std::fs::create_dir_all(&layout.state_dir).unwrap();
        let inside_own = layout.state_dir.join("x");
        std::fs::create_dir_all(&inside_own).unwrap();
        let missing = dir.join("missing");
        let top = |e: &NotFenced| matches!(e, NotFenced::TopLevel(_));
        let own = |e: &NotFenced| matches!(e, NotFenced::ArombasOwn { .. });
        type Is<'a> = &'a dyn Fn(&NotFenced) -> bool;
        let cases: [(&str, Is<'_>, &str); 11] = [
            ("/", &top, "top-level"),
            ("/srv", &top, "top-level"),
            (
                "srv/app",
                &|e| matches!(e, NotFenced::NotAbsolute),
                "absolute",
            ),
            (
                "/srv/../etc",
                &|e| matches!(e, NotFenced::DotSegments),
                "\"..\"",
            ),
            (
                "/srv/a\nb",
                &|e| matches!(e, NotFenced::Unshowable),
                "control",
            ),
            (
                file.to_str().unwrap(),
                &|e| matches!(e, NotFenced::NotAFolder),
                "a folder",
            ),
            (
                missing.to_str().unwrap(),
                &|e| matches!(e, NotFenced::Unresolvable(_)),
                "cannot resolve",
            ),
            (layout.state_dir.to_str().unwrap(), &own, "Aromba's own"),
            (inside_own.to_str().unwrap(), &own, "Aromba's own"),
            (dir.to_str().unwrap(), &own, "Aromba's own"),
            (
                "/var/log",
                &|e| matches!(e, NotFenced::MeetsChore { .. }),
                "touches",
            ),
        ];
        for (asked, is, said) in cases {
            let e = check(&layout, asked).unwrap_err();
            assert!(is(&e), "{asked:?}: {e:?}");
            assert!(e.to_string().contains(said), "{asked:?}: {e}");
        }
    }

    #[test]
    fn a_fence_belongs_to_the_folder_of_a_top_level_folder_it_is_in() {
        let owner = |p: &str| owner_folder(Path::new(p)).map(|o| o.display().to_string());
        assert_eq!(owner("/home/eve/r.git").as_deref(), Some("/home/eve"));
        assert_eq!(owner("/home/eve/a/b").as_deref(), Some("/home/eve"));
        assert_eq!(owner("/home/eve"), None);
        assert_eq!(
            owner("/var/lib/postgresql/15/main").as_deref(),
            Some("/var/lib/postgresql")
        );
        assert_eq!(
            owner("/var/www/site/uploads").as_deref(),
            Some("/var/www/site")
        );
        assert_eq!(owner("/var/mail"), None);
        assert_eq!(owner("/variable/x/y").as_deref(), Some("/variable/x"));
    }

    #[test]
    fn the_list_keeps_every_fence_on_its_own_line() {
        let text = with_added(&[PathBuf::from("/srv/a")], &[PathBuf::from("/srv/b")]);
        assert_eq!(text, "/srv/a\n/srv/b\n");
    }
}
