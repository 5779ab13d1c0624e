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
//! where it is. A POSIX access ACL can give write access to a named user or
//! group that is neither the owner nor the owning group: the group bits of
//! the mode then show only the ACL's mask, so the mode alone cannot say
//! whose writes those are. Every directory is therefore judged with its
//! ACL ([`Dir::look`]), and a named entry for the Worker or one of its
//! groups that grants write through the mask counts as the Worker's write.

#![forbid(unsafe_code)]

use crate::users::WorkerAccount;
use std::fs::Metadata;
use std::os::unix::fs::MetadataExt;
use std::path::Path;

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

/// A directory as the check needs it: its metadata and its access ACL, both
/// read without following a final link.
#[derive(Debug)]
pub struct Dir {
    pub meta: Metadata,
    pub acl: Acl,
}

impl Dir {
    /// `lstat` and the access ACL of `path`.
    pub fn look(path: &Path) -> std::io::Result<Dir> {
        let meta = std::fs::symlink_metadata(path)?;
        let acl = Acl::of(path)?;
        Ok(Dir { meta, acl })
    }
}

/// The named entries of a POSIX access ACL that grant write access once
/// the mask is applied (`system.posix_acl_access`). An entry without its
/// mask, or an ACL that cannot be read, counts as writable: the check
/// refuses when it cannot tell.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Acl {
    /// Named users (`user:NAME:w`) who may write.
    pub users: Vec<u32>,
    /// Named groups (`group:NAME:w`) whose members may write.
    pub groups: Vec<u32>,
}

const ACL_XATTR: &std::ffi::CStr = c"system.posix_acl_access";
const ACL_VERSION: u32 = 2;
const ACL_USER: u16 = 0x02;
const ACL_GROUP: u16 = 0x08;
const ACL_MASK: u16 = 0x10;
const ACL_WRITE: u16 = 0x02;

/// Why an ACL cannot be read; a directory that has one is refused.
#[derive(Debug)]
pub struct AclUnreadable;

impl Acl {
    /// The access ACL of `path` (none on a filesystem without ACLs).
    pub fn of(path: &Path) -> std::io::Result<Acl> {
        match crate::system::lgetxattr(path, ACL_XATTR)? {
            None => Ok(Acl::default()),
            Some(raw) => Acl::parse(&raw).map_err(|AclUnreadable| {
                std::io::Error::other(format!(
                    "the access ACL of {} cannot be read",
                    path.display()
                ))
            }),
        }
    }

    /// The kernel's xattr form: a little-endian u32 version (2), then
    /// entries of u16 tag, u16 permissions, u32 id.
    pub fn parse(raw: &[u8]) -> Result<Acl, AclUnreadable> {
        let (version, entries) = raw.split_at_checked(4).ok_or(AclUnreadable)?;
        let version = u32::from_le_bytes(version.try_into().map_err(|_| AclUnreadable)?);
        if version != ACL_VERSION || entries.len() % 8 != 0 {
            return Err(AclUnreadable);
        }
        let mut named: Vec<(u16, u32)> = Vec::new();
        let mut mask_writes = None;
        for e in entries.chunks_exact(8) {
            let tag = u16::from_le_bytes([e[0], e[1]]);
            let perm = u16::from_le_bytes([e[2], e[3]]);
            let id = u32::from_le_bytes([e[4], e[5], e[6], e[7]]);
            match tag {
                ACL_MASK => mask_writes = Some(perm & ACL_WRITE != 0),
                ACL_USER | ACL_GROUP if perm & ACL_WRITE != 0 => named.push((tag, id)),
                _ => {}
            }
        }
        // Named entries without a mask are malformed; treat them as writing.
        if mask_writes == Some(false) {
            return Ok(Acl::default());
        }
        let pick = |t: u16| -> Vec<u32> {
            named
                .iter()
                .filter(|(tag, _)| *tag == t)
                .map(|(_, id)| *id)
                .collect()
        };
        Ok(Acl {
            users: pick(ACL_USER),
            groups: pick(ACL_GROUP),
        })
    }
}

/// How an account other than root could rename, remove or replace an
/// entry of a directory. Said, it is a phrase that reads after the
/// directory's name.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Swappable {
    /// The Worker owns the directory.
    OwnedByWorker { uid: u32, mode: u32 },
    /// Its ACL gives the Worker's uid write access.
    WorkerInAcl { uid: u32, mode: u32 },
    /// Its ACL gives one of the Worker's groups write access.
    WorkersGroupInAcl { gid: u32, mode: u32 },
    /// Its group, one of the Worker's, may write.
    WorkersGroup { gid: u32, mode: u32 },
    /// Every account may write.
    EveryAccount { mode: u32 },
    /// An account other than root owns it.
    OwnedBy { uid: u32, mode: u32 },
    /// Its group or every account may write.
    NotRootsAlone { mode: u32, gid: u32 },
}

impl std::fmt::Display for Swappable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Swappable::OwnedByWorker { uid, mode } => {
                write!(f, "is owned by uid {uid}, the Worker's (mode {mode:04o})")
            }
            Swappable::WorkerInAcl { uid, mode } => write!(
                f,
                "gives uid {uid}, the Worker's, write access in its ACL (mode {mode:04o})"
            ),
            Swappable::WorkersGroupInAcl { gid, mode } => write!(
                f,
                "gives group {gid}, one of the Worker's, write access in its ACL (mode {mode:04o})"
            ),
            Swappable::WorkersGroup { gid, mode } => write!(
                f,
                "is writable by group {gid}, one of the Worker's (mode {mode:04o})"
            ),
            Swappable::EveryAccount { mode } => write!(
                f,
                "is writable by every account, the Worker's too (mode {mode:04o})"
            ),
            Swappable::OwnedBy { uid, mode } => {
                write!(f, "is owned by uid {uid} (mode {mode:04o})")
            }
            Swappable::NotRootsAlone { mode, gid } => write!(
                f,
                "is writable by accounts other than root (mode {mode:04o}, group {gid})"
            ),
        }
    }
}

/// How the entry owned by `child_uid` in the directory `dir` could be
/// renamed, removed or replaced by an account `against` names; `None` when
/// it cannot.
pub fn replaceable(dir: &Dir, child_uid: u32, against: Against<'_>) -> Option<Swappable> {
    let (acl, dir) = (&dir.acl, &dir.meta);
    let mode = dir.mode() & 0o7777;
    let sticky = mode & STICKY != 0;
    match against {
        Against::Worker(w) => {
            if dir.uid() == w.uid {
                return Some(Swappable::OwnedByWorker {
                    uid: dir.uid(),
                    mode,
                });
            }
            let by_group = mode & GROUP_W != 0 && w.gids.contains(&dir.gid());
            let by_acl_user = acl.users.contains(&w.uid);
            let by_acl_group = acl.groups.iter().find(|g| w.gids.contains(g));
            let by_others = mode & OTHER_W != 0;
            let writes = by_group || by_acl_user || by_acl_group.is_some() || by_others;
            if !writes || (sticky && child_uid != w.uid) {
                return None;
            }
            Some(if by_acl_user {
                Swappable::WorkerInAcl { uid: w.uid, mode }
            } else if let Some(g) = by_acl_group {
                Swappable::WorkersGroupInAcl { gid: *g, mode }
            } else if by_group {
                Swappable::WorkersGroup {
                    gid: dir.gid(),
                    mode,
                }
            } else {
                Swappable::EveryAccount { mode }
            })
        }
        // An ACL's named entries write only through the mask, which the
        // group bits show: any group write bit already counts here.
        Against::AllButRoot => {
            if dir.uid() != 0 {
                return Some(Swappable::OwnedBy {
                    uid: dir.uid(),
                    mode,
                });
            }
            if mode & (GROUP_W | OTHER_W) == 0 || (sticky && child_uid == 0) {
                return None;
            }
            Some(Swappable::NotRootsAlone {
                mode,
                gid: dir.gid(),
            })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;
    use std::path::PathBuf;

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
    fn dir(root: &Path, name: &str, uid: u32, gid: u32, mode: u32) -> Dir {
        let p = root.join(name);
        std::fs::create_dir_all(&p).unwrap();
        std::os::unix::fs::chown(&p, Some(uid), Some(gid)).unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(mode)).unwrap();
        Dir::look(&p).unwrap()
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
        assert!(
            matches!(why, Swappable::OwnedByWorker { uid: WORKER, .. }),
            "{why:?}"
        );
        assert!(why.to_string().contains("the Worker's"), "{why}");
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
        assert!(
            matches!(
                why,
                Swappable::WorkersGroup {
                    gid: WORKER_GROUP,
                    ..
                }
            ),
            "{why:?}"
        );
        assert!(
            why.to_string().contains(&format!("group {WORKER_GROUP}")),
            "{why}"
        );
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
        assert!(matches!(why, Swappable::EveryAccount { .. }), "{why:?}");
        assert!(why.to_string().contains("every account"), "{why}");
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

    /// The kernel's form of an ACL: version 2, then (tag, perm, id) entries.
    fn acl(entries: &[(u16, u16, u32)]) -> Vec<u8> {
        let mut raw = 2u32.to_le_bytes().to_vec();
        for (tag, perm, id) in entries {
            raw.extend_from_slice(&tag.to_le_bytes());
            raw.extend_from_slice(&perm.to_le_bytes());
            raw.extend_from_slice(&id.to_le_bytes());
        }
        raw
    }

    #[test]
    fn an_acl_names_who_may_write_through_its_mask() {
        const OBJ: u16 = 0x01;
        const GOBJ: u16 = 0x04;
        const OTHER: u16 = 0x20;
        let base = [(OBJ, 7, 0), (GOBJ, 5, 0), (OTHER, 5, 0)];
        let with = |extra: &[(u16, u16, u32)]| {
            let mut e = base.to_vec();
            e.extend_from_slice(extra);
            Acl::parse(&acl(&e)).expect("parses")
        };
        assert_eq!(with(&[]), Acl::default());
        let a = with(&[(ACL_USER, 7, WORKER), (ACL_MASK, 7, 0)]);
        assert_eq!(a.users, [WORKER]);
        let g = with(&[(ACL_GROUP, 6, WORKER_GROUP), (ACL_MASK, 7, 0)]);
        assert_eq!(g.groups, [WORKER_GROUP]);
        // The mask without write takes it from every named entry.
        assert_eq!(
            with(&[(ACL_USER, 7, WORKER), (ACL_MASK, 5, 0)]),
            Acl::default()
        );
        // A named entry without write is no writer.
        assert_eq!(
            with(&[(ACL_USER, 5, WORKER), (ACL_MASK, 7, 0)]),
            Acl::default()
        );
        // A named entry without a mask is malformed: counted as writing.
        assert_eq!(with(&[(ACL_USER, 7, WORKER)]).users, [WORKER]);
        // Anything not in the kernel's form is refused.
        assert!(Acl::parse(&[]).is_err());
        assert!(Acl::parse(&acl(&base)[..9]).is_err());
        let mut v3 = acl(&base);
        v3[0] = 3;
        assert!(Acl::parse(&v3).is_err());
    }

    #[test]
    fn a_named_acl_entry_of_the_workers_lets_it_swap() {
        let w = worker();
        let meta = |root: &Path| std::fs::symlink_metadata(root).unwrap();
        let root = scratch("acl");
        // Root's 0775 directory of another group: the mode gives the Worker nothing.
        let d = dir(&root, "d", 0, OTHER_GROUP, 0o775);
        assert_eq!(replaceable(&d, 0, Against::Worker(&w)), None);
        let named = |acl: Acl| Dir {
            meta: meta(&root.join("d")),
            acl,
        };
        let by_user = named(Acl {
            users: vec![WORKER],
            groups: vec![],
        });
        let why = replaceable(&by_user, 0, Against::Worker(&w)).expect("refused");
        assert!(
            matches!(why, Swappable::WorkerInAcl { uid: WORKER, .. }),
            "{why:?}"
        );
        assert!(why.to_string().contains("ACL"), "{why}");
        let by_group = named(Acl {
            users: vec![],
            groups: vec![WORKER_GROUP],
        });
        assert!(matches!(
            replaceable(&by_group, 0, Against::Worker(&w)),
            Some(Swappable::WorkersGroupInAcl {
                gid: WORKER_GROUP,
                ..
            })
        ));
        // Sticky still protects root's entries from a named writer.
        std::fs::set_permissions(root.join("d"), std::fs::Permissions::from_mode(0o1775)).unwrap();
        let sticky = Dir {
            meta: meta(&root.join("d")),
            acl: Acl {
                users: vec![WORKER],
                groups: vec![],
            },
        };
        assert_eq!(replaceable(&sticky, 0, Against::Worker(&w)), None);
        assert!(replaceable(&sticky, WORKER, Against::Worker(&w)).is_some());
        std::fs::remove_dir_all(&root).unwrap();
    }
}
