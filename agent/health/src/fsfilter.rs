//! Which filesystems matter to a person looking after a server.
//!
//! A filesystem is left out of alerts and of `/disk` when its type is one of
//! [`IGNORED_FSTYPES`] (memory-backed, read-only images, kernel interfaces,
//! container layers), when its mount point is one of
//! [`IGNORED_MOUNT_PREFIXES`] or under one, or when it reports a size of
//! zero. Everything else — ext4, xfs, btrfs, zfs, vfat `/boot/efi`, NFS and
//! CIFS shares — is kept: any of them filling up breaks something.

use crate::df::Filesystem;

/// Types that hold no user data that can fill up, or that fill by design:
///
/// - memory-backed: `tmpfs`, `devtmpfs`, `ramfs` (freed at reboot; a full
///   `/dev/shm` is an application's problem, not the disk's);
/// - read-only images: `squashfs` (every snap is a loop-mounted squashfs,
///   always 100 % used), `iso9660`, `udf`, `erofs`;
/// - container layers: `overlay`, `aufs` (the same disk as their backing
///   filesystem, which is listed on its own);
/// - kernel interfaces: `proc`, `sysfs`, `devpts`, `cgroup`, `cgroup2`,
///   `securityfs`, `pstore`, `debugfs`, `tracefs`, `configfs`, `fusectl`,
///   `mqueue`, `hugetlbfs`, `bpf`, `binfmt_misc`, `autofs`, `efivarfs`,
///   `nsfs`, `rpc_pipefs`, `nfsd`, `selinuxfs`;
/// - `rootfs`, which old kernels list beside the real root;
/// - FUSE views of other filesystems: `fuse.lxcfs`, `fuse.snapfuse`,
///   `fuse.squashfuse`, `fuse.gvfsd-fuse`, `fuse.portal`.
pub const IGNORED_FSTYPES: &[&str] = &[
    "tmpfs",
    "devtmpfs",
    "ramfs",
    "squashfs",
    "iso9660",
    "udf",
    "erofs",
    "overlay",
    "aufs",
    "proc",
    "sysfs",
    "devpts",
    "cgroup",
    "cgroup2",
    "securityfs",
    "pstore",
    "debugfs",
    "tracefs",
    "configfs",
    "fusectl",
    "mqueue",
    "hugetlbfs",
    "bpf",
    "binfmt_misc",
    "autofs",
    "efivarfs",
    "nsfs",
    "rpc_pipefs",
    "nfsd",
    "selinuxfs",
    "rootfs",
    "fuse.lxcfs",
    "fuse.snapfuse",
    "fuse.squashfuse",
    "fuse.gvfsd-fuse",
    "fuse.portal",
];

/// Mount points (and everything under them) that are never the user's
/// data, whatever their type: kernel trees, runtime state, snap images,
/// container layers and volumes managed by their engine.
pub const IGNORED_MOUNT_PREFIXES: &[&str] = &[
    "/proc",
    "/sys",
    "/dev",
    "/run",
    "/snap",
    "/var/lib/docker",
    "/var/lib/containers",
    "/var/lib/kubelet",
];

/// Whether a filesystem matters for alerts and `/disk`.
pub fn is_relevant(fs: &Filesystem) -> bool {
    if fs.size == 0 {
        return false;
    }
    if IGNORED_FSTYPES.contains(&fs.fstype.as_str()) {
        return false;
    }
    !IGNORED_MOUNT_PREFIXES.iter().any(|prefix| {
        fs.mount == *prefix
            || fs
                .mount
                .strip_prefix(prefix)
                .is_some_and(|rest| rest.starts_with('/'))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fs(fstype: &str, mount: &str, size: u64) -> Filesystem {
        Filesystem {
            source: "/dev/x".to_owned(),
            fstype: fstype.to_owned(),
            size,
            used: 0,
            avail: size,
            mount: mount.to_owned(),
        }
    }

    #[test]
    fn keeps_disks_and_leaves_out_the_rest() {
        assert!(is_relevant(&fs("ext4", "/", 10)));
        assert!(is_relevant(&fs("vfat", "/boot/efi", 10)));
        assert!(is_relevant(&fs("nfs", "/mnt/test", 10)));
        assert!(is_relevant(&fs("ext4", "/srv/backup disk", 10)));
        assert!(!is_relevant(&fs("tmpfs", "/srv/cache", 10)));
        assert!(!is_relevant(&fs("squashfs", "/snap/core20/1828", 10)));
        assert!(!is_relevant(&fs("ext4", "/snap/x", 10)));
        assert!(!is_relevant(&fs(
            "overlay",
            "/var/lib/docker/overlay2/abc/merged",
            10
        )));
        assert!(!is_relevant(&fs("ext4", "/", 0)));
    }

    #[test]
    fn a_prefix_is_a_whole_path_component() {
        assert!(!is_relevant(&fs("ext4", "/dev", 10)));
        assert!(is_relevant(&fs("ext4", "/devices", 10)));
        assert!(is_relevant(&fs("ext4", "/snapshots", 10)));
        assert!(is_relevant(&fs("ext4", "/running", 10)));
    }
}
