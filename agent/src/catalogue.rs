//! The skill catalogue, as the Worker reads it: `skills/index.json` in the
//! release folder it updates from (`network.toml`'s `releases`), signed
//! with the release key like a release's manifest (docs/skills.md, "The
//! catalogue index"). The signature is verified before a byte of the index
//! is parsed; the index is then parsed strictly, every field bounded. A
//! bundle it names is read up to the size the index gives and no further,
//! checked against its SHA-256, and written whole into the Worker's
//! `skill-downloads/NAME.skill`, where the Warden reads it.
//!
//! Nothing here is trusted by the Warden: it verifies the bundle's own
//! signature itself, and installs only what the owner approved (or an
//! update that asks for nothing more).
//!
//! ```ignore
//! let index = catalogue::index(&gate, &url, None, &keys).await?;
//! if let Some(entry) = index.entry("certs") {
//!     catalogue::download(&gate, &url, None, entry, &home).await?;
//! }
//! ```

use crate::config::BaseUrl;
use crate::download::DownloadError;
use aromba_relay_proto::client::Dialer;
use aromba_release::manifest::MAX_SIGNATURE;
use aromba_release::{Keys, Version};
use aromba_warden_proto::hidden::invisible_or_separator;
use serde::Deserialize;
use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

/// The index, in the release folder.
pub const INDEX: &str = "skills/index.json";
/// Its signature.
pub const INDEX_SIGNATURE: &str = "skills/index.json.minisig";
/// The index's `format`.
pub const FORMAT: &str = "aromba-skill-index-1";
/// The most bytes an index is.
pub const MAX_INDEX: usize = 64 * 1024;
/// The most skills an index lists.
pub const MAX_SKILLS: usize = 64;
/// The most bytes a bundle is (the Warden's bound too).
pub const MAX_BUNDLE: u64 = 1 << 20;
/// The most bytes of a skill's description.
pub const MAX_DESCRIPTION: usize = 300;
/// The Worker's folder of downloaded bundles, in its home: the Warden
/// reads `NAME.skill` there.
pub const DOWNLOADS: &str = "skill-downloads";
/// One look at the catalogue (its index and signature), and one skill's
/// fetch (those and its bundle of at most 1 MiB), each ends whole within
/// this: the assistant waits on it. A mirror answering each file just
/// before a deadline of its own would otherwise hold it for one deadline a
/// file (found by the attack round).
pub const DEADLINE: Duration = Duration::from_secs(120);
/// The most characters of the parser's words quoted in a refusal.
const MAX_QUOTED: usize = 200;

/// Why the catalogue, or a bundle of it, is refused: one sentence each.
#[derive(Debug, thiserror::Error)]
pub enum CatalogueError {
    #[error("the catalogue could not be fetched: {0}")]
    Fetch(#[from] DownloadError),
    #[error("the catalogue was not fetched within {} seconds", DEADLINE.as_secs())]
    Timeout,
    #[error("the catalogue cannot be verified: {0}")]
    Keys(aromba_release::ReleaseError),
    #[error("the catalogue's signature is not a minisign signature's text")]
    SignatureNotText,
    #[error("the catalogue's index does not verify with the release keys: {0}")]
    Signature(aromba_release::ReleaseError),
    #[error("the catalogue's index is over {MAX_INDEX} bytes")]
    TooLarge,
    #[error("the catalogue's index is not what an index is: {0}")]
    Malformed(String),
    #[error("the catalogue's index is of the format {0:?}, not {FORMAT}")]
    Format(String),
    #[error(
        "the catalogue's index expired on {date} ({days} days ago): the release folder is serving an old catalogue, so it is stale or holding skill updates back"
    )]
    Expired { date: String, days: u64 },
    #[error(
        "the catalogue's index claims to be valid until {0}, further ahead than a release is signed for"
    )]
    TooFarAhead(String),
    #[error("the catalogue lists {0} skills, more than the {MAX_SKILLS} an index may")]
    TooMany(usize),
    #[error(
        "the catalogue names a skill {0:?}, which is not 2 to 32 of a-z, 0-9 and -, starting with a letter"
    )]
    Name(String),
    #[error(
        "the catalogue's skill {name} has the version {version:?}, which is not MAJOR.MINOR.PATCH"
    )]
    Version { name: String, version: String },
    #[error("the catalogue's skill {name} names the file {file:?}, not {expected}")]
    File {
        name: String,
        file: String,
        expected: String,
    },
    #[error("the catalogue's skill {0} has a sha256 that is not 64 lower-case hex digits")]
    Sha256(String),
    #[error("the catalogue's skill {name} is {size} bytes, and a bundle is 1 to {MAX_BUNDLE}")]
    Size { name: String, size: u64 },
    #[error("the catalogue's skill {0} has a description over {MAX_DESCRIPTION} bytes")]
    DescriptionTooLong(String),
    #[error(
        "the catalogue's skill {0} has a description holding a control, invisible or reordering character"
    )]
    DescriptionControl(String),
    #[error("the catalogue's skills are not sorted by name, one each: {name} comes after {before}")]
    Unsorted { name: String, before: String },
    #[error("the catalogue lists no skill named {0}")]
    NoSuchSkill(String),
    #[error("the skill {name}'s bundle is {got} bytes, not the {want} the catalogue says")]
    BundleSize { name: String, got: usize, want: u64 },
    #[error("the skill {0}'s bundle does not have the SHA-256 the catalogue says")]
    BundleHash(String),
    #[error("{0} is a link or not a folder, so no skill is downloaded into it")]
    NotAFolder(String),
    #[error("{0}: {1}")]
    Io(String, std::io::Error),
}

/// A skill the catalogue offers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    pub name: String,
    pub version: Version,
    /// `NAME-VERSION.skill`, beside the index.
    pub file: String,
    /// Of the whole `.skill` file, lower-case hex.
    pub sha256: String,
    /// Of the whole `.skill` file, in bytes.
    pub size: u64,
    /// Its manifest's description (the publisher's words: data).
    pub description: String,
}

/// The catalogue's index, verified and parsed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Index {
    /// When it stops being current (Unix seconds): the release's manifest's
    /// expiry, renewed with it.
    pub expires: u64,
    /// Sorted by name, one per name.
    pub skills: Vec<Entry>,
}

impl Index {
    /// The catalogue's skill `name`.
    pub fn entry(&self, name: &str) -> Option<&Entry> {
        self.skills.iter().find(|e| e.name == name)
    }
}

/// A skill of the catalogue as the assistant is told of it: with the
/// version installed here, if it is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Listed {
    pub name: String,
    pub version: String,
    pub description: String,
    pub installed: Option<String>,
}

/// The catalogue's skills, each with the version of it `installed` here
/// (name, version) if any.
pub fn listed(index: &Index, installed: &[(String, String)]) -> Vec<Listed> {
    index
        .skills
        .iter()
        .map(|e| Listed {
            name: e.name.clone(),
            version: e.version.to_string(),
            description: e.description.clone(),
            installed: installed
                .iter()
                .find(|(n, _)| *n == e.name)
                .map(|(_, v)| v.clone()),
        })
        .collect()
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawIndex {
    format: String,
    expires: u64,
    skills: Vec<RawEntry>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawEntry {
    name: String,
    version: String,
    file: String,
    sha256: String,
    size: u64,
    description: String,
}

/// A skill's name: `[a-z][a-z0-9-]{1,31}` (the manifest's rule).
pub fn valid_name(name: &str) -> bool {
    let b = name.as_bytes();
    (2..=32).contains(&b.len())
        && b[0].is_ascii_lowercase()
        && b.iter()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == b'-')
}

/// The parser's words about an index, on one line and bounded: they quote
/// the index (an unknown field's name, whole), which is not ours to print
/// as it is (found by the attack round: a line break went to the model's
/// refusal and the log).
fn quoted(words: &str) -> String {
    let cut: String = words.chars().take(MAX_QUOTED).collect();
    cut.chars()
        .flat_map(|c| {
            if c.is_control() || invisible_or_separator(c) {
                c.escape_unicode().collect::<Vec<_>>()
            } else {
                vec![c]
            }
        })
        .collect()
}

fn lower_hex_sha256(s: &str) -> bool {
    s.len() == 64 && s.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}

/// Parses an index's bytes (already verified): strictly, every field
/// bounded, the whole refused for one bad field.
pub fn parse(bytes: &[u8]) -> Result<Index, CatalogueError> {
    if bytes.len() > MAX_INDEX {
        return Err(CatalogueError::TooLarge);
    }
    let raw: RawIndex = serde_json::from_slice(bytes)
        .map_err(|e| CatalogueError::Malformed(quoted(&e.to_string())))?;
    if raw.format != FORMAT {
        return Err(CatalogueError::Format(
            raw.format.chars().take(64).collect(),
        ));
    }
    if raw.skills.len() > MAX_SKILLS {
        return Err(CatalogueError::TooMany(raw.skills.len()));
    }
    let mut skills: Vec<Entry> = Vec::with_capacity(raw.skills.len());
    for e in raw.skills {
        if !valid_name(&e.name) {
            return Err(CatalogueError::Name(e.name.chars().take(64).collect()));
        }
        let version = Version::parse(&e.version).map_err(|_| CatalogueError::Version {
            name: e.name.clone(),
            version: e.version.chars().take(64).collect(),
        })?;
        // Version::parse takes only the plain form, so this is the file's
        // name as the release writes it.
        let expected = format!("{}-{version}.skill", e.name);
        if e.file != expected {
            return Err(CatalogueError::File {
                name: e.name,
                file: e.file.chars().take(128).collect(),
                expected,
            });
        }
        if !lower_hex_sha256(&e.sha256) {
            return Err(CatalogueError::Sha256(e.name));
        }
        if e.size == 0 || e.size > MAX_BUNDLE {
            return Err(CatalogueError::Size {
                name: e.name,
                size: e.size,
            });
        }
        if e.description.len() > MAX_DESCRIPTION {
            return Err(CatalogueError::DescriptionTooLong(e.name));
        }
        if e.description
            .chars()
            .any(|c| c.is_control() || invisible_or_separator(c))
        {
            return Err(CatalogueError::DescriptionControl(e.name));
        }
        // Strictly ascending: one entry a name, so "the catalogue's
        // version of X" is never two things.
        if let Some(before) = skills.last()
            && before.name >= e.name
        {
            return Err(CatalogueError::Unsorted {
                name: e.name,
                before: before.name.clone(),
            });
        }
        skills.push(Entry {
            name: e.name,
            version,
            file: e.file,
            sha256: e.sha256,
            size: e.size,
            description: e.description,
        });
    }
    Ok(Index {
        expires: raw.expires,
        skills,
    })
}

/// Verifies `bytes` with `keys` (the release keys), then parses them.
pub fn verified(bytes: &[u8], signature: &str, keys: &Keys) -> Result<Index, CatalogueError> {
    keys.signed(bytes, signature)
        .map_err(CatalogueError::Signature)?;
    parse(bytes)
}

impl Index {
    /// Whether the index is current at `now`, as a release's manifest must
    /// be: not expired, and not valid further ahead than a release is
    /// signed for. An old signed index replayed by a mirror (to hold a
    /// skill's fix back, or offer an older version) is refused.
    pub fn fresh(&self, now: u64) -> Result<(), CatalogueError> {
        use aromba_release::manifest::{CLOCK_SLACK_S, MAX_VALIDITY_S, date};
        if self.expires <= now {
            return Err(CatalogueError::Expired {
                date: date(self.expires),
                days: (now - self.expires) / 86_400,
            });
        }
        if self.expires - now > MAX_VALIDITY_S + CLOCK_SLACK_S {
            return Err(CatalogueError::TooFarAhead(date(self.expires)));
        }
        Ok(())
    }
}

/// `exchange`, given up at [`DEADLINE`]: the whole of it, not each file.
async fn within<T>(
    exchange: impl std::future::Future<Output = Result<T, CatalogueError>>,
) -> Result<T, CatalogueError> {
    tokio::time::timeout(DEADLINE, exchange)
        .await
        .map_err(|_| CatalogueError::Timeout)?
}

/// `file` of the release folder `url`, read up to `cap` bytes, within
/// [`DEADLINE`] (the assistant waits on it).
async fn get(
    dialer: &dyn Dialer,
    url: &BaseUrl,
    roots: Option<Arc<rustls::RootCertStore>>,
    file: &str,
    cap: usize,
) -> Result<Vec<u8>, CatalogueError> {
    let fetched = crate::download::get(dialer, url, roots, file, cap);
    Ok(tokio::time::timeout(DEADLINE, fetched)
        .await
        .map_err(|_| CatalogueError::Timeout)??)
}

/// The catalogue of the release folder `url`, its index verified with
/// `keys` before it is read; the index and its signature fetched within
/// one [`DEADLINE`].
pub async fn index(
    dialer: &dyn Dialer,
    url: &BaseUrl,
    roots: Option<Arc<rustls::RootCertStore>>,
    keys: &Keys,
) -> Result<Index, CatalogueError> {
    within(async {
        let bytes = get(dialer, url, roots.clone(), INDEX, MAX_INDEX).await?;
        let signature = get(dialer, url, roots, INDEX_SIGNATURE, MAX_SIGNATURE).await?;
        let signature =
            String::from_utf8(signature).map_err(|_| CatalogueError::SignatureNotText)?;
        let index = verified(&bytes, &signature, keys)?;
        index.fresh(jiff::Timestamp::now().as_second().max(0) as u64)?;
        Ok(index)
    })
    .await
}

/// Where the bundle of skill `name` is downloaded, under the Worker's
/// `home`.
pub fn download_path(home: &Path, name: &str) -> PathBuf {
    home.join(DOWNLOADS).join(format!("{name}.skill"))
}

/// Downloads `entry`'s bundle from the release folder `url` and writes it
/// whole as `home/skill-downloads/NAME.skill`, once its size and SHA-256
/// are the index's (nothing is written otherwise). Its path.
pub async fn download(
    dialer: &dyn Dialer,
    url: &BaseUrl,
    roots: Option<Arc<rustls::RootCertStore>>,
    entry: &Entry,
    home: &Path,
) -> Result<PathBuf, CatalogueError> {
    // An entry made by hand (not by `parse`) is held to the same bounds:
    // its name becomes a file name here.
    if !valid_name(&entry.name) {
        return Err(CatalogueError::Name(entry.name.chars().take(64).collect()));
    }
    if entry.size == 0 || entry.size > MAX_BUNDLE {
        return Err(CatalogueError::Size {
            name: entry.name.clone(),
            size: entry.size,
        });
    }
    let want = entry.size;
    // At most 1 MiB, so it fits.
    let cap = usize::try_from(want).unwrap_or(usize::MAX);
    let bytes = get(dialer, url, roots, &format!("skills/{}", entry.file), cap).await?;
    if bytes.len() as u64 != want {
        return Err(CatalogueError::BundleSize {
            name: entry.name.clone(),
            got: bytes.len(),
            want,
        });
    }
    if aromba_release::sha256_hex(&bytes) != entry.sha256 {
        return Err(CatalogueError::BundleHash(entry.name.clone()));
    }
    let dir = home.join(DOWNLOADS);
    folder(&dir)?;
    write(&dir, &format!("{}.skill", entry.name), &bytes)
}

/// The catalogue's skill `name`, from the release folder `url`: the index
/// verified with `keys` and read, then the bundle downloaded as
/// [`download`] does (nothing is fetched past a refused index, nothing
/// written for a refused bundle), all of it within one [`DEADLINE`]. Its
/// entry.
pub async fn fetch_skill(
    dialer: &dyn Dialer,
    url: &BaseUrl,
    roots: Option<Arc<rustls::RootCertStore>>,
    keys: &Keys,
    name: &str,
    home: &Path,
) -> Result<Entry, CatalogueError> {
    within(async {
        let index = index(dialer, url, roots.clone(), keys).await?;
        let entry = index
            .entry(name)
            .ok_or_else(|| CatalogueError::NoSuchSkill(name.chars().take(64).collect()))?;
        download(dialer, url, roots, entry, home).await?;
        Ok(entry.clone())
    })
    .await
}

/// `dir`, made `0700` when missing; refused when it is a link or not a
/// folder (the Warden reads it without following one either).
fn folder(dir: &Path) -> Result<(), CatalogueError> {
    use std::os::unix::fs::DirBuilderExt;
    match std::fs::DirBuilder::new().mode(0o700).create(dir) {
        Ok(()) => return Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
        Err(e) => return Err(CatalogueError::Io(dir.display().to_string(), e)),
    }
    let meta = std::fs::symlink_metadata(dir)
        .map_err(|e| CatalogueError::Io(dir.display().to_string(), e))?;
    if meta.is_dir() {
        Ok(())
    } else {
        Err(CatalogueError::NotAFolder(dir.display().to_string()))
    }
}

/// Writes `name` in `dir` whole, mode `0600`: a hidden temporary file
/// first (made new, so never through a link), renamed over the old one.
fn write(dir: &Path, name: &str, bytes: &[u8]) -> Result<PathBuf, CatalogueError> {
    let path = dir.join(name);
    let tmp = dir.join(format!(".{name}.part"));
    let io = |e| CatalogueError::Io(path.display().to_string(), e);
    let _ = std::fs::remove_file(&tmp);
    let written = (|| {
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&tmp)?;
        f.write_all(bytes)?;
        f.sync_all()?;
        std::fs::rename(&tmp, &path)
    })();
    if let Err(e) = written {
        // No half-written file left for the Warden to read.
        let _ = std::fs::remove_file(&tmp);
        return Err(io(e));
    }
    Ok(path)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{Value, json};

    const SHA: &str = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

    fn entry(name: &str, version: &str) -> Value {
        json!({
            "name": name,
            "version": version,
            "file": format!("{name}-{version}.skill"),
            "sha256": SHA,
            "size": 2048,
            "description": "Watch this server's TLS certificates",
        })
    }

    fn index_of(skills: Vec<Value>) -> Value {
        json!({"format": FORMAT, "expires": 2_000_000_000u64, "skills": skills})
    }

    fn parsed(v: &Value) -> Result<Index, CatalogueError> {
        parse(&serde_json::to_vec(v).unwrap())
    }

    /// `field` of the one entry set to `value`.
    fn with(field: &str, value: Value) -> Result<Index, CatalogueError> {
        let mut e = entry("certs", "1.0.0");
        e[field] = value;
        parsed(&index_of(vec![e]))
    }

    #[test]
    fn a_well_formed_index_is_read_whole() {
        let index = parsed(&index_of(vec![
            entry("certs", "1.0.0"),
            entry("nginx", "1.2.0"),
        ]))
        .unwrap();
        assert_eq!(index.skills.len(), 2);
        let nginx = index.entry("nginx").unwrap();
        assert_eq!(nginx.version, Version::parse("1.2.0").unwrap());
        assert_eq!(nginx.file, "nginx-1.2.0.skill");
        assert_eq!(nginx.size, 2048);
        assert!(index.entry("restic-backup").is_none());
    }

    #[test]
    fn an_unknown_field_is_refused_at_the_top_and_in_an_entry() {
        let mut top = index_of(vec![entry("certs", "1.0.0")]);
        top["signed_by"] = json!("someone");
        assert!(matches!(parsed(&top), Err(CatalogueError::Malformed(_))));
        let mut e = entry("certs", "1.0.0");
        e["url"] = json!("https://elsewhere.example/certs.skill");
        assert!(matches!(
            parsed(&index_of(vec![e])),
            Err(CatalogueError::Malformed(_))
        ));
    }

    #[test]
    fn a_missing_field_is_refused() {
        let mut e = entry("certs", "1.0.0");
        e.as_object_mut().unwrap().remove("sha256");
        assert!(matches!(
            parsed(&index_of(vec![e])),
            Err(CatalogueError::Malformed(_))
        ));
    }

    #[test]
    fn another_format_is_refused() {
        let mut v = index_of(vec![]);
        v["format"] = json!("aromba-skill-index-2");
        assert!(matches!(parsed(&v), Err(CatalogueError::Format(_))));
    }

    #[test]
    fn an_index_over_64_kib_is_refused_before_it_is_parsed() {
        let mut bytes = serde_json::to_vec(&index_of(vec![])).unwrap();
        bytes.resize(MAX_INDEX + 1, b' ');
        assert!(matches!(parse(&bytes), Err(CatalogueError::TooLarge)));
    }

    #[test]
    fn more_than_64_skills_are_refused() {
        let names: Vec<String> = (0..=MAX_SKILLS).map(|i| format!("skill-{i:03}")).collect();
        let many = names.iter().map(|n| entry(n, "1.0.0")).collect();
        assert!(matches!(
            parsed(&index_of(many)),
            Err(CatalogueError::TooMany(65))
        ));
        let just = names[..MAX_SKILLS]
            .iter()
            .map(|n| entry(n, "1.0.0"))
            .collect();
        assert_eq!(parsed(&index_of(just)).unwrap().skills.len(), MAX_SKILLS);
    }

    #[test]
    fn a_name_outside_the_manifests_rule_is_refused() {
        for bad in [
            "c",
            "Certs",
            "1certs",
            "-certs",
            "certs_x",
            "../certs",
            "certs.skill",
            "ce rts",
            "a-name-that-is-much-longer-than-32",
        ] {
            let mut e = entry("certs", "1.0.0");
            e["name"] = json!(bad);
            e["file"] = json!(format!("{bad}-1.0.0.skill"));
            assert!(
                matches!(parsed(&index_of(vec![e])), Err(CatalogueError::Name(_))),
                "{bad}"
            );
        }
    }

    #[test]
    fn a_version_that_is_not_three_plain_numbers_is_refused() {
        for bad in ["1.0", "1.0.0-rc1", "01.0.0", "v1.0.0", ""] {
            let mut e = entry("certs", "1.0.0");
            e["version"] = json!(bad);
            e["file"] = json!(format!("certs-{bad}.skill"));
            assert!(
                matches!(
                    parsed(&index_of(vec![e])),
                    Err(CatalogueError::Version { .. })
                ),
                "{bad}"
            );
        }
    }

    #[test]
    fn a_file_other_than_name_dash_version_dot_skill_is_refused() {
        for bad in [
            "certs-1.0.1.skill",
            "nginx-1.0.0.skill",
            "../certs-1.0.0.skill",
            "certs-1.0.0.skill/",
            "/etc/shadow",
            "certs-1.0.0.tar.gz",
            "sub/certs-1.0.0.skill",
        ] {
            assert!(
                matches!(with("file", json!(bad)), Err(CatalogueError::File { .. })),
                "{bad}"
            );
        }
    }

    #[test]
    fn a_sha256_that_is_not_64_lower_case_hex_is_refused() {
        for bad in [
            SHA.to_uppercase(),
            SHA[..63].to_string(),
            format!("{SHA}0"),
            format!("{}g", &SHA[..63]),
            String::new(),
        ] {
            assert!(
                matches!(with("sha256", json!(bad)), Err(CatalogueError::Sha256(_))),
                "{bad}"
            );
        }
    }

    #[test]
    fn a_size_of_nothing_or_over_a_mebibyte_is_refused() {
        assert!(matches!(
            with("size", json!(0)),
            Err(CatalogueError::Size { .. })
        ));
        assert!(matches!(
            with("size", json!(MAX_BUNDLE + 1)),
            Err(CatalogueError::Size { .. })
        ));
        assert!(with("size", json!(MAX_BUNDLE)).is_ok());
        // Not a number a size can be.
        assert!(matches!(
            with("size", json!(-1)),
            Err(CatalogueError::Malformed(_))
        ));
        assert!(matches!(
            with("size", json!("2048")),
            Err(CatalogueError::Malformed(_))
        ));
    }

    #[test]
    fn a_description_over_300_bytes_or_with_a_control_character_is_refused() {
        assert!(with("description", json!("é".repeat(150))).is_ok());
        assert!(matches!(
            with("description", json!("é".repeat(151))),
            Err(CatalogueError::DescriptionTooLong(_))
        ));
        for bad in [
            "Watch certificates\nDone. Installed.",
            "Watch\u{1b}[2J",
            "tab\there",
            "\u{85}next line",
        ] {
            assert!(
                matches!(
                    with("description", json!(bad)),
                    Err(CatalogueError::DescriptionControl(_))
                ),
                "{bad:?}"
            );
        }
    }

    #[test]
    fn skills_out_of_order_or_named_twice_are_refused() {
        assert!(matches!(
            parsed(&index_of(vec![
                entry("nginx", "1.0.0"),
                entry("certs", "1.0.0")
            ])),
            Err(CatalogueError::Unsorted { .. })
        ));
        assert!(matches!(
            parsed(&index_of(vec![
                entry("certs", "1.0.0"),
                entry("certs", "2.0.0")
            ])),
            Err(CatalogueError::Unsorted { .. })
        ));
    }

    #[test]
    fn a_field_named_twice_is_refused() {
        let text = format!(r#"{{"format": "{FORMAT}", "format": "{FORMAT}", "skills": []}}"#);
        assert!(matches!(
            parse(text.as_bytes()),
            Err(CatalogueError::Malformed(_))
        ));
    }

    #[test]
    fn an_index_not_signed_by_a_release_key_is_refused_before_it_is_read() {
        use aromba_testkit::release::{OTHER_KEY, RELEASE_KEY, RELEASE_PUB, key_line, sign};
        let keys = Keys::from_base64(&[&key_line(RELEASE_PUB)]).unwrap();
        let good = serde_json::to_vec(&index_of(vec![entry("certs", "1.0.0")])).unwrap();
        assert!(verified(&good, &sign(&good, RELEASE_KEY), &keys).is_ok());
        // Signed with another key.
        assert!(matches!(
            verified(&good, &sign(&good, OTHER_KEY), &keys),
            Err(CatalogueError::Signature(_))
        ));
        // Changed after it was signed.
        let mut changed = good.clone();
        let at = changed.len() - 3;
        changed[at] = b' ';
        assert!(matches!(
            verified(&changed, &sign(&good, RELEASE_KEY), &keys),
            Err(CatalogueError::Signature(_))
        ));
        // Not even a signature, over bytes that are no index either: the
        // signature is what is refused, the bytes are never parsed.
        assert!(matches!(
            verified(b"not json", "not a signature", &keys),
            Err(CatalogueError::Signature(_))
        ));
    }

    #[test]
    fn the_listing_says_which_version_is_installed_here() {
        let index = parsed(&index_of(vec![
            entry("certs", "1.1.0"),
            entry("nginx", "1.0.0"),
        ]))
        .unwrap();
        let listed = listed(&index, &[("certs".into(), "1.0.0".into())]);
        assert_eq!(listed[0].installed.as_deref(), Some("1.0.0"));
        assert_eq!(listed[0].version, "1.1.0");
        assert_eq!(listed[1].installed, None);
    }

    #[test]
    fn every_refusal_is_one_sentence_on_one_line() {
        let errors = [
            with("size", json!(0)).unwrap_err(),
            with("sha256", json!("x")).unwrap_err(),
            with("description", json!("a\nb")).unwrap_err(),
            parse(b"{").unwrap_err(),
        ];
        for e in errors {
            let text = e.to_string();
            assert!(!text.contains('\n'), "{text:?}");
            assert!(!text.ends_with('.'), "{text:?}");
        }
    }

    #[test]
    fn an_index_expired_or_valid_too_far_ahead_is_not_current() {
        let now = 1_900_000_000u64;
        let index = |expires| Index {
            expires,
            skills: Vec::new(),
        };
        assert!(index(now + 86_400).fresh(now).is_ok());
        assert!(matches!(
            index(now - 3 * 86_400).fresh(now),
            Err(CatalogueError::Expired { days: 3, .. })
        ));
        assert!(matches!(
            index(now).fresh(now),
            Err(CatalogueError::Expired { .. })
        ));
        assert!(matches!(
            index(now + 60 * 86_400).fresh(now),
            Err(CatalogueError::TooFarAhead(_))
        ));
    }

    #[test]
    fn an_index_without_its_expiry_is_refused() {
        let mut v = index_of(vec![entry("certs", "1.0.0")]);
        v.as_object_mut().unwrap().remove("expires");
        assert!(matches!(parsed(&v), Err(CatalogueError::Malformed(_))));
    }
}
