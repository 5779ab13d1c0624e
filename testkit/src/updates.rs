//! A paired server that updates from a release host on loopback: releases
//! signed with the test key (`release.rs`), a Warden that checks them with
//! it and installs under the test's root, and the server installed as this
//! build's version — for the update tests and the attacks on installs.

use crate::paired::Setup;
use crate::release::{RELEASE_PUB, Release, key_line};
use crate::worker::TestWarden;
use aromba_warden::server::ServeOptions;
use aromba_warden::update::Releases;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

/// The Warden checks releases with the test key and installs them under
/// the test's root.
pub fn with_test_releases(o: &mut ServeOptions) {
    let root = o.layout.state_dir.parent().expect("a root").to_path_buf();
    o.releases = Releases::rooted(&root);
    o.release_keys = Some(vec![key_line(RELEASE_PUB)]);
}

/// A release `version` in `dir/stable/`, signed with the test key; each
/// binary a few bytes naming itself and the version.
pub fn publish(dir: &Path, version: &str) {
    let worker = format!("aromba {version}");
    let warden = format!("aromba-warden {version}");
    Release::of(version, worker.as_bytes(), warden.as_bytes()).write(&dir.join("stable"));
}

/// Serves `dir`: the base URL and the paths asked.
pub fn serve(dir: PathBuf) -> (String, Arc<Mutex<Vec<String>>>) {
    let served = crate::release::serve(dir);
    (served.url, served.asked)
}

/// A folder of releases, removed when dropped.
pub struct Scratch(pub PathBuf);

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A fresh [`Scratch`] named for the test.
pub fn scratch(name: &str) -> Scratch {
    let dir = std::env::temp_dir().join(format!("aromba-releases-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("scratch");
    Scratch(dir)
}

/// The release `current` links to, under the Warden's root.
pub fn current(w: &TestWarden) -> Option<PathBuf> {
    std::fs::read_link(w.root.join("opt/aromba/current")).ok()
}

/// Where `current` links on a server that runs this build.
pub fn this_version() -> PathBuf {
    PathBuf::from(format!("releases/{}", env!("CARGO_PKG_VERSION")))
}

/// What install.sh leaves: this build's version unpacked and linked.
pub fn installed_as_this_version(w: &TestWarden) {
    let version = env!("CARGO_PKG_VERSION");
    let release = w.root.join("opt/aromba/releases").join(version);
    std::fs::create_dir_all(&release).expect("the release folder");
    std::fs::write(release.join("aromba"), b"this Worker").expect("a binary");
    std::os::unix::fs::symlink(
        format!("releases/{version}"),
        w.root.join("opt/aromba/current"),
    )
    .expect("the link");
}

/// The pairing of a server that checks `url/stable` for releases, its
/// first look a second after the start (the relay is up at once here; a
/// server waits 20 s).
pub fn setup(url: &str) -> Setup {
    Setup {
        releases: Some(format!("{url}/stable")),
        daemon_env: vec![
            ("AROMBA_RELEASE_KEYS", key_line(RELEASE_PUB)),
            ("AROMBA_FIRST_UPDATE_LOOK_S", "1".into()),
        ],
        adjust: with_test_releases,
        ..Setup::default()
    }
}
