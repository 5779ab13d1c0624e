//! Properties that hold for any input: redaction is idempotent, never leaves
//! a planted secret, never panics, and a cut at any byte leaves no part of a
//! secret long enough to matter.

use aromba_redact::{Class, redact, redact_cut};
use aromba_redact_corpus::random_document;
use proptest::prelude::*;

/// Pieces that make the rules work hard when glued together at random.
const PIECES: &[&str] = &[
    "password",
    "PASSWORD",
    "Token",
    "api_key",
    "secret",
    "auth",
    "Bearer ",
    "Basic ",
    "Authorization: ",
    "--password ",
    "--token=",
    "=",
    ": ",
    " = ",
    "\"",
    "'",
    "\\\"",
    "\n",
    " ",
    "\t",
    "://",
    "@",
    ":",
    "/",
    "postgres://u:",
    "-----BEGIN RSA PRIVATE KEY-----\n",
    "-----END RSA PRIVATE KEY-----",
    "-----BEGIN CERTIFICATE-----",
    "sk-",
    "sk-ant-",
    "sk-or-",
    "sk_live_",
    "ghp_",
    "github_pat_",
    "AKIA",
    "xoxb-",
    "AIza",
    "GOCSPX-",
    "ya29.",
    "1//0",
    "eyJ",
    ".",
    "123456789:",
    "bot",
    "hooks.slack.com/services/",
    "[redacted:jwt]",
    "[redacted:",
    "]",
    "abcdefghijklmnopqrstuvwxyz0123456789ABCDEFGHIJ",
    "0123456789",
    "/run/secrets/db",
    "%3A",
    "%3a%2F%2F",
    "%40",
    "%3D",
    "%26",
    "\\u003d",
    "\\u0022",
    "\\u0026",
    ":\\/\\/",
    "\\/",
    "\\n",
    "Authorization: token ",
    "WWW-Authenticate: Bearer realm=",
    "public key: ",
    "key_id=sha256:",
    "secret: >-\n",
    "password:\n",
    "  ",
    "    ",
    ";Password=",
    "Server=db;",
    "****",
    "#",
    "?",
    "=",
    "-----END OPENSSH PRIVATE KEY-----\n",
    "-----END CERTIFICATE-----\n",
    "Proc-Type: 4,ENCRYPTED\n",
    "MIIEpAIBAAKCAQEAu7x8Qd2Vh5cZ3mFq9nYk0wPzL1sJt4RbXe6gHa2KdUoNcMvW\n",
    "Yp0qSx3Tz7AbCdEfGhIjKlMnOpQrStUvWxYz0123456789abcdefghijklmnopqr\n",
    "AQAB==\n",
    "Dec 02 04:14:53 web-1 app[812]: ",
    "\u{e9}",
    "\u{1F600}",
];

fn glued() -> impl Strategy<Value = Vec<u8>> {
    prop::collection::vec(
        prop_oneof![
            prop::sample::select(PIECES).prop_map(|s| s.as_bytes().to_vec()),
            prop::collection::vec(any::<u8>(), 0..8),
        ],
        0..40,
    )
    .prop_map(|parts| parts.concat())
}

fn windows(fragment: &str) -> impl Iterator<Item = &[u8]> {
    let n = fragment.len().min(12);
    fragment.as_bytes().windows(n.max(1))
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn redaction_is_idempotent(input in glued()) {
        let once = redact(&input);
        let twice = redact(&once.text);
        prop_assert_eq!(&twice.text, &once.text);
        prop_assert_eq!(twice.counts.total(), 0);
    }

    #[test]
    fn cut_redaction_is_idempotent(input in glued()) {
        let once = redact_cut(&input);
        let twice = redact(&once.text);
        prop_assert_eq!(&twice.text, &once.text);
    }

    #[test]
    fn never_panics_on_arbitrary_bytes(input in prop::collection::vec(any::<u8>(), 0..512)) {
        let _ = redact(&input);
        let _ = redact_cut(&input);
    }

}

proptest! {
    // Each case generates a whole document: fewer cases, each a larger input.
    #![proptest_config(ProptestConfig::with_cases(300))]

    #[test]
    fn output_never_contains_a_planted_secret(seed in any::<u64>()) {
        let doc = random_document(seed);
        let out = redact(doc.text.as_bytes());
        for secret in &doc.secrets {
            for fragment in &secret.fragments {
                for w in windows(fragment) {
                    prop_assert!(
                        memchr::memmem::find(&out.text, w).is_none(),
                        "seed {seed}: {} leaked {:?}", secret.class, String::from_utf8_lossy(w)
                    );
                }
            }
        }
        for decoy in &doc.decoys {
            let before = doc.text.matches(decoy.text.as_str()).count();
            let after = String::from_utf8_lossy(&out.text).matches(decoy.text.as_str()).count();
            prop_assert_eq!(before, after, "seed {}: decoy {} touched", seed, &decoy.kind);
        }
    }

    #[test]
    fn a_cut_at_any_byte_leaves_no_part_of_a_secret(seed in any::<u64>(), at in any::<prop::sample::Index>()) {
        let doc = random_document(seed);
        let bytes = doc.text.as_bytes();
        let cut = at.index(bytes.len() + 1);
        let out = redact_cut(&bytes[..cut]);
        for secret in &doc.secrets {
            for fragment in &secret.fragments {
                for w in windows(fragment) {
                    prop_assert!(
                        memchr::memmem::find(&out.text, w).is_none(),
                        "seed {seed} cut {cut}: {} leaked {:?}", secret.class, String::from_utf8_lossy(w)
                    );
                }
            }
        }
        let unfinished = cut > 0 && !bytes[..cut].ends_with(b"\n");
        prop_assert_eq!(out.counts.get(Class::CutLine), u32::from(unfinished));
    }
}
