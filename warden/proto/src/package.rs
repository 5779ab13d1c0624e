//! Whether Aromba came from its Debian package. dpkg then owns the
//! systemd units, the `aromba` command and the sysusers file that makes
//! the user `aromba`: `aromba uninstall` removing them would leave dpkg's
//! database saying they are there (the next upgrade or `apt purge` puts
//! them back or trips over them), and systemd-sysusers would make the user
//! again at the next boot. So the uninstall is dpkg's: the Warden refuses
//! it, and `aromba uninstall` says so before it asks anything. Shared here
//! so that the Worker's binary and the Warden judge it alike.
//!
//! dpkg's record is its list of the package's files,
//! `/var/lib/dpkg/info/aromba.list` (for `dpkg --root ROOT`, and a Warden
//! under `--root ROOT`, `ROOT/var/lib/dpkg/info/aromba.list`): root's, and
//! read only to see whether it names one of Aromba's units — the Warden
//! runs no program to ask dpkg.

use std::io::{self, Read};
use std::path::{Path, PathBuf};

/// What `aromba uninstall` answers when dpkg installed Aromba.
pub const USE_APT_PURGE: &str = "Aromba was installed from its Debian package, so dpkg owns its services, the aromba command and the aromba user's sysusers file (removed behind its back, they would come back): run `apt purge aromba` instead, which stops Aromba and removes its releases, configuration and state, and keeps the journal (/var/lib/aromba-warden/journal) and the user aromba for you to remove.";

/// The units the package ships, by file name.
const PACKAGED_UNITS: [&str; 3] = [
    "aromba.service",
    "aromba-warden.service",
    "aromba-rollback.service",
];

/// dpkg's list is a few dozen lines; a larger file is read this far.
const MAX_LIST: u64 = 1 << 20;

/// dpkg's list of the package's files under `root` (`/` for the system).
pub fn dpkg_list(root: &Path) -> PathBuf {
    root.join("var/lib/dpkg/info/aromba.list")
}

/// Whether a dpkg file list names one of Aromba's units in a systemd
/// unit folder (`/lib/systemd/system/…`, `/usr/lib/systemd/system/…`).
/// A list without them is a package that was removed but not purged, or
/// another's: then dpkg owns no unit of ours.
pub fn lists_our_units(list: &str) -> bool {
    list.lines().any(|line| {
        let path = Path::new(line.trim_end());
        let unit = path.file_name().and_then(|n| n.to_str());
        let in_units = path.parent().is_some_and(|p| p.ends_with("systemd/system"));
        in_units && unit.is_some_and(|u| PACKAGED_UNITS.contains(&u))
    })
}

/// Whether dpkg installed Aromba under `root`: its list exists and names
/// our units. An unreadable list is an error, not a "no": uninstalling
/// beside dpkg is what this guards against.
pub fn installed_by_dpkg(root: &Path) -> io::Result<bool> {
    let path = dpkg_list(root);
    let file = match std::fs::File::open(&path) {
        Ok(f) => f,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(false),
        Err(e) => return Err(e),
    };
    let mut bytes = Vec::new();
    file.take(MAX_LIST).read_to_end(&mut bytes)?;
    Ok(lists_our_units(&String::from_utf8_lossy(&bytes)))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// As dpkg writes it for the package `scripts/deb` builds.
    const LIST: &str = "/.\n/lib\n/lib/systemd\n/lib/systemd/system\n/lib/systemd/system/aromba-rollback.service\n/lib/systemd/system/aromba-warden.service\n/lib/systemd/system/aromba.service\n/usr\n/usr/bin\n/usr/bin/aromba\n/usr/lib/sysusers.d/aromba.conf\n";

    #[test]
    fn a_list_naming_our_units_is_a_dpkg_install_and_nothing_else_is() {
        assert!(lists_our_units(LIST));
        assert!(lists_our_units(
            "/usr/lib/systemd/system/aromba-warden.service\n"
        ));
        // Removed, not purged: no unit left in the list.
        assert!(!lists_our_units("/.\n/usr\n/usr/share/doc/aromba\n"));
        // A unit of the same name elsewhere is not the package's unit.
        assert!(!lists_our_units("/usr/share/doc/aromba/aromba.service\n"));
        assert!(!lists_our_units("/lib/systemd/system/nginx.service\n"));
        assert!(!lists_our_units(""));
    }

    #[test]
    fn the_list_is_looked_for_under_the_root_given() {
        assert_eq!(
            dpkg_list(Path::new("/")),
            Path::new("/var/lib/dpkg/info/aromba.list")
        );
        let dir = std::env::temp_dir().join(format!("aromba-dpkg-list-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        assert!(!installed_by_dpkg(&dir).unwrap());
        std::fs::create_dir_all(dir.join("var/lib/dpkg/info")).unwrap();
        std::fs::write(dpkg_list(&dir), LIST).unwrap();
        assert!(installed_by_dpkg(&dir).unwrap());
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
