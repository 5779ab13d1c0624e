//! The catalogue's skills (`skills/`) through a real Warden, as the tests
//! of them share it: a Warden trusting the test release key with names
//! standing for the owner's hosts, a skill installed as a release ships
//! it, its settings set with the PIN, its chores and tools run, and the
//! folders a skill makes on this machine removed when the test made them.

use crate::skills::catalogue_bundle;
use crate::warden::Warden;
use aromba_warden::egress::Resolver;
use aromba_warden::server::ServeOptions;
use aromba_warden_proto::{Request, Response, SettingValue};
use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// The PIN the catalogue's tests set.
pub const PIN: &str = "4729135";

/// `o` trusts the test release key, and resolves each name of `hosts` to
/// its loopback address (and nothing else).
pub fn with_hosts(o: &mut ServeOptions, hosts: &'static [(&'static str, &'static str)]) {
    o.release_keys = Some(vec![crate::release::key_line(crate::release::RELEASE_PUB)]);
    o.egress_resolver = Resolver::Fixed {
        lookup: Arc::new(move |name: &str| {
            hosts
                .iter()
                .filter(|(n, _)| *n == name)
                .filter_map(|(_, a)| a.parse::<IpAddr>().ok())
                .collect()
        }),
        reachable: hosts.iter().filter_map(|(_, a)| a.parse().ok()).collect(),
    };
}

/// A Warden named `name`, its options adjusted by `adjust` (which calls
/// [`with_hosts`]), with the PIN set.
pub fn started(name: &str, adjust: fn(&mut ServeOptions)) -> Warden {
    let w = Warden::start_with(name, true, &[], adjust);
    assert!(matches!(
        w.control(&Request::SetPin { pin: PIN.into() }),
        Response::Noted { .. }
    ));
    w
}

/// Installs the catalogue's skill `name` as the release ships it (with the
/// PIN); what the Warden showed.
pub fn install(w: &Warden, name: &str) -> String {
    let path = w.root.join(format!("{name}.skill"));
    std::fs::write(&path, catalogue_bundle(name)).unwrap();
    let path = path.to_string_lossy().into_owned();
    let r = w.control(&Request::SkillCheck { path: path.clone() });
    let Response::SkillShown { sha256, text, .. } = r else {
        panic!("{name} is not shown: {r:?}");
    };
    let r = w.control(&Request::SkillInstall {
        path,
        sha256,
        pin: Some(PIN.into()),
    });
    assert!(matches!(r, Response::Noted { .. }), "{name}: {r:?}");
    text
}

/// Sets `setting` of `skill` to `value`, with the PIN.
pub fn set(w: &Warden, skill: &str, setting: &str, value: &str) {
    let r = w.control(&Request::SkillSet {
        name: skill.into(),
        setting: setting.into(),
        value: SettingValue::new(value),
        pin: Some(PIN.into()),
    });
    assert!(matches!(r, Response::Noted { .. }), "{setting}: {r:?}");
}

/// Runs chore `name`: whether it ended well, and its stdout then stderr.
pub fn run(w: &Warden, name: &str, dry_run: bool) -> (bool, String) {
    match w.control(&Request::ChoreRun {
        name: name.into(),
        dry_run,
    }) {
        Response::Receipt {
            ok, stdout, stderr, ..
        } => (
            ok,
            format!(
                "{}{}",
                String::from_utf8_lossy(&stdout),
                String::from_utf8_lossy(&stderr)
            ),
        ),
        other => panic!("{name}: {other:?}"),
    }
}

/// Runs tool `tool` of `skill` from the Worker's socket; its stdout.
pub fn tool(w: &Warden, skill: &str, tool: &str) -> String {
    match w.ask(&Request::SkillTool {
        skill: skill.into(),
        tool: tool.into(),
    }) {
        Response::Result(r) => String::from_utf8_lossy(&r.stdout).into_owned(),
        other => panic!("{skill} {tool}: {other:?}"),
    }
}

/// A folder a skill makes on this machine (`/var/cache/aromba-restic`),
/// removed at the end when the test made it.
pub struct Made(pub Option<PathBuf>);

impl Made {
    pub fn if_absent(path: &str) -> Made {
        Made((!Path::new(path).exists()).then(|| PathBuf::from(path)))
    }
}

impl Drop for Made {
    fn drop(&mut self) {
        if let Some(p) = &self.0 {
            let _ = std::fs::remove_dir_all(p);
        }
    }
}
