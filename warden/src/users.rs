//! The Worker's account, looked up in `/etc/passwd` (system accounts live
//! there; the Warden links no NSS client).

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
}
