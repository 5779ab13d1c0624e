//! Where chores come from: the system skill's, embedded in the Warden
//! binary, and the owner's, from `mine/` under the Warden's configuration
//! directory — root-owned and writable by nobody else, or refused.

#![forbid(unsafe_code)]

use super::header::Header;
use super::run::{Chore, Origin};
use crate::layout::Layout;
use crate::skills::Trust;
use std::os::unix::fs::MetadataExt;

/// The system chores, compiled in.
const SYSTEM: &[&str] = &[
    include_str!("../../chores/time-sync.sh"),
    include_str!("../../chores/journal-vacuum.sh"),
    include_str!("../../chores/apt-clean.sh"),
    include_str!("../../chores/old-logs.sh"),
    include_str!("../../chores/docker-prune.sh"),
    include_str!("../../chores/install-fail2ban.sh"),
    include_str!("../../chores/security-updates.sh"),
    include_str!("../../chores/restart-failed.sh"),
];

pub fn system() -> Vec<Chore> {
    SYSTEM
        .iter()
        .filter_map(|script| {
            // Embedded scripts are checked by a test; one that did not
            // parse would simply be absent.
            Header::parse(script).ok().map(|header| Chore {
                header,
                script: script.to_string(),
                origin: Origin::System,
            })
        })
        .collect()
}

/// The owner's chores, and the ones refused with why.
pub fn mine(layout: &Layout) -> (Vec<Chore>, Vec<String>) {
    let dir = layout.config_dir.join("mine");
    let mut chores = Vec::new();
    let mut refused = Vec::new();
    let Ok(dir_meta) = std::fs::symlink_metadata(&dir) else {
        return (chores, refused);
    };
    if dir_meta.uid() != 0 || dir_meta.mode() & 0o022 != 0 || !dir_meta.is_dir() {
        refused.push(format!(
            "{}: must be a directory owned by root and writable by nobody else",
            dir.display()
        ));
        return (chores, refused);
    }
    let Ok(entries) = std::fs::read_dir(&dir) else {
        return (chores, refused);
    };
    let mut paths: Vec<_> = entries.filter_map(|e| e.ok().map(|e| e.path())).collect();
    paths.sort();
    for path in paths {
        let Ok(meta) = std::fs::symlink_metadata(&path) else {
            continue;
        };
        if !meta.is_file() || meta.uid() != 0 || meta.mode() & 0o022 != 0 {
            refused.push(format!(
                "{}: must be a regular file owned by root and writable by nobody else",
                path.display()
            ));
            continue;
        }
        match std::fs::read_to_string(&path)
            .map_err(|e| e.to_string())
            .and_then(|s| Header::parse(&s).map(|h| (h, s)).map_err(|e| e.to_string()))
        {
            Ok((header, script)) => chores.push(Chore {
                header,
                script,
                origin: Origin::Mine,
            }),
            Err(e) => refused.push(format!("{}: {e}", path.display())),
        }
    }
    (chores, refused)
}

/// Every chore by name: the system's first, then the owner's, then the
/// installed skills' (each verified again, each chore within its
/// manifest); a chore may not take an earlier one's name.
pub fn all(layout: &Layout, publishers: &Trust<'_>) -> (Vec<Chore>, Vec<String>) {
    let mut chores = system();
    let (mine, mut refused) = mine(layout);
    for c in mine {
        if chores.iter().any(|s| s.header.name == c.header.name) {
            refused.push(format!("{}: a system chore has that name", c.header.name));
        } else {
            chores.push(c);
        }
    }
    let (skills, skills_refused) = crate::skills::all_installed(publishers);
    refused.extend(skills_refused);
    for skill in skills {
        for (header, script) in skill.chores {
            if let Some(taken) = chores.iter().find(|c| c.header.name == header.name) {
                refused.push(format!(
                    "{}'s chore {}: {} has that name",
                    skill.manifest.name,
                    header.name,
                    taken.origin.described()
                ));
                continue;
            }
            chores.push(Chore {
                header,
                script,
                origin: Origin::Skill(skill.manifest.name.clone()),
            });
        }
    }
    (chores, refused)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_embedded_chore_parses() {
        for script in SYSTEM {
            Header::parse(script).expect("an embedded chore's header parses");
        }
        assert_eq!(system().len(), SYSTEM.len());
    }

    #[test]
    fn every_embedded_chore_declares_what_it_reads() {
        // The key is optional for the owner's chores; ours say it, `none`
        // included, so that what each one is shown is written down.
        for script in SYSTEM {
            let header = script.split("\n# end\n").next().unwrap_or_default();
            assert!(
                header.lines().any(|l| l.starts_with("# reads: ")),
                "{header}"
            );
        }
    }
}
