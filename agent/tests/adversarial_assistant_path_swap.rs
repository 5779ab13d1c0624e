//! A path swapped under the Worker's look. The attacker: a local user who
//! may change a folder on the path the model asks about, flipping a link
//! between the Worker's look (resolve, then judge against the secret
//! paths) and the Warden's read. What it tries: to turn an innocent read
//! into a read of a secret path, which the Warden counts against the
//! Worker and which climbs the ladder. What holds: the Warden is asked
//! about the path as resolved, and a path under a folder another account
//! (or anyone) may change is not asked about at all; root's own folders
//! are. The Warden's side: `warden/tests/adversarial_path_swap.rs`.

use aromba::assistant::conversation::{self, Host, Limits};
use aromba::assistant::model::{Message, Model, ModelError, Reply, ToolCall, Usage};
use aromba::assistant::secret_paths::swappable_by_another;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

const LIMITS: Limits = aromba_testkit::model::NO_LIMITS;

/// A model that calls `disk_usage` on `path` once, then answers.
struct AsksAbout {
    path: String,
}

impl Model for AsksAbout {
    async fn complete(
        &self,
        messages: &[Message],
        _tools: Option<&serde_json::Value>,
    ) -> Result<Reply, ModelError> {
        let asked = messages
            .iter()
            .any(|m| matches!(m, Message::Assistant { .. }));
        Ok(Reply {
            text: if asked {
                "Small.".into()
            } else {
                String::new()
            },
            calls: if asked {
                vec![]
            } else {
                vec![ToolCall {
                    id: "c1".into(),
                    name: "disk_usage".into(),
                    arguments: serde_json::json!({"path": self.path, "depth": 1}).to_string(),
                }]
            },
            usage: Usage::default(),
        })
    }
}

/// A host that resolves `/srv/link` to `/srv/real` (as the Worker sees
/// it now) and keeps what it was asked to read.
#[derive(Default)]
struct Resolving {
    asked: Mutex<Vec<Vec<String>>>,
}

impl Host for Resolving {
    async fn read(&self, _cmd: String, args: Vec<String>) -> Result<String, String> {
        self.asked
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(args);
        Ok("4.0K\t/srv/real\n".into())
    }

    async fn chores(&self) -> Vec<String> {
        vec![]
    }

    fn resolve(&self, path: &str) -> Result<String, String> {
        Ok(path.replace("/srv/link", "/srv/real"))
    }
}

/// Found by the review: the Worker resolved the path, judged it, then asked
/// the Warden about the path as written; a link flipped in between turned
/// the read into a secret path's, which moved the ladder. The Warden is
/// asked about the path as resolved.
#[tokio::test]
async fn a_link_flipped_after_the_look_changes_nothing_the_warden_is_asked() {
    let host = Resolving::default();
    let model = AsksAbout {
        path: "/srv/link".into(),
    };
    conversation::answer(&model, &host, "what is in /srv/link?", LIMITS)
        .await
        .expect("an answer");
    let asked = host.asked.into_inner().unwrap_or_else(|p| p.into_inner());
    assert_eq!(asked.len(), 1, "{asked:?}");
    assert_eq!(asked[0].last().map(String::as_str), Some("/srv/real"));
    assert!(
        !asked[0].iter().any(|a| a.contains("/srv/link")),
        "{asked:?}"
    );
}

/// A fresh folder under `/var/tmp` for this test.
fn scratch(name: &str) -> PathBuf {
    let dir = PathBuf::from(format!(
        "/var/tmp/aromba-swap-{name}-{}",
        std::process::id()
    ));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(dir.join("inner")).expect("the folder");
    dir
}

/// The same flip prevented at its root: a path under a folder another
/// account may change is not asked about at all.
#[test]
fn a_path_under_another_accounts_folder_is_not_asked_about() {
    let dir = scratch("owned");
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    assert_eq!(swappable_by_another(&dir.join("inner")), None, "root's");
    std::os::unix::fs::chown(dir.join("inner"), Some(65_534), Some(65_534)).expect("chown");
    let why = swappable_by_another(&dir.join("inner/x")).expect("refused");
    assert!(why.contains("belongs to uid 65534"), "{why}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_path_under_a_folder_anyone_may_write_is_not_asked_about() {
    let dir = scratch("open");
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o777)).expect("chmod");
    assert!(swappable_by_another(&dir.join("inner")).is_some());
    // With the sticky bit, an entry of root's cannot be swapped by others.
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o1777)).expect("chmod");
    assert_eq!(swappable_by_another(&dir.join("inner")), None);
    std::os::unix::fs::chown(dir.join("inner"), Some(65_534), Some(65_534)).expect("chown");
    assert!(swappable_by_another(&dir.join("inner/x")).is_some());
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn root_owned_system_paths_are_asked_about() {
    for p in ["/", "/usr/bin", "/var/log", "/etc"] {
        assert_eq!(swappable_by_another(Path::new(p)), None, "{p}");
    }
}
