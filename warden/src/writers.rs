//! Who can replace an entry of a directory: the one rule behind the path
//! policy's check of a read's path (against the Worker) and the checks of
//! the Warden's own directories at start and install (against every
//! account but root).
//!
//! An account can rename or remove the entry `child` of the directory `dir`
//! — and so swap whatever lies below it for something else, a symbolic
//! link to `/etc` for one — when it owns `dir` (an owner can always change
//! the mode back) or can write to it, through its group bits or its other
//! bits. In a sticky directory (`/tmp`, mode 1777) writing is not enough:
//! the kernel lets only the entry's owner, the directory's owner and root
//! rename or remove an entry, so an entry that is not the account's stays
//! where it is. POSIX ACLs need no rule of their own: a named user or group
//! with write access sets the group write bit (the ACL mask).

#![forbid(unsafe_code)]

use crate::users::WorkerAccount;
use std::fs::Metadata;
use std::os::unix::fs::MetadataExt;

/// Whose changes a check guards against.
#[derive(Clone, Copy, Debug)]
pub enum Against<'a> {
    /// The Worker's account: its uid and its groups.
    Worker(&'a WorkerAccount),
    /// Every account but root.
    AllButRoot,
}

const STICKY: u32 = 0o1000;
const GROUP_W: u32 = 0o020;
const OTHER_W: u32 = 0o002;

/// Why the entry owned by `child_uid` in the directory `dir` could be
/// renamed, removed or replaced by an account `against` names; `None` when
/// it cannot. The phrase reads after the directory's name.
pub fn replaceable(dir: &Metadata, child_uid: u32, against: Against<'_>) -> Option<String> {
    let mode = dir.mode() & 0o7777;
    let sticky = mode & STICKY != 0;
    match against {
        Against::Worker(w) => {
            if dir.uid() == w.uid {
                return Some(format!(
                    "is owned by uid {}, the Worker's (mode {mode:04o})",
                    dir.uid()
                ));
            }
            let by_group = mode & GROUP_W != 0 && w.gids.contains(&dir.gid());
            let by_others = mode & OTHER_W != 0;
            if !(by_group || by_others) || (sticky && child_uid != w.uid) {
                return None;
            }
            Some(if by_group {
                format!(
                    "is writable by group {}, one of the Worker's (mode {mode:04o})",
                    dir.gid()
                )
            } else {
                format!("is writable by every account, the Worker's too (mode {mode:04o})")
            })
        }
        Against::AllButRoot => {
            if dir.uid() != 0 {
                return Some(format!("is owned by uid {} (mode {mode:04o})", dir.uid()));
            }
            if mode & (GROUP_W | OTHER_W) == 0 || (sticky && child_uid == 0) {
                return None;
            }
            Some(format!(
                "is writable by accounts other than root (mode {mode:04o}, group {})",
                dir.gid()
            ))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;
    use std::path::{Path, PathBuf};

    const WORKER: u32 = 4_242_001;
    const WORKER_GROUP: u32 = 4_242_002;
    const OTHER_GROUP: u32 = 4_242_003;

    fn worker() -> WorkerAccount {
        WorkerAccount {
            uid: WORKER,
            gids: vec![WORKER_GROUP],
        }
    }

    /// A directory with this owner, group and mode.
    fn dir(root: &Path, name: &str, uid: u32, gid: u32, mode: u32) -> Metadata {
        let p = root.join(name);
        std::fs::create_dir_all(&p).unwrap();
        std::os::unix::fs::chown(&p, Some(uid), Some(gid)).unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(mode)).unwrap();
        std::fs::symlink_metadata(&p).unwrap()
    }

    fn scratch(name: &str) -> PathBuf {
        let root =
            std::env::temp_dir().join(format!("aromba-writers-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        std::fs::create_dir_all(&root).unwrap();
        root
    }

    #[test]
    fn a_directory_the_worker_owns_lets_it_swap_any_entry() {
        let root = scratch("owner");
        let d = dir(&root, "d", WORKER, 0, 0o555);
        let w = worker();
        let why = replaceable(&d, 0, Against::Worker(&w)).expect("refused");
        assert!(why.contains("the Worker's"), "{why}");
        // Even sticky: the owner can take the bit away.
        let s = dir(&root, "s", WORKER, 0, 0o1777);
        assert!(replaceable(&s, 0, Against::Worker(&w)).is_some());
        assert!(replaceable(&d, 0, Against::AllButRoot).is_some());
        std::fs::remove_dir_all(&root).unwrap();
    }

    #[test]
    fn a_directory_writable_by_one_of_the_workers_groups_lets_it_swap() {
        let root = scratch("group");
        let w = worker();
        let mine = dir(&root, "mine", 0, WORKER_GROUP, 0o775);
        let why = replaceable(&mine, 0, Against::Worker(&w)).expect("refused");
        assert!(why.contains(&format!("group {WORKER_GROUP}")), "{why}");
        // Another group's write bit is not the Worker's to use...
        let theirs = dir(&root, "theirs", 0, OTHER_GROUP, 0o775);
        assert_eq!(replaceable(&theirs, 0, Against::Worker(&w)), None);
        // ...but it is another account's, and the Warden's own trees allow none.
        assert!(replaceable(&theirs, 0, Against::AllButRoot).is_some());
        std::fs::remove_dir_all(&root).unwrap();
    }

    #[test]
    fn a_directory_writable_by_everyone_lets_the_worker_swap() {
        let root = scratch("other");
        let w = worker();
        let open = dir(&root, "open", 0, 0, 0o777);
        let why = replaceable(&open, 0, Against::Worker(&w)).expect("refused");
        assert!(why.contains("every account"), "{why}");
        assert!(replaceable(&open, 0, Against::AllButRoot).is_some());
        let closed = dir(&root, "closed", 0, 0, 0o755);
        assert_eq!(replaceable(&closed, WORKER, Against::Worker(&w)), None);
        assert_eq!(replaceable(&closed, 0, Against::AllButRoot), None);
        std::fs::remove_dir_all(&root).unwrap();
    }

    #[test]
    fn a_sticky_directory_protects_entries_that_are_not_the_swappers() {
        let root = scratch("sticky");
        let w = worker();
        let tmp = dir(&root, "tmp", 0, 0, 0o1777);
        // Root's entry in /tmp: the Worker can neither rename nor remove it.
        assert_eq!(replaceable(&tmp, 0, Against::Worker(&w)), None);
        assert_eq!(replaceable(&tmp, 0, Against::AllButRoot), None);
        // The Worker's own entry in /tmp it can swap at will.
        assert!(replaceable(&tmp, WORKER, Against::Worker(&w)).is_some());
        // Another account's entry is that account's to swap.
        assert!(replaceable(&tmp, 1000, Against::AllButRoot).is_some());
        assert_eq!(replaceable(&tmp, 1000, Against::Worker(&w)), None);
        // Sticky and group-writable by the Worker's group: the same rule.
        let shared = dir(&root, "shared", 0, WORKER_GROUP, 0o1770);
        assert_eq!(replaceable(&shared, 0, Against::Worker(&w)), None);
        assert!(replaceable(&shared, WORKER, Against::Worker(&w)).is_some());
        std::fs::remove_dir_all(&root).unwrap();
    }
}
