//! Downloading a release into a folder, for the Warden to install: the
//! manifest and its signature first, verified with the release keys
//! compiled into this binary before anything else is fetched; then the two
//! tarballs the manifest names, each read up to the size the manifest
//! gives and no further, and checked against its SHA-256. The folder ends
//! holding exactly `manifest.json`, `manifest.json.minisig` and the two
//! tarballs, or what it held is gone and the error says why.
//!
//! The Worker's check uses its network gate (the release host must be
//! listed in `network.toml`); `aromba update` from a root terminal dials
//! directly. Either way the Warden verifies everything again: nothing here
//! is trusted by it.

use crate::config::BaseUrl;
use crate::http::{Ask, HttpError, request};
use aromba_relay_proto::client::Dialer;
use aromba_release::manifest::{MAX_MANIFEST, MAX_SIGNATURE};
use aromba_release::{Keys, Manifest, ReleaseError};
use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

/// The whole download, manifest to last tarball, ends within this.
pub const DEADLINE: Duration = Duration::from_secs(15 * 60);

#[derive(Debug, thiserror::Error)]
pub enum DownloadError {
    #[error("{0}")]
    Http(#[from] HttpError),
    #[error("{url} answered {status}")]
    Status { url: String, status: u16 },
    #[error("{0}")]
    Release(#[from] ReleaseError),
    #[error("{0}")]
    Mismatch(String),
    #[error("{0}: {1}")]
    Io(String, std::io::Error),
    #[error("the download did not finish within {} minutes", DEADLINE.as_secs() / 60)]
    Timeout,
}

/// A release on offer: its manifest verified, with the bytes it was
/// verified from.
pub struct Offer {
    pub manifest: Manifest,
    bytes: Vec<u8>,
    signature: String,
}

/// `file` of the release folder `url`, read up to `cap` bytes.
pub(crate) async fn get(
    dialer: &dyn Dialer,
    url: &BaseUrl,
    roots: Option<Arc<rustls::RootCertStore>>,
    file: &str,
    cap: usize,
) -> Result<Vec<u8>, DownloadError> {
    let path = url.file(file);
    let answer = request(
        dialer,
        &url.origin,
        roots,
        Ask {
            method: hyper::Method::GET,
            path: &path,
            body: None,
            cap,
            headers: Vec::new(),
        },
    )
    .await?;
    if answer.status != 200 {
        return Err(DownloadError::Status {
            url: format!("{}{path}", url.origin.base()),
            status: answer.status,
        });
    }
    Ok(answer.body.to_vec())
}

/// One file at `url` (a folder and the file's name in it), read up to
/// `cap` bytes and no further.
pub async fn one_file(
    dialer: &dyn Dialer,
    url: &BaseUrl,
    file: &str,
    cap: usize,
) -> Result<Vec<u8>, DownloadError> {
    get(dialer, url, None, file, cap).await
}

/// The release `url` offers, its manifest verified with `keys`.
pub async fn offer(
    dialer: &dyn Dialer,
    url: &BaseUrl,
    roots: Option<Arc<rustls::RootCertStore>>,
    keys: &Keys,
) -> Result<Offer, DownloadError> {
    let bytes = get(dialer, url, roots.clone(), "manifest.json", MAX_MANIFEST).await?;
    let signature = get(dialer, url, roots, "manifest.json.minisig", MAX_SIGNATURE).await?;
    let signature = String::from_utf8(signature)
        .map_err(|_| ReleaseError::BadSignature("the signature is not text".into()))?;
    let manifest = Manifest::verified(&bytes, &signature, keys)?;
    Ok(Offer {
        manifest,
        bytes,
        signature,
    })
}

/// Downloads `offer`'s tarballs and writes the release into `dir` (which
/// must exist), replacing whatever files it held.
pub async fn fetch_into(
    dialer: &dyn Dialer,
    url: &BaseUrl,
    roots: Option<Arc<rustls::RootCertStore>>,
    offer: &Offer,
    dir: &Path,
) -> Result<(), DownloadError> {
    let mut tarballs = Vec::new();
    for entry in &offer.manifest.binaries {
        let size = usize::try_from(entry.size)
            .map_err(|_| DownloadError::Mismatch(format!("{} is too large", entry.tarball)))?;
        let bytes = get(dialer, url, roots.clone(), &entry.tarball, size).await?;
        if bytes.len() != size {
            return Err(DownloadError::Mismatch(format!(
                "{} is {} bytes, not the {size} the manifest says",
                entry.tarball,
                bytes.len()
            )));
        }
        if aromba_release::sha256_hex(&bytes) != entry.sha256 {
            return Err(DownloadError::Mismatch(format!(
                "{}'s SHA-256 is not the manifest's",
                entry.tarball
            )));
        }
        tarballs.push((entry.tarball.clone(), bytes));
    }
    clear(dir)?;
    for (name, bytes) in &tarballs {
        write(dir, name, bytes)?;
    }
    write(dir, "manifest.json.minisig", offer.signature.as_bytes())?;
    write(dir, "manifest.json", &offer.bytes)
}

/// Removes the files of `dir` (a real folder, not a link to one).
pub fn clear(dir: &Path) -> Result<(), DownloadError> {
    let io = |e| DownloadError::Io(dir.display().to_string(), e);
    let meta = std::fs::symlink_metadata(dir).map_err(io)?;
    if !meta.is_dir() {
        return Err(DownloadError::Mismatch(format!(
            "{} is not a folder",
            dir.display()
        )));
    }
    for entry in std::fs::read_dir(dir).map_err(io)? {
        let entry = entry.map_err(io)?;
        let path = entry.path();
        let removed = if entry.file_type().map_err(io)?.is_dir() {
            std::fs::remove_dir_all(&path)
        } else {
            std::fs::remove_file(&path)
        };
        removed.map_err(|e| DownloadError::Io(path.display().to_string(), e))?;
    }
    Ok(())
}

/// Writes `name` in `dir` whole: a hidden temporary file first, renamed.
fn write(dir: &Path, name: &str, bytes: &[u8]) -> Result<(), DownloadError> {
    let path = dir.join(name);
    let tmp = dir.join(format!(".{name}.part"));
    let io = |e| DownloadError::Io(path.display().to_string(), e);
    let _ = std::fs::remove_file(&tmp);
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(&tmp)
        .map_err(io)?;
    f.write_all(bytes).map_err(io)?;
    f.sync_all().map_err(io)?;
    std::fs::rename(&tmp, &path).map_err(io)
}
