//! An approval covers what the person read, not only an action id. The
//! Worker writes the chat message, so a compromised Worker could put one
//! action's button under another action's words: "Run hello (yellow):
//! writes a greeting" over the button of the red chore that empties a
//! folder. Now the Warden renders each proposal's text itself, records its
//! SHA-256 with the action id, and takes a tap only when the relay signed
//! that very hash (the text it delivered with the button) and the label
//! the Warden gave the button. Taps are signed with the test key pair in
//! `keys/test/`, as the relay will sign them. Needs root and bubblewrap.

use aromba_testkit::warden as support;

use aromba_warden::approvals::{Approval, text_sha256};
use aromba_warden::ladder::Clock;
use aromba_warden_proto::{Request, Response};
use support::{TEST_KEY, Warden, owner_chore, signed_over};

/// A yellow chore that writes a greeting, and another that empties the
/// touched folder (yellow too: a relay-signed tap approves both, and the
/// text it signed is what these attacks bend; a red one is approved only
/// in the Mini App, `app_approvals.rs`).
fn chores() -> Vec<(String, String)> {
    vec![
        owner_chore(
            "hello",
            "yellow",
            "",
            "[ \"$1\" = --dry-run ] && { echo would-greet; exit 0; }\necho hello > TOUCHED/hello",
        ),
        owner_chore(
            "wipe",
            "yellow",
            "",
            "[ \"$1\" = --dry-run ] && { echo would-wipe; exit 0; }\nrm -f TOUCHED/precious",
        ),
        owner_chore(
            "purge",
            "red",
            "",
            "[ \"$1\" = --dry-run ] && { echo would-purge; exit 0; }\nrm -f TOUCHED/precious",
        ),
    ]
}

fn warden(name: &str) -> Warden {
    let w = Warden::start(&format!("adv-text-{name}"), true, &chores());
    std::fs::write(w.touched.join("precious"), "the owner's data\n").unwrap();
    w.dry_run_shown("hello");
    w.dry_run_shown("wipe");
    w.dry_run_shown("purge");
    w
}

fn propose(w: &Warden, chore: &str) -> (String, String) {
    let (action, server, _) = w.propose(&Request::Propose {
        chore: chore.into(),
    });
    (action, server)
}

fn refused(r: Response) -> String {
    match r {
        Response::Refused { reason, .. } => reason,
        other => panic!("not refused: {other:?}"),
    }
}

#[test]
fn a_tap_signed_over_another_actions_text_is_refused() {
    let w = warden("swapped");
    let (hello, server) = propose(&w, "hello");
    let (wipe, _) = propose(&w, "wipe");
    // The Worker sent wipe's button with hello's words; the relay signs the
    // text it delivered.
    let hello_text = w.text_of(&hello);
    assert!(hello_text.contains("\"hello\""), "{hello_text}");
    let tap = signed_over(
        &hello_text,
        &server,
        &wipe,
        "approve",
        w.clock.now(),
        TEST_KEY,
    );
    let why = refused(w.ask(&tap));
    assert!(why.contains("does not verify"), "{why}");
    assert!(w.touched.join("precious").exists(), "wipe ran");
    assert_eq!(w.ladder(), 1, "a tap that does not verify is a signal");
    // Nor does a text the Warden never wrote. (At Slow, one request a
    // minute.)
    w.clock.advance(61);
    let (wipe, _) = propose(&w, "wipe");
    w.clock.advance(61);
    let tap = signed_over(
        "Run hello: writes a greeting",
        &server,
        &wipe,
        "approve",
        w.clock.now(),
        TEST_KEY,
    );
    refused(w.ask(&tap));
    assert!(w.touched.join("precious").exists(), "wipe ran");
}

#[test]
fn a_tap_over_the_wardens_text_is_accepted() {
    let w = warden("own-text");
    let (wipe, server) = propose(&w, "wipe");
    let text = w.text_of(&wipe);
    let tap = signed_over(&text, &server, &wipe, "approve", w.clock.now(), TEST_KEY);
    match w.ask(&tap) {
        Response::Receipt { ok, receipt, .. } => assert!(ok, "{receipt}"),
        other => panic!("did not run: {other:?}"),
    }
    assert!(!w.touched.join("precious").exists());
    assert_eq!(w.ladder(), 0);
}

#[test]
fn a_button_the_worker_relabelled_is_refused() {
    let w = warden("relabelled");
    let (wipe, server) = propose(&w, "wipe");
    let text = w.text_of(&wipe);
    // The Worker labelled wipe's "approve" button "Cancel": the person
    // tapped what read as Cancel, and the relay signs the label it showed.
    let mut a = Approval {
        action_id: wipe.clone(),
        button: "approve".into(),
        chat: "4242".into(),
        time: w.clock.now(),
        signature: String::new(),
    };
    let signed = format!(
        "aromba-approval-v2\nserver={server}\naction={wipe}\ntext_sha256={}\nbutton=approve\nlabel=Cancel\nchat=4242\ntime={}\n",
        text_sha256(&text),
        a.time
    );
    let sk = minisign::SecretKeyBox::from_string(TEST_KEY)
        .unwrap()
        .into_unencrypted_secret_key()
        .unwrap();
    a.signature = minisign::sign(None, &sk, std::io::Cursor::new(signed), None, None)
        .unwrap()
        .into_string();
    let why = refused(w.ask(&Request::Approve {
        action_id: a.action_id,
        button: a.button,
        chat: a.chat,
        time: a.time,
        signature: a.signature,
    }));
    assert!(why.contains("does not verify"), "{why}");
    assert!(w.touched.join("precious").exists(), "wipe ran");
}

#[test]
fn a_chore_changed_after_its_proposal_does_not_run_on_that_tap() {
    let w = warden("edited");
    let (hello, server) = propose(&w, "hello");
    let tap = w.tap(&server, &hello, "approve", None);
    // The chore is edited between the proposal and the tap: the text the
    // person approved no longer describes what would run.
    let path = w.layout().config_dir.join("mine/hello.sh");
    let edited = std::fs::read_to_string(&path)
        .unwrap()
        .replace("echo hello >", "rm -f TOUCHED_/precious; echo hello >")
        .replace("TOUCHED_", &w.touched.to_string_lossy());
    std::fs::write(&path, edited).unwrap();
    let why = refused(w.ask(&tap));
    assert!(why.contains("changed since it was proposed"), "{why}");
    assert!(w.touched.join("precious").exists(), "the edited chore ran");
    assert!(!w.touched.join("hello").exists());
}

#[test]
fn the_wardens_text_is_the_same_for_the_same_action_and_says_what_it_does() {
    let w = warden("rendering");
    let (a, _) = propose(&w, "purge");
    let (b, _) = propose(&w, "purge");
    assert_ne!(a, b, "two action ids");
    let text = w.text_of(&a);
    assert_eq!(text, w.text_of(&b), "the rendering is deterministic");
    for said in [
        "red chore \"purge\"",
        "A chore of the tests",
        &*w.touched.to_string_lossy(),
        "Undo for 7 days",
        "1000 files or 20 GB",
        "Network: no",
    ] {
        assert!(text.contains(said), "{said:?} not in:\n{text}");
    }
    assert_ne!(text, w.text_of(&propose(&w, "hello").0));
    // The proposal's buttons are the Warden's, to be sent as they are.
    let Response::Proposed { buttons, .. } = w.ask(&Request::Propose {
        chore: "purge".into(),
    }) else {
        panic!("not proposed")
    };
    let buttons: Vec<(String, String)> = buttons.into_iter().map(|b| (b.data, b.label)).collect();
    assert_eq!(
        buttons,
        [
            ("approve".to_string(), "Approve".to_string()),
            ("cancel".to_string(), "Cancel".to_string())
        ]
    );
}
