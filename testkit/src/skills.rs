//! Skill bundles for the tests, made as a publisher makes them: a manifest
//! naming each file's SHA-256, signed with the publisher's minisign key
//! (a fresh key per publisher, or the test release key for `aromba`).

use crate::warden::Warden;
use serde_json::{Value, json};
use sha2::{Digest, Sha256};
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

/// A publisher: its name and minisign key pair.
pub struct Publisher {
    pub name: String,
    secret: String,
    /// The public key file's text (`NAME.pub`).
    pub public: String,
}

/// SHA-256 of `bytes`, lower-case hex.
pub fn sha256_hex(bytes: &[u8]) -> String {
    Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

impl Publisher {
    /// A publisher with a key of its own.
    pub fn new(name: &str) -> Publisher {
        let kp = minisign::KeyPair::generate_unencrypted_keypair().expect("a key pair");
        Publisher {
            name: name.into(),
            secret: kp.sk.to_box(None).expect("boxed").to_string(),
            public: kp.pk.to_box().expect("boxed").to_string(),
        }
    }

    /// `aromba`, whose key is the (test) release key.
    pub fn release() -> Publisher {
        Publisher {
            name: "aromba".into(),
            secret: crate::release::RELEASE_KEY.into(),
            public: crate::release::RELEASE_PUB.into(),
        }
    }

    /// Root trusts this publisher on `w`: its key in `publishers/`.
    pub fn trust(&self, w: &Warden) {
        self.trust_at(&w.layout().config_dir);
    }

    /// Root trusts this publisher on the Warden configured in `config_dir`.
    pub fn trust_at(&self, config_dir: &Path) {
        let dir = config_dir.join("publishers");
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).unwrap();
        let file = dir.join(format!("{}.pub", self.name));
        std::fs::write(&file, &self.public).unwrap();
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o644)).unwrap();
    }

    /// `text` signed with this publisher's key.
    pub fn sign(&self, text: &str) -> String {
        crate::release::sign(text.as_bytes(), &self.secret)
    }

    /// A bundle of `manifest` (each file's `sha256` filled in from
    /// `files`) and `files`, signed by this publisher.
    pub fn bundle(&self, mut manifest: Value, files: &[(&str, &str)]) -> Vec<u8> {
        for list in ["chores", "tools"] {
            if let Some(Value::Array(items)) = manifest.get_mut(list) {
                for item in items {
                    let file = item["file"].as_str().unwrap_or_default().to_string();
                    if let Some((_, text)) = files.iter().find(|(p, _)| *p == file) {
                        item["sha256"] = Value::from(sha256_hex(text.as_bytes()));
                    }
                }
            }
        }
        let text = serde_json::to_string_pretty(&manifest).unwrap();
        let signature = self.sign(&text);
        bundle_of(&text, &signature, files)
    }
}

/// A bundle of these parts as they are (for tampering).
pub fn bundle_of(manifest: &str, signature: &str, files: &[(&str, &str)]) -> Vec<u8> {
    let files: serde_json::Map<String, Value> = files
        .iter()
        .map(|(p, t)| ((*p).to_string(), Value::from(*t)))
        .collect();
    serde_json::to_vec(&json!({
        "format": "aromba-skill-bundle-1",
        "manifest": manifest,
        "signature": signature,
        "files": files,
    }))
    .unwrap()
}

/// A manifest of skill `name`, writing `writes`, with one chore file per
/// name in `chores` and no host, root command or tool.
pub fn manifest(
    name: &str,
    version: &str,
    publisher: &str,
    writes: &Path,
    chores: &[&str],
) -> Value {
    json!({
        "format": "aromba-skill-1",
        "name": name,
        "version": version,
        "publisher": publisher,
        "description": "A skill of the tests",
        "writes": [writes],
        "reads": [],
        "root_commands": [],
        "hosts": [],
        "settings": [],
        "chores": chores.iter().map(|c| json!({"file": format!("chores/{c}.sh"), "sha256": ""})).collect::<Vec<_>>(),
        "tools": [],
    })
}

/// A chore script: `extra` header lines go before `schedule` (with
/// `network: no` unless they say otherwise).
pub fn chore(name: &str, color: &str, touches: &Path, extra: &str, body: &str) -> String {
    let network = if extra.contains("# network:") {
        ""
    } else {
        "# network: no\n"
    };
    format!(
        "#!/bin/sh\n# aromba-chore: 1\n# name: {name}\n# description: A skill chore of the tests\n# color: {color}\n# touches: {}\n{extra}{network}# schedule: manual\n# end\n{body}\n",
        touches.display()
    )
}

/// Writes `bytes` to a fresh file of root's under the Warden's root, and
/// its path.
pub fn bundle_file(w: &Warden, name: &str, bytes: &[u8]) -> String {
    let path = w.root.join(format!("{name}.skill"));
    std::fs::write(&path, bytes).unwrap();
    path.to_string_lossy().into_owned()
}

/// The folder of the skills the release ships (`skills/` at the
/// repository's root).
pub fn catalogue_dir() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("..")
        .join("skills")
}

/// The bundle of the catalogue's skill `name`, as a release makes it: its
/// `skill.json` as committed, byte for byte, signed with the (test)
/// release key, and every file it names.
pub fn catalogue_bundle(name: &str) -> Vec<u8> {
    let dir = catalogue_dir().join(name);
    let manifest = std::fs::read_to_string(dir.join("skill.json")).expect("skill.json");
    let m: Value = serde_json::from_str(&manifest).expect("skill.json is JSON");
    let mut files: Vec<(String, String)> = Vec::new();
    for list in ["chores", "tools"] {
        for item in m[list].as_array().expect("a list") {
            let file = item["file"].as_str().expect("a file").to_string();
            let text = std::fs::read_to_string(dir.join(&file)).expect("the file");
            files.push((file, text));
        }
    }
    let signature = Publisher::release().sign(&manifest);
    let refs: Vec<(&str, &str)> = files
        .iter()
        .map(|(p, t)| (p.as_str(), t.as_str()))
        .collect();
    bundle_of(&manifest, &signature, &refs)
}

/// A TLS server at `addr` standing for a site: it shows a self-signed
/// certificate for `name` that expires `days` from now, completes the
/// handshake and closes. Runs until the test ends.
pub fn tls_site(addr: std::net::SocketAddr, name: &str, days: u64) {
    let key = rcgen::KeyPair::generate().expect("a key");
    let mut params = rcgen::CertificateParams::new(vec![name.to_string()]).expect("params");
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("after 1970")
        .as_secs();
    let (y, m, d) = civil_from_days(now / 86_400 + days);
    params.not_after = rcgen::date_time_ymd(y, m, d);
    let cert = params.self_signed(&key).expect("a certificate");
    let provider = std::sync::Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .expect("versions")
        .with_no_client_auth()
        .with_single_cert(
            vec![cert.der().clone()],
            rustls::pki_types::PrivateKeyDer::Pkcs8(key.serialize_der().into()),
        )
        .expect("a server config");
    let config = std::sync::Arc::new(config);
    let listener = std::net::TcpListener::bind(addr).expect("the site's port");
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut tcp) = stream else { continue };
            let config = config.clone();
            std::thread::spawn(move || {
                let _ = tcp.set_read_timeout(Some(std::time::Duration::from_secs(10)));
                let Ok(mut conn) = rustls::ServerConnection::new(config) else {
                    return;
                };
                while conn.is_handshaking() {
                    if conn.complete_io(&mut tcp).is_err() {
                        return;
                    }
                }
                conn.send_close_notify();
                let _ = conn.complete_io(&mut tcp);
            });
        }
    });
}

/// The date `days` after 1970-01-01 (Howard Hinnant's `civil_from_days`).
fn civil_from_days(days: u64) -> (i32, u8, u8) {
    let z = days as i64 + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u8;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u8;
    let y = (yoe + era * 400 + i64::from(m <= 2)) as i32;
    (y, m, d)
}

/// The catalogue index's entry for a bundle's `bytes`, as `scripts/release`
/// writes it: name, version, file `NAME-VERSION.skill`, SHA-256, size and
/// the manifest's description.
pub fn catalogue_entry(bytes: &[u8]) -> Value {
    let bundle: Value = serde_json::from_slice(bytes).expect("a bundle");
    let manifest: Value =
        serde_json::from_str(bundle["manifest"].as_str().expect("a manifest")).expect("JSON");
    let (name, version) = (
        manifest["name"].as_str().expect("a name"),
        manifest["version"].as_str().expect("a version"),
    );
    json!({
        "name": name,
        "version": version,
        "file": format!("{name}-{version}.skill"),
        "sha256": sha256_hex(bytes),
        "size": bytes.len(),
        "description": manifest["description"],
    })
}

/// A catalogue index of `entries`, unsigned, valid for a week.
pub fn catalogue_index(entries: Vec<Value>) -> Vec<u8> {
    serde_json::to_vec(&json!({
        "format": "aromba-skill-index-1",
        "expires": crate::release::now() + 7 * 86_400,
        "skills": entries,
    }))
    .expect("the index")
}

/// Writes `index` and its `signature` as the catalogue of the release
/// folder `folder` (`skills/index.json` and `.minisig`).
pub fn publish_catalogue_index(folder: &Path, index: &[u8], signature: &str) {
    let skills = folder.join("skills");
    std::fs::create_dir_all(&skills).expect("skills/");
    std::fs::write(skills.join("index.json"), index).expect("index.json");
    std::fs::write(skills.join("index.json.minisig"), signature).expect("its signature");
}

/// Publishes `bundles` as the skill catalogue of the release folder
/// `folder` (its `skills/`), as `scripts/release` writes it: each bundle
/// as `NAME-VERSION.skill` and `index.json` listing them, signed with the
/// release key `key`.
pub fn publish_catalogue(folder: &Path, bundles: &[Vec<u8>], key: &str) {
    let skills = folder.join("skills");
    std::fs::create_dir_all(&skills).expect("skills/");
    let mut entries = Vec::new();
    for bytes in bundles {
        let entry = catalogue_entry(bytes);
        let file = entry["file"].as_str().expect("a file");
        std::fs::write(skills.join(file), bytes).expect("the bundle");
        entries.push(entry);
    }
    entries.sort_by(|a, b| a["name"].as_str().cmp(&b["name"].as_str()));
    let index = catalogue_index(entries);
    publish_catalogue_index(folder, &index, &crate::release::sign(&index, key));
}
