//! What the Warden fills in for a chore action's placeholder, parsed from
//! the output of its own policy reads — redacted output, the only kind exec
//! gives out. A marker (`[redacted:…]`) is no package name and ends in no
//! `.service`, so a line the redactor changed yields nothing or a name the
//! chore action's policy still judges (a package installed here, a unit
//! that may be restarted), like any other.

#![forbid(unsafe_code)]

/// `@security-upgrades`: installed packages whose candidate comes from a
/// security suite, from `apt list --upgradable`
/// (`name/suite version arch [upgradable from: …]`).
pub fn security_upgrades(apt_list: &str) -> Vec<String> {
    apt_list
        .lines()
        .filter_map(|l| {
            let (name, rest) = l.split_once('/')?;
            let suites = rest.split(' ').next()?;
            suites
                .split(',')
                .any(|s| s.ends_with("-security") || s.ends_with("/updates"))
                .then(|| name.to_string())
        })
        .collect()
}

/// `@failed-services`: the units systemd lists as failed, from
/// `systemctl list-units --state=failed --type=service --plain --no-legend`.
pub fn failed_services(list_units: &str) -> Vec<String> {
    list_units
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        .filter(|u| u.ends_with(".service"))
        .map(String::from)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn takes_only_packages_from_a_security_suite() {
        let out = "Listing...\nopenssl/bookworm-security 3.0.15-1~deb12u1 amd64 [upgradable from: 3.0.14-1~deb12u2]\ntzdata/bookworm-updates 2025b-0+deb12u1 all [upgradable from: 2024b-0+deb12u1]\nlibssl3/stable-security,bookworm-security 3.0.15 amd64 [upgradable from: 3.0.14]\n";
        assert_eq!(security_upgrades(out), ["openssl", "libssl3"]);
        assert!(security_upgrades("Listing...\n").is_empty());
    }

    #[test]
    fn takes_the_failed_service_units() {
        let out = "nginx.service loaded failed failed A high performance web server\nfoo.mount loaded failed failed Foo\n";
        assert_eq!(failed_services(out), ["nginx.service"]);
    }
}
