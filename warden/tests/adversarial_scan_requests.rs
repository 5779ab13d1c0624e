//! A hostile Worker using what the first scan asks of the Warden — prod
//! mode on, data folders fenced — to loosen anything, and the root
//! terminal's `network_written`: each only ever makes the Warden stricter,
//! and what the Warden changes itself stays inside its integrity baseline.

use aromba_testkit::warden as support;

use aromba_warden_proto::{Request, Response};
use support::Warden;

fn fenced(w: &Warden) -> String {
    std::fs::read_to_string(w.layout().fences_file()).unwrap_or_default()
}

fn add(w: &Warden, paths: &[&str]) -> (Vec<String>, Vec<String>) {
    match w.ask(&Request::AddFences {
        paths: paths.iter().map(|p| p.to_string()).collect(),
    }) {
        Response::Fenced { added, refused, .. } => (added, refused),
        other => panic!("{other:?}"),
    }
}

#[test]
fn fences_are_added_resolved_and_stay_inside_the_integrity_baseline() {
    let mut w = Warden::start("scan-fences", true, &[]);
    let data = w.touched.join("srv/shop/uploads");
    std::fs::create_dir_all(&data).unwrap();
    let link = w.touched.join("link");
    std::os::unix::fs::symlink(&data, &link).unwrap();
    let (added, refused) = add(&w, &[link.to_str().unwrap()]);
    assert_eq!(added, vec![data.to_string_lossy().into_owned()]);
    assert!(refused.is_empty(), "{refused:?}");
    assert!(fenced(&w).contains(&*data.to_string_lossy()));
    // Asked again: nothing new, nothing refused.
    let (added, refused) = add(&w, &[data.to_str().unwrap()]);
    assert!(
        added.is_empty() && refused.is_empty(),
        "{added:?} {refused:?}"
    );
    // The Warden's own change is no mismatch, at start or later.
    w.restart();
    let st = w.status();
    assert_eq!(st.ladder_name, "normal", "{}", st.ladder_reason);
    assert!(!st.integrity.contains("MISMATCH"), "{}", st.integrity);
    assert!(w.journal().contains("\"fences\""));
}

#[test]
fn a_worker_cannot_fence_the_whole_system_or_aromba_itself() {
    let w = Warden::start("scan-fences-refused", true, &[]);
    let layout = w.layout();
    let file = w.touched.join("a-file");
    std::fs::write(&file, "").unwrap();
    let asked = [
        "/",
        "/var",
        "/etc/../var/lib",
        "relative/path",
        "/var/lib/\nx",
        file.to_str().unwrap(),
        layout.state_dir.to_str().unwrap(),
        layout.config_dir.to_str().unwrap(),
        layout.journal_dir.to_str().unwrap(),
        w.root.to_str().unwrap(),
    ];
    let (added, refused) = add(&w, &asked);
    assert!(added.is_empty(), "{added:?}");
    assert_eq!(refused.len(), asked.len(), "{refused:?}");
    assert_eq!(fenced(&w), "");
    assert_eq!(w.status().ladder_name, "normal");
}

#[test]
fn a_folder_swapped_for_a_link_into_the_logs_is_not_fenced() {
    let w = Warden::start("scan-fences-swapped", true, &[]);
    // The scan saw a folder of uploads; before the Warden looks, it is a
    // link to where Aromba's own chores work.
    let uploads = w.touched.join("srv/app/uploads");
    std::fs::create_dir_all(uploads.parent().unwrap()).unwrap();
    std::os::unix::fs::symlink("/var/log", &uploads).unwrap();
    let (added, refused) = add(&w, &[uploads.to_str().unwrap()]);
    assert!(added.is_empty(), "{added:?}");
    assert!(refused[0].contains("what Aromba's chore"), "{refused:?}");
    assert_eq!(fenced(&w), "");
}

#[test]
fn too_many_folders_in_one_request_is_refused_whole() {
    let w = Warden::start("scan-fences-many", true, &[]);
    let paths = vec!["/srv/a".to_string(); aromba_warden_proto::MAX_FENCES_ASKED + 1];
    assert!(matches!(
        w.ask(&Request::AddFences { paths }),
        Response::Error { .. }
    ));
    assert_eq!(fenced(&w), "");
}

#[test]
fn a_fence_list_changed_behind_the_wardens_back_is_not_laundered_into_the_baseline() {
    let mut w = Warden::start("scan-fences-tampered", true, &[]);
    let data = w.touched.join("data");
    std::fs::create_dir_all(&data).unwrap();
    // Someone emptied the list's meaning by writing it themselves.
    std::fs::write(w.layout().fences_file(), "/srv/elsewhere\n").unwrap();
    match w.ask(&Request::AddFences {
        paths: vec![data.to_string_lossy().into_owned()],
    }) {
        Response::Refused { reason, .. } => {
            assert!(reason.contains("does not match the baseline"), "{reason}")
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(fenced(&w), "/srv/elsewhere\n");
    w.restart();
    let st = w.status();
    assert_eq!(st.ladder_name, "cut", "{}", st.ladder_reason);
    assert!(st.integrity.contains("fence list"), "{}", st.integrity);
}

#[test]
fn the_worker_turns_prod_mode_on_with_findings_but_never_off() {
    let w = Warden::start("scan-prod-mode", true, &[]);
    assert_eq!(w.status().prod_mode, "off");
    // Nothing found is no reason.
    assert!(matches!(
        w.ask(&Request::ProdModeOn { findings: vec![] }),
        Response::Refused { .. }
    ));
    assert_eq!(w.status().prod_mode, "off");
    let r = w.ask(&Request::ProdModeOn {
        findings: vec!["a database with data: PostgreSQL".into()],
    });
    assert!(matches!(r, Response::Noted { .. }), "{r:?}");
    let since = w.status().prod_mode;
    assert!(since.starts_with("on since"), "{since}");
    // Again: it stays as it was.
    let r = w.ask(&Request::ProdModeOn {
        findings: vec!["again".into()],
    });
    assert!(matches!(r, Response::Noted { .. }), "{r:?}");
    assert_eq!(w.status().prod_mode, since);
    // Off is the root terminal's, with the PIN, or a tap with the PIN.
    let r = w.ask(&Request::ProdMode {
        on: false,
        pin: None,
    });
    assert!(matches!(r, Response::Error { .. }), "{r:?}");
    assert_eq!(w.status().prod_mode, since);
    assert!(w.journal().contains("a database with data: PostgreSQL"));
}

#[test]
fn network_toml_rewritten_by_pair_is_taken_into_the_baseline_and_by_anyone_else_is_a_mismatch() {
    let mut w = Warden::start("scan-network", true, &[]);
    let network = w.layout().network_file();
    std::fs::create_dir_all(network.parent().unwrap()).unwrap();
    std::fs::write(&network, "[relay]\naddresses = [\"127.0.0.1:1\"]\n").unwrap();
    // The Worker cannot vouch for it.
    assert!(matches!(
        w.ask(&Request::NetworkWritten),
        Response::Error { .. }
    ));
    // The root terminal (`aromba pair`) does.
    let r = w.control(&Request::NetworkWritten);
    assert!(matches!(r, Response::Noted { .. }), "{r:?}");
    w.restart();
    let st = w.status();
    assert_eq!(st.ladder_name, "normal", "{}", st.ladder_reason);
    // Changed by anything else: a mismatch at the next check.
    std::fs::write(&network, "[relay]\naddresses = [\"203.0.113.9:443\"]\n").unwrap();
    w.restart();
    let st = w.status();
    assert_eq!(st.ladder_name, "cut", "{}", st.ladder_reason);
    assert!(st.integrity.contains("network.toml"), "{}", st.integrity);
}

/// Waits (up to 10 s) for the integrity check to say MISMATCH.
fn mismatch_said(w: &Warden) -> String {
    for _ in 0..500 {
        let st = w.status();
        if st.integrity.starts_with("MISMATCH") {
            return st.integrity;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    w.status().integrity
}

/// The fence list's guard matches the kind of a mismatch (typed now), not
/// its words: a list that cannot be read at all — a directory put where
/// the file was — is a fence-list mismatch too. The Worker's new fence is
/// refused, its intent has its refused outcome, nothing is written where
/// the list was, and status says MISMATCH.
#[test]
fn a_fence_list_that_cannot_be_read_refuses_new_fences_and_status_says_mismatch() {
    let mut w = Warden::start("scan-fences-unreadable", true, &[]);
    let data = w.touched.join("data");
    std::fs::create_dir_all(&data).unwrap();
    let list = w.layout().fences_file();
    let _ = std::fs::remove_file(&list);
    std::fs::create_dir_all(&list).unwrap();
    match w.ask(&Request::AddFences {
        paths: vec![data.to_string_lossy().into_owned()],
    }) {
        Response::Refused { reason, .. } => {
            assert!(reason.contains("does not match the baseline"), "{reason}");
            assert!(reason.contains("the fence list cannot be read"), "{reason}");
        }
        other => panic!("{other:?}"),
    }
    assert!(list.is_dir(), "the list was replaced");
    assert_eq!(std::fs::read_dir(&list).unwrap().count(), 0);
    let journal = w.journal();
    let outcome = journal
        .lines()
        .find(|l| l.contains("\"kind\":\"fences\"") && l.contains("\"phase\":\"outcome\""))
        .expect("the refusal is journaled");
    assert!(outcome.contains("\"verdict\":\"refused\""), "{outcome}");
    w.restart();
    let said = mismatch_said(&w);
    assert!(said.contains("the fence list cannot be read"), "{said}");
    let _ = std::fs::remove_dir(&list);
}

/// A state record planted behind the Warden's back, then prod mode asked
/// for by the Worker's scan: the change is refused (not laundered into the
/// baseline), prod mode stays off, the intent has its refused outcome,
/// and status says the state records changed.
#[test]
fn a_state_record_planted_behind_the_wardens_back_refuses_prod_mode_from_the_scan() {
    let mut w = Warden::start("scan-state-tampered", true, &[]);
    std::fs::write(w.layout().state_dir.join("pin.argon2"), "planted").unwrap();
    match w.ask(&Request::ProdModeOn {
        findings: vec!["a database with data: PostgreSQL".into()],
    }) {
        Response::Refused { reason, .. } => {
            assert!(reason.contains("state records changed"), "{reason}")
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(w.status().prod_mode, "off");
    assert!(!w.layout().state_dir.join("prod-mode").exists());
    let journal = w.journal();
    let outcome = journal
        .lines()
        .find(|l| l.contains("\"kind\":\"prod-mode\"") && l.contains("\"phase\":\"outcome\""))
        .expect("the refusal is journaled");
    assert!(outcome.contains("\"verdict\":\"refused\""), "{outcome}");
    w.restart();
    let said = mismatch_said(&w);
    assert!(
        said.contains("the Warden's state records changed"),
        "{said}"
    );
}

/// A state record that cannot be read (a link to a file every read of
/// fails with EIO) is a state-records mismatch too, by its kind: prod mode
/// from the scan is refused and status says the records cannot be read.
#[test]
fn a_state_record_that_cannot_be_read_refuses_prod_mode_from_the_scan() {
    let mut w = Warden::start("scan-state-unreadable", true, &[]);
    std::os::unix::fs::symlink("/proc/self/mem", w.layout().state_dir.join("pin.argon2")).unwrap();
    match w.ask(&Request::ProdModeOn {
        findings: vec!["a database with data: PostgreSQL".into()],
    }) {
        Response::Refused { reason, .. } => {
            assert!(
                reason.contains("the Warden's state records cannot be read"),
                "{reason}"
            )
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(w.status().prod_mode, "off");
    w.restart();
    let said = mismatch_said(&w);
    assert!(
        said.contains("the Warden's state records cannot be read"),
        "{said}"
    );
}
