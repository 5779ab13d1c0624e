//! The Warden's deny list, as the assistant's grammar refuses a read
//! before asking: the Warden matches it against the whole command line
//! first, and a hit there is a signal that climbs the ladder — for a path
//! or a name the model may have read in a file name or a log line. The
//! list is the Warden's (`aromba_warden::policy::DENY`); a test keeps them
//! equal. The Worker links no Warden code, hence the copy.

use regex::Regex;
use std::sync::OnceLock;

/// Matched against the whole request; a hit refuses it and counts toward the ladder.
pub const DENY: &[(&str, &str)] = &[
    (
        "rm-root",
        r#"\brm\b(?:\s+(?:-\S+|--\S+))*\s+-\S*[rR]\S*(?:\s+(?:-\S+|--\S+))*\s+(?:/|/\*|~|~/|\$HOME|\$HOME/|/(?:etc|usr|var|boot|bin|sbin|lib|lib64|home|root|opt|srv)/?)(?:\s|$)"#,
    ),
    ("dd-device", r#"\bdd\b.*\bof=/dev/"#),
    (
        "mkfs",
        r#"(?:^|[;&|]\s*|\bsudo\s+)(?:mkfs(?:\.\w+)?|wipefs|mkswap)\b"#,
    ),
    (
        "pipe-to-shell",
        r#"\b(?:curl|wget)\b.*\|\s*(?:sudo\s+)?(?:sh|bash|zsh|dash|ksh)\b"#,
    ),
    (
        "protected-path",
        r#"/etc/sudoers|/etc/aromba/|/etc/ssh/sshd_config|authorized_keys|/etc/g?shadow\b|\bvisudo\b"#,
    ),
    (
        "chmod-777",
        r#"\bchmod\b(?:.*\s-R\b.*\s[ugoa]*0?777\b|.*\s0?777\b.*\s-R\b)"#,
    ),
    (
        "power",
        r#"(?:^|[;&|]\s*|\bsudo\s+)(?:shutdown|reboot|halt|poweroff)\b|\bsystemctl\s+(?:reboot|poweroff|halt|kexec|suspend|hibernate)\b|(?:^|[;&|]\s*|\bsudo\s+)(?:tel)?init\s+[06]\b"#,
    ),
    (
        "firewall-flush",
        r#"\biptables\b.*\s(?:-F|--flush)\b|\bnft\s+flush\s+ruleset\b|\bufw\s+(?:disable|reset)\b"#,
    ),
    ("history", r#"\bhistory\s+-c\b"#),
    (
        "secret-path",
        r#"(?:^|[\s/=:'"])\.(?:ssh|aws|gnupg|kube|docker|azure|password-store)(?:/|\s|$)|(?:^|[\s/=:'"])\.env(?:\.[\w-]+)?\b|\.(?:pem|key|p12|pfx)\b|\bid_(?:rsa|dsa|ecdsa|ed25519)\b|\.netrc\b|secrets\.toml|\b\w*(?:secret|credential)s?\.(?:json|ya?ml|toml|txt|env)\b|/proc/\d+/(?:environ|cmdline|mem)\b"#,
    ),
];

fn patterns() -> &'static [(&'static str, Regex)] {
    static RE: OnceLock<Vec<(&'static str, Regex)>> = OnceLock::new();
    RE.get_or_init(|| {
        DENY.iter()
            .filter_map(|(name, pattern)| Regex::new(pattern).ok().map(|re| (*name, re)))
            .collect()
    })
}

/// The deny rule the request `cmd args…` hits, joined as the Warden joins
/// it, if any.
pub fn hit(cmd: &str, args: &[String]) -> Option<&'static str> {
    let mut whole = String::from(cmd);
    for a in args {
        whole.push(' ');
        whole.push_str(a);
    }
    patterns()
        .iter()
        .find(|(_, re)| re.is_match(&whole))
        .map(|(name, _)| *name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_list_is_the_wardens_and_every_pattern_compiles() {
        assert_eq!(DENY, aromba_warden::policy::DENY);
        assert_eq!(patterns().len(), DENY.len());
    }

    #[test]
    fn hits_as_the_warden_does() {
        for (cmd, args) in [
            ("du", vec!["-x", "-h", "--max-depth=1", "/etc/aromba/x"]),
            ("du", vec!["-x", "-h", "--max-depth=1", "/srv/site.key.d"]),
            ("journalctl", vec!["--no-pager", "--unit=id_rsa"]),
            ("du", vec!["-x", "-h", "--max-depth=1", "/var"]),
        ] {
            let args: Vec<String> = args.into_iter().map(String::from).collect();
            assert_eq!(
                hit(cmd, &args),
                aromba_warden::policy::deny_hit(cmd, &args),
                "{cmd} {args:?}"
            );
        }
    }
}
