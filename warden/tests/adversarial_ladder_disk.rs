//! A hostile Worker that fills the disk so the ladder's file cannot be
//! written, then raises a signal. The Warden used to stop serving there —
//! root's control socket with it — and, restarted, would have come back at
//! the lower step still on disk. Through a real Warden: the move holds in
//! memory, root is still answered and told, and the save lands once the
//! disk takes it again.

use aromba_testkit::warden as support;

use aromba_warden_proto::{Request, Response};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};
use support::Warden;

/// `chattr +i` on a directory: nothing can be created or renamed in it, as
/// on a full disk. Taken off again on drop, whatever the test did.
struct Immutable(PathBuf);

fn chattr(flag: &str, dir: &Path) -> bool {
    assert_cmd::Command::new("chattr")
        .arg(flag)
        .arg(dir)
        .output()
        .is_ok_and(|o| o.status.success())
}

impl Immutable {
    fn new(dir: &Path) -> Immutable {
        assert!(
            chattr("+i", dir),
            "chattr +i {} (root, on a filesystem with attributes)",
            dir.display()
        );
        Immutable(dir.to_path_buf())
    }
}

impl Drop for Immutable {
    fn drop(&mut self) {
        chattr("-i", &self.0);
    }
}

fn step_on_disk(w: &Warden) -> u64 {
    let bytes = std::fs::read(w.layout().ladder_file()).expect("the ladder's file");
    let v: serde_json::Value = serde_json::from_slice(&bytes).expect("ladder JSON");
    v["step"].as_u64().expect("a step")
}

#[test]
fn a_ladder_move_the_disk_refuses_holds_and_root_is_still_served() {
    let w = Warden::start("ladder-disk-full", false, &[]);
    assert_eq!(step_on_disk(&w), 0);
    let frozen = Immutable::new(&w.layout().state_dir);
    // A red action named by the Worker without an approval: one step up.
    let r = w.ask(&Request::RedAction {
        action: "wipe-everything".into(),
        approval: None,
    });
    assert!(matches!(r, Response::Refused { .. }), "{r:?}");
    // Root is still answered, at the step the signal earned.
    let status = w.status();
    assert_eq!(status.ladder_name, "slow", "{status:?}");
    assert!(
        status.ladder_reason.contains("not saved to disk"),
        "{status:?}"
    );
    assert_eq!(step_on_disk(&w), 0, "the disk took the move after all");
    // The Worker is held to Slow: its next command waits a minute.
    let r = w.ask(&Request::Read {
        cmd: "uptime".into(),
        args: vec![],
    });
    assert!(
        matches!(&r, Response::Refused { reason, .. } if reason.contains("slowed down")),
        "{r:?}"
    );
    assert!(matches!(w.ask(&Request::Ping), Response::Pong));
    // The disk takes writes again: the watcher saves the step.
    drop(frozen);
    let start = Instant::now();
    while step_on_disk(&w) != 1 {
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "the move was never saved"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    // The watcher journals the save right after writing the file.
    while !w.journal().contains("\"kind\":\"ladder-saved\"") {
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "the save was never journaled"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    assert!(!w.status().ladder_reason.contains("not saved"));
}
