//! A manifest is read only once its signature verifies with a trusted key,
//! strictly, and a release is admitted only where and when it may go.

use aromba_release::{Binary, Keys, Manifest, ReleaseError, Target, Version};
use serde_json::{Value, json};

struct Signer {
    keys: minisign::KeyPair,
}

impl Signer {
    fn new() -> Signer {
        Signer {
            keys: minisign::KeyPair::generate_unencrypted_keypair().expect("a key"),
        }
    }

    fn sign(&self, bytes: &[u8]) -> String {
        self.sign_with(bytes, "aromba release")
    }

    /// Signed with `comment` as the trusted comment.
    fn sign_with(&self, bytes: &[u8], comment: &str) -> String {
        minisign::sign(
            Some(&self.keys.pk),
            &self.keys.sk,
            std::io::Cursor::new(bytes),
            Some(comment),
            None,
        )
        .expect("signed")
        .to_string()
    }

    fn public(&self) -> String {
        self.keys.pk.to_base64()
    }
}

fn manifest() -> Value {
    json!({
        "format": 1,
        "version": "1.4.2",
        "channel": "stable",
        "arch": "x86_64",
        "expires": 2_000_000_000u64,
        "binaries": [
            {"binary": "aromba", "tarball": "aromba-1.4.2-x86_64.tar.gz", "sha256": "a".repeat(64), "size": 4000},
            {"binary": "aromba-warden", "tarball": "aromba-warden-1.4.2-x86_64.tar.gz", "sha256": "b".repeat(64), "size": 3000}
        ]
    })
}

fn bytes(v: &Value) -> Vec<u8> {
    serde_json::to_vec(v).expect("JSON")
}

#[test]
fn a_manifest_signed_by_a_trusted_key_is_read_with_every_field() {
    let signer = Signer::new();
    let body = bytes(&manifest());
    let keys = Keys::from_base64(&[&signer.public()]).expect("keys");
    let m = Manifest::verified(&body, &signer.sign(&body), &keys).expect("verified");
    assert_eq!(m.version, Version::parse("1.4.2").unwrap());
    assert_eq!(
        (m.channel.as_str(), m.arch.as_str(), m.expires),
        ("stable", "x86_64", 2_000_000_000)
    );
    assert_eq!(
        m.entry(Binary::Worker).tarball,
        "aromba-1.4.2-x86_64.tar.gz"
    );
    assert_eq!(m.entry(Binary::Warden).size, 3000);
}

#[test]
fn the_standby_key_verifies_too_so_the_key_can_be_rotated() {
    let (current, standby) = (Signer::new(), Signer::new());
    let keys = Keys::from_base64(&[&current.public(), &standby.public()]).expect("keys");
    let body = bytes(&manifest());
    assert!(Manifest::verified(&body, &standby.sign(&body), &keys).is_ok());
}

#[test]
fn a_signature_by_another_key_or_over_other_bytes_is_refused() {
    let (trusted, other) = (Signer::new(), Signer::new());
    let keys = Keys::from_base64(&[&trusted.public()]).expect("keys");
    let body = bytes(&manifest());
    let err = Manifest::verified(&body, &other.sign(&body), &keys).unwrap_err();
    assert!(matches!(err, ReleaseError::BadSignature(_)), "{err}");
    let signature = trusted.sign(&body);
    let mut changed = manifest();
    changed["version"] = json!("9.9.9");
    assert!(matches!(
        Manifest::verified(&bytes(&changed), &signature, &keys),
        Err(ReleaseError::BadSignature(_))
    ));
    assert!(matches!(
        Manifest::verified(&body, "not a signature", &keys),
        Err(ReleaseError::BadSignature(_))
    ));
}

#[test]
fn no_keys_means_no_update() {
    assert_eq!(Keys::from_base64(&[]).err(), Some(ReleaseError::NoKeys));
    assert!(ReleaseError::NoKeys.to_string().contains("cannot update"));
}

#[test]
fn a_manifest_off_its_shape_is_refused() {
    type Mutation = Box<dyn Fn(&mut Value)>;
    let mutations: Vec<(&str, Mutation)> = vec![
        ("an unknown field", Box::new(|m| m["notes"] = json!("hi"))),
        (
            "a missing field",
            Box::new(|m| {
                m.as_object_mut().unwrap().remove("expires");
            }),
        ),
        ("another format", Box::new(|m| m["format"] = json!(2))),
        (
            "a third binary",
            Box::new(|m| {
                m["binaries"].as_array_mut().unwrap().push(json!({"binary": "aromba", "tarball": "x.tar.gz", "sha256": "c".repeat(64), "size": 1}))
            }),
        ),
        (
            "one binary twice",
            Box::new(|m| m["binaries"][1]["binary"] = json!("aromba")),
        ),
        (
            "an unknown binary",
            Box::new(|m| m["binaries"][1]["binary"] = json!("sh")),
        ),
        (
            "a tarball in a folder",
            Box::new(|m| m["binaries"][0]["tarball"] = json!("../aromba.tar.gz")),
        ),
        (
            "a tarball with a slash",
            Box::new(|m| m["binaries"][0]["tarball"] = json!("a/b.tar.gz")),
        ),
        (
            "a hidden tarball",
            Box::new(|m| m["binaries"][0]["tarball"] = json!(".a.tar.gz")),
        ),
        (
            "not a tarball",
            Box::new(|m| m["binaries"][0]["tarball"] = json!("aromba.zip")),
        ),
        (
            "one tarball for both",
            Box::new(|m| m["binaries"][1]["tarball"] = json!("aromba-1.4.2-x86_64.tar.gz")),
        ),
        (
            "a short hash",
            Box::new(|m| m["binaries"][0]["sha256"] = json!("abc")),
        ),
        (
            "an upper-case hash",
            Box::new(|m| m["binaries"][0]["sha256"] = json!("A".repeat(64))),
        ),
        (
            "a zero size",
            Box::new(|m| m["binaries"][0]["size"] = json!(0)),
        ),
        (
            "a huge size",
            Box::new(|m| m["binaries"][0]["size"] = json!(1u64 << 40)),
        ),
        (
            "a negative size",
            Box::new(|m| m["binaries"][0]["size"] = json!(-1)),
        ),
        (
            "a pre-release version",
            Box::new(|m| m["version"] = json!("1.4.2-rc1")),
        ),
        (
            "an odd channel",
            Box::new(|m| m["channel"] = json!("Stable!")),
        ),
        (
            "a string expiry",
            Box::new(|m| m["expires"] = json!("2030")),
        ),
    ];
    for (what, change) in mutations {
        let mut m = manifest();
        change(&mut m);
        let err = Manifest::parse(&bytes(&m)).expect_err(what);
        assert!(matches!(err, ReleaseError::Manifest(_)), "{what}: {err}");
    }
    assert!(
        Manifest::parse(&vec![b' '; 20_000]).is_err(),
        "an oversize manifest"
    );
}

#[test]
fn a_release_is_admitted_only_for_this_machine_above_what_is_installed() {
    let m = Manifest::parse(&bytes(&manifest())).expect("parsed");
    let here = Target {
        arch: "x86_64".into(),
        channel: "stable".into(),
    };
    // Ten days before it expires.
    let now = 2_000_000_000 - 10 * 86_400;
    let v = |t| Version::parse(t).unwrap();
    assert!(m.admissible(&here, now, Some(v("1.4.1")), &[]).is_ok());
    assert!(m.admissible(&here, now, None, &[v("1.4.0")]).is_ok());
    let refused = |r: Result<(), ReleaseError>, want: &str| {
        let err = r.expect_err(want).to_string();
        assert!(err.contains(want), "{err} lacks {want}");
    };
    refused(m.admissible(&here, now, Some(v("1.4.2")), &[]), "not above");
    refused(m.admissible(&here, now, Some(v("2.0.0")), &[]), "not above");
    refused(m.admissible(&here, 2_000_000_000, None, &[]), "expired");
    let arm = Target {
        arch: "aarch64".into(),
        channel: "stable".into(),
    };
    refused(m.admissible(&arm, now, None, &[]), "built for x86_64");
    let beta = Target {
        arch: "x86_64".into(),
        channel: "beta".into(),
    };
    refused(m.admissible(&beta, now, None, &[]), "channel");
    refused(
        m.admissible(&here, now, None, &[v("1.4.2")]),
        "failed to start",
    );
    refused(
        m.admissible(&here, now, None, &[v("1.5.0"), v("1.0.0")]),
        "failed to start",
    );
}

/// A mirror serving an old signed manifest: one that expired (in 1970, or
/// yesterday) is refused with its date, and one that claims more than the
/// 14 days releases are signed for (a 90-day signature, what releases
/// once had) is refused too, so an old release can be served for 14 days
/// at most.
#[test]
fn an_expired_or_far_reaching_manifest_is_refused_saying_when() {
    let mut value = manifest();
    value["expires"] = json!(0u64);
    let m = Manifest::parse(&bytes(&value)).expect("parsed");
    let here = Target::this_machine("stable");
    let now = 2_000_000_000;
    let err = m.fresh(now).expect_err("expired").to_string();
    assert!(err.contains("expired on 1970-01-01"), "{err}");
    assert!(err.contains("stale or holding updates back"), "{err}");
    assert!(m.admissible(&here, now, None, &[]).is_err());
    for (ahead, ok) in [
        (1, true),
        (14 * 86_400, true),
        (15 * 86_400, true),
        (15 * 86_400 + 1, false),
        (90 * 86_400, false),
    ] {
        value["expires"] = json!(now + ahead);
        let m = Manifest::parse(&bytes(&value)).expect("parsed");
        assert_eq!(m.fresh(now).is_ok(), ok, "{ahead} seconds ahead");
    }
    assert_eq!(aromba_release::manifest::date(2_000_000_000), "2033-05-18");
    assert_eq!(aromba_release::manifest::date(951_782_400), "2000-02-29");
}

const COMMIT: &str = "0123456789abcdef0123456789abcdef01234567";

#[test]
fn the_commit_is_read_from_the_signed_trusted_comment() {
    let signer = Signer::new();
    let keys = Keys::from_base64(&[&signer.public()]).expect("keys");
    let body = bytes(&manifest());
    let signature = signer.sign_with(
        &body,
        &format!("aromba 1.4.2 stable x86_64 commit {COMMIT}"),
    );
    let m = Manifest::verified(&body, &signature, &keys).expect("verified");
    assert_eq!(m.commit.as_deref(), Some(COMMIT));
    assert_eq!(m.short_commit(), Some("0123456789ab"));
    // As `scripts/release --resign` words it; a SHA-256 repository's too.
    let sha256 = "ab".repeat(32);
    for (comment, commit) in [
        (
            format!("aromba re-signed to expire 2000000000 commit {COMMIT}"),
            COMMIT,
        ),
        (
            format!("aromba 1.4.2 stable x86_64 commit {sha256}"),
            sha256.as_str(),
        ),
    ] {
        let m =
            Manifest::verified(&body, &signer.sign_with(&body, &comment), &keys).expect("verified");
        assert_eq!(m.commit.as_deref(), Some(commit), "{comment}");
    }
}

#[test]
fn a_release_signed_without_a_commit_is_read_and_names_none() {
    // Releases signed before the commit was recorded, and free text that
    // only looks like one.
    let signer = Signer::new();
    let keys = Keys::from_base64(&[&signer.public()]).expect("keys");
    let body = bytes(&manifest());
    for comment in [
        "aromba 1.4.2 stable x86_64",
        "aromba re-signed to expire 2000000000",
        "commit 0123456789ABCDEF0123456789ABCDEF01234567",
        "commit 0123456789abcdef",
        "commit",
    ] {
        let m =
            Manifest::verified(&body, &signer.sign_with(&body, comment), &keys).expect("verified");
        assert_eq!(m.commit, None, "{comment}");
    }
    // The manifest itself has no new field: a Warden that knows nothing
    // of commits reads this release as it read every other.
    assert_eq!(Manifest::parse(&body).expect("parsed").commit, None);
}

#[test]
fn a_commit_changed_after_signing_is_refused() {
    let signer = Signer::new();
    let keys = Keys::from_base64(&[&signer.public()]).expect("keys");
    let body = bytes(&manifest());
    let signature = signer.sign_with(
        &body,
        &format!("aromba 1.4.2 stable x86_64 commit {COMMIT}"),
    );
    let other = "fedcba9876543210fedcba9876543210fedcba98";
    let forged = signature.replace(COMMIT, other);
    assert_ne!(forged, signature);
    match Manifest::verified(&body, &forged, &keys) {
        Err(ReleaseError::BadSignature(_)) => {}
        other => panic!("a forged commit was taken: {other:?}"),
    }
}
