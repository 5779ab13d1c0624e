//! The manifest: what a release is, signed. Read strictly — every field
//! present, no other field, each of its exact shape — and only after its
//! signature verified with a trusted key.
//!
//! ```json
//! {"format": 1, "version": "0.2.0", "channel": "stable", "arch": "x86_64",
//!  "expires": 1800000000,
//!  "binaries": [
//!    {"binary": "aromba", "tarball": "aromba-0.2.0-x86_64.tar.gz", "sha256": "…", "size": 4242},
//!    {"binary": "aromba-warden", "tarball": "aromba-warden-0.2.0-x86_64.tar.gz", "sha256": "…", "size": 4242}]}
//! ```
//!
//! The commit a release was built from is not a field: the parser refuses
//! unknown fields, so a new one would make every Warden released before it
//! refuse every manifest after it — never to update again. It travels in
//! the signature's trusted comment instead (`trusted comment: aromba 0.2.0
//! stable x86_64 commit <hex>`), which minisign signs with the manifest
//! (the global signature covers it), which older Wardens verify and do not
//! read, and which [`Manifest::verified`] reads only once it verified.

use crate::version::Version;
use crate::{Keys, ReleaseError};
use serde_json::Value;

/// The manifest format this code reads.
pub const FORMAT: u64 = 1;
/// A manifest is small; a bigger one is refused before it is parsed.
pub const MAX_MANIFEST: usize = 16 * 1024;
/// A signature file is smaller still.
pub const MAX_SIGNATURE: usize = 4 * 1024;
/// The largest tarball a manifest may name (the two binaries together
/// aim at 15 MiB).
pub const MAX_TARBALL: u64 = 64 * 1024 * 1024;

/// How far ahead a manifest may expire: releases are re-signed often
/// (`scripts/release --resign`), each time for 14 days, so a mirror can
/// serve an old release for 14 days at most, not for as long as an old
/// signature lasted.
pub const MAX_VALIDITY_S: u64 = 14 * 86_400;

/// Room for a server's clock running behind the signer's.
pub const CLOCK_SLACK_S: u64 = 86_400;

/// `secs` (Unix seconds) as a UTC date, `YYYY-MM-DD`.
pub fn date(secs: u64) -> String {
    // Howard Hinnant's days-to-civil, for days since 1970-01-01.
    let z = (secs / 86_400) as i64 + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!("{year:04}-{month:02}-{day:02}")
}

/// The two binaries of a release.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Binary {
    /// `aromba`: the Worker and the root verbs.
    Worker,
    /// `aromba-warden`.
    Warden,
}

impl Binary {
    pub const ALL: [Binary; 2] = [Binary::Worker, Binary::Warden];

    /// The file name, in the tarball and in a release's folder.
    pub fn file_name(self) -> &'static str {
        match self {
            Binary::Worker => "aromba",
            Binary::Warden => "aromba-warden",
        }
    }
}

/// One tarball of a release.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Entry {
    pub binary: Binary,
    /// Its file name: letters, digits, `.`, `_`, `-`, ending `.tar.gz`.
    pub tarball: String,
    /// Lower-case hex.
    pub sha256: String,
    pub size: u64,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Manifest {
    pub version: Version,
    pub channel: String,
    pub arch: String,
    /// Unix seconds after which the manifest is refused.
    pub expires: u64,
    /// The Worker's entry first, then the Warden's.
    pub binaries: [Entry; 2],
    /// The git commit the release was built from (40 or 64 lower-case hex
    /// digits), from the signature's trusted comment; `None` for a release
    /// signed without one (before the commit was recorded), or a manifest
    /// only parsed.
    pub commit: Option<String>,
}

/// Where a release is to be installed: this machine's architecture and
/// the channel it follows.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Target {
    pub arch: String,
    pub channel: String,
}

impl Target {
    pub fn this_machine(channel: &str) -> Target {
        Target {
            arch: std::env::consts::ARCH.to_string(),
            channel: channel.to_string(),
        }
    }
}

fn bad(why: impl Into<String>) -> ReleaseError {
    ReleaseError::Manifest(why.into())
}

/// The object's fields, refused when one is missing or another is there.
fn fields<'a>(
    value: &'a Value,
    names: &[&str],
    what: &str,
) -> Result<Vec<&'a Value>, ReleaseError> {
    let Value::Object(map) = value else {
        return Err(bad(format!("{what} is not an object")));
    };
    if let Some(extra) = map.keys().find(|k| !names.contains(&k.as_str())) {
        return Err(bad(format!("{what} has an unknown field {extra:?}")));
    }
    names
        .iter()
        .map(|n| {
            map.get(*n)
                .ok_or_else(|| bad(format!("{what} lacks {n:?}")))
        })
        .collect()
}

fn text<'a>(value: &'a Value, name: &str) -> Result<&'a str, ReleaseError> {
    value
        .as_str()
        .ok_or_else(|| bad(format!("{name} is not a string")))
}

fn number(value: &Value, name: &str) -> Result<u64, ReleaseError> {
    value
        .as_u64()
        .ok_or_else(|| bad(format!("{name} is not a whole number")))
}

/// A short name of lower-case letters, digits and `_` (a channel, an
/// architecture).
fn plain_name(value: &str, name: &str) -> Result<String, ReleaseError> {
    if value.is_empty()
        || value.len() > 32
        || !value
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_')
    {
        return Err(bad(format!("{name} {value:?} is not a plain name")));
    }
    Ok(value.to_string())
}

/// A tarball's name: no separator, no leading dot, `.tar.gz` at the end.
fn tarball_name(value: &str) -> Result<String, ReleaseError> {
    let ok = value.len() <= 128
        && value.ends_with(".tar.gz")
        && !value.starts_with('.')
        && !value.contains("..")
        && value
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b"._-".contains(&b));
    if !ok {
        return Err(bad(format!(
            "the tarball name {value:?} is not a plain file name ending .tar.gz"
        )));
    }
    Ok(value.to_string())
}

fn entry(value: &Value) -> Result<Entry, ReleaseError> {
    let f = fields(
        value,
        &["binary", "tarball", "sha256", "size"],
        "a binary's entry",
    )?;
    let binary = match text(f[0], "binary")? {
        "aromba" => Binary::Worker,
        "aromba-warden" => Binary::Warden,
        other => {
            return Err(bad(format!(
                "{other:?} is not one of the release's binaries"
            )));
        }
    };
    let sha256 = text(f[2], "sha256")?;
    if sha256.len() != 64
        || !sha256
            .bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
    {
        return Err(bad("a sha256 is not 64 lower-case hex digits"));
    }
    let size = number(f[3], "size")?;
    if size == 0 || size > MAX_TARBALL {
        return Err(bad(format!(
            "a tarball's size {size} is not between 1 and {MAX_TARBALL} bytes"
        )));
    }
    Ok(Entry {
        binary,
        tarball: tarball_name(text(f[1], "tarball")?)?,
        sha256: sha256.to_string(),
        size,
    })
}

/// The commit a trusted comment names: the word after `commit`, when it
/// is 40 or 64 lower-case hex digits (git's SHA-1 and SHA-256 object
/// names). Any other comment names none: it is free text, so a comment
/// without a commit — older releases, a hand-signed one — is no error.
pub fn signed_commit(trusted_comment: &str) -> Option<String> {
    let words: Vec<&str> = trusted_comment.split_ascii_whitespace().collect();
    words.windows(2).find_map(|w| {
        let hex = w[1];
        let ok = w[0] == "commit"
            && (hex.len() == 40 || hex.len() == 64)
            && hex
                .bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b));
        ok.then(|| hex.to_string())
    })
}

impl Manifest {
    /// Parses a manifest whose signature was verified (see
    /// [`Manifest::verified`]).
    pub fn parse(bytes: &[u8]) -> Result<Manifest, ReleaseError> {
        if bytes.len() > MAX_MANIFEST {
            return Err(bad(format!("it is over {MAX_MANIFEST} bytes")));
        }
        let value: Value =
            serde_json::from_slice(bytes).map_err(|e| bad(format!("not JSON: {e}")))?;
        let f = fields(
            &value,
            &[
                "format", "version", "channel", "arch", "expires", "binaries",
            ],
            "the manifest",
        )?;
        let format = number(f[0], "format")?;
        if format != FORMAT {
            return Err(bad(format!(
                "format {format} is not the format {FORMAT} this build reads"
            )));
        }
        let Value::Array(list) = f[5] else {
            return Err(bad("binaries is not a list"));
        };
        let entries = list.iter().map(entry).collect::<Result<Vec<_>, _>>()?;
        let take = |b: Binary| -> Result<Entry, ReleaseError> {
            let mut of = entries.iter().filter(|e| e.binary == b);
            match (of.next(), of.next()) {
                (Some(e), None) => Ok(e.clone()),
                _ => Err(bad(format!(
                    "binaries must name {} exactly once",
                    b.file_name()
                ))),
            }
        };
        let binaries = [take(Binary::Worker)?, take(Binary::Warden)?];
        if entries.len() != 2 {
            return Err(bad("binaries must name the two binaries and nothing else"));
        }
        if binaries[0].tarball == binaries[1].tarball {
            return Err(bad("the two binaries name one tarball"));
        }
        Ok(Manifest {
            version: Version::parse(text(f[1], "version")?)?,
            channel: plain_name(text(f[2], "channel")?, "channel")?,
            arch: plain_name(text(f[3], "arch")?, "arch")?,
            expires: number(f[4], "expires")?,
            binaries,
            commit: None,
        })
    }

    /// The manifest, once its minisign signature (`signature`, the
    /// `.minisig` file's text) verifies with one of `keys`; nothing of it
    /// is read before.
    pub fn verified(bytes: &[u8], signature: &str, keys: &Keys) -> Result<Manifest, ReleaseError> {
        if bytes.len() > MAX_MANIFEST || signature.len() > MAX_SIGNATURE {
            return Err(ReleaseError::BadSignature(
                "the manifest or its signature is too large".into(),
            ));
        }
        let sig = minisign_verify::Signature::decode(signature)
            .map_err(|e| ReleaseError::BadSignature(format!("not a minisign signature: {e}")))?;
        // `verify` checks the global signature too, over the signature and
        // the trusted comment: the commit read from it below is signed.
        let signed = keys
            .all()
            .iter()
            .any(|k| k.verify(bytes, &sig, false).is_ok());
        if !signed {
            return Err(ReleaseError::BadSignature(
                "no trusted release key signed it".into(),
            ));
        }
        let mut manifest = Manifest::parse(bytes)?;
        manifest.commit = signed_commit(sig.trusted_comment());
        Ok(manifest)
    }

    /// The commit, shortened for people (12 digits), or `None`.
    pub fn short_commit(&self) -> Option<&str> {
        self.commit.as_deref().map(|c| c.get(..12).unwrap_or(c))
    }

    /// Whether this release may be installed on `target` at `now`, above
    /// `installed` (the highest version installed so far) and after every
    /// version that `failed` to start here.
    pub fn admissible(
        &self,
        target: &Target,
        now: u64,
        installed: Option<Version>,
        failed: &[Version],
    ) -> Result<(), ReleaseError> {
        let no = |why: String| Err(ReleaseError::NotAdmissible(why));
        if self.arch != target.arch {
            return no(format!(
                "it is built for {}, this machine is {}",
                self.arch, target.arch
            ));
        }
        if self.channel != target.channel {
            return no(format!(
                "it is on the {} channel, this server follows {}",
                self.channel, target.channel
            ));
        }
        self.fresh(now)?;
        if let Some(installed) = installed
            && self.version <= installed
        {
            return no(format!(
                "{} is not above {installed}, installed here",
                self.version
            ));
        }
        if let Some(worst) = failed.iter().max()
            && self.version <= *worst
        {
            return no(format!(
                "{worst} failed to start here; updates wait for a release after it"
            ));
        }
        Ok(())
    }

    /// Whether the manifest is current at `now`: not expired, and not
    /// claiming longer than [`MAX_VALIDITY_S`] ahead (with a day's slack
    /// for clocks). An expired one means the release folder serves an old
    /// signature: stale, or holding updates back.
    pub fn fresh(&self, now: u64) -> Result<(), ReleaseError> {
        if self.expires <= now {
            let days = (now - self.expires) / 86_400;
            return Err(ReleaseError::NotAdmissible(format!(
                "its manifest expired on {} ({days} days ago): the release folder is serving an old release list, so it is stale or holding updates back",
                date(self.expires)
            )));
        }
        if self.expires - now > MAX_VALIDITY_S + CLOCK_SLACK_S {
            return Err(ReleaseError::NotAdmissible(format!(
                "its manifest claims to be valid until {}, more than {} days ahead: releases are signed for {} days at most",
                date(self.expires),
                (MAX_VALIDITY_S + CLOCK_SLACK_S) / 86_400,
                MAX_VALIDITY_S / 86_400
            )));
        }
        Ok(())
    }

    pub fn entry(&self, binary: Binary) -> &Entry {
        match binary {
            Binary::Worker => &self.binaries[0],
            Binary::Warden => &self.binaries[1],
        }
    }
}
