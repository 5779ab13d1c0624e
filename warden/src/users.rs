//! The Worker's account, looked up in `/etc/passwd` and `/etc/group`
//! (system accounts live there; the Warden links no NSS client).

#![forbid(unsafe_code)]

use std::path::Path;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Account {
    pub uid: u32,
    pub gid: u32,
}

/// The uid and gid of `name` in the passwd file at `passwd`.
pub fn lookup(passwd: &Path, name: &str) -> Result<Option<Account>, std::io::Error> {
    let text = std::fs::read_to_string(passwd)?;
    Ok(parse(&text, name))
}

fn parse(text: &str, name: &str) -> Option<Account> {
    text.lines().find_map(|line| {
        let mut f = line.split(':');
        if f.next()? != name {
            return None;
        }
        let _password = f.next()?;
        let uid = f.next()?.parse().ok()?;
        let gid = f.next()?.parse().ok()?;
        Some(Account { uid, gid })
    })
}

/// The Worker's account as the path check needs it: whose writes could
/// swap a directory under a path between the check and the read. Its uid
/// and every group it is in: the primary one and each group `/etc/group`
/// lists it in.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WorkerAccount {
    pub uid: u32,
    /// Primary first, then the supplementary groups; no duplicates.
    pub gids: Vec<u32>,
}

impl WorkerAccount {
    /// `uid` with its primary group `gid` and the groups of every name
    /// `passwd` gives that uid (two names may share one) in `group`. A uid
    /// with no line in `passwd` has its primary group only.
    pub fn lookup(
        passwd: &Path,
        group: &Path,
        uid: u32,
        gid: u32,
    ) -> Result<WorkerAccount, std::io::Error> {
        let passwd = std::fs::read_to_string(passwd)?;
        let group = std::fs::read_to_string(group)?;
        Ok(WorkerAccount::parse(&passwd, &group, uid, gid))
    }

    /// [`WorkerAccount::lookup`] in the system's `/etc/passwd` and
    /// `/etc/group`.
    pub fn system(uid: u32, gid: u32) -> Result<WorkerAccount, std::io::Error> {
        WorkerAccount::lookup(Path::new("/etc/passwd"), Path::new("/etc/group"), uid, gid)
    }

    fn parse(passwd: &str, group: &str, uid: u32, gid: u32) -> WorkerAccount {
        let names: Vec<&str> = passwd
            .lines()
            .filter_map(|line| {
                let mut f = line.split(':');
                let name = f.next()?;
                let _password = f.next()?;
                (f.next()?.parse::<u32>().ok()? == uid).then_some(name)
            })
            .collect();
        let mut gids = vec![gid];
        for line in group.lines() {
            let mut f = line.split(':');
            let (Some(_name), Some(_password), Some(g), Some(members)) =
                (f.next(), f.next(), f.next(), f.next())
            else {
                continue;
            };
            let Ok(g) = g.parse::<u32>() else { continue };
            if members
                .split(',')
                .any(|m| !m.is_empty() && names.contains(&m))
                && !gids.contains(&g)
            {
                gids.push(g);
            }
        }
        WorkerAccount { uid, gids }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_an_account_and_ignores_lookalikes() {
        let text = "root:x:0:0:root:/root:/bin/bash\naromba-x:x:5:5::/:/bin/false\naromba:x:998:997::/nonexistent:/usr/sbin/nologin\n";
        assert_eq!(parse(text, "aromba"), Some(Account { uid: 998, gid: 997 }));
        assert_eq!(parse(text, "nobody"), None);
        assert_eq!(parse("aromba:x:notanumber:1::/:/bin/false", "aromba"), None);
    }

    #[test]
    fn the_workers_groups_are_its_primary_one_and_every_group_listing_it() {
        let passwd = "root:x:0:0::/root:/bin/bash\naromba:x:998:997::/var/lib/aromba:/usr/sbin/nologin\naromba2:x:998:997::/:/bin/false\nalice:x:1000:1000::/home/alice:/bin/bash\n";
        let group = "root:x:0:\naromba:x:997:\ndocker:x:120:alice,aromba\nadm:x:4:syslog,aromba-x\nweb:x:33:aromba2\nbroken\nstaff:x:notanumber:aromba\n";
        let w = WorkerAccount::parse(passwd, group, 998, 997);
        assert_eq!(
            w.gids,
            vec![997, 120, 33],
            "a second name of the uid counts"
        );
        let stranger = WorkerAccount::parse(passwd, group, 4242, 4242);
        assert_eq!(stranger.gids, vec![4242]);
    }
}
