//! The five-wrong-PINs lock holds across a restart of the Warden and
//! against guesses sent at once. It used to live in the Warden's memory, so
//! a restart cleared it, and a guess was counted only after its check, so
//! guesses arriving together were all checked before any was counted.

use aromba_testkit::warden as support;

use aromba_warden_proto::{Request, Response};
use support::Warden;

const PIN: &str = "472913";

fn prod_mode_off(w: &Warden, pin: &str) -> Response {
    w.control(&Request::ProdMode {
        on: false,
        pin: Some(pin.into()),
    })
}

fn refused(r: Response) -> String {
    match r {
        Response::Refused { reason, .. } => reason,
        other => panic!("not refused: {other:?}"),
    }
}

#[test]
fn five_wrong_pins_stay_locked_across_a_restart() {
    let mut w = Warden::start("adv-pin-restart", true, &[]);
    w.set_pin_and_prod_mode_on(PIN);
    for guess in ["100000", "200000", "300000", "400000"] {
        assert_eq!(refused(prod_mode_off(&w, guess)), "wrong PIN");
    }
    let why = refused(prod_mode_off(&w, "500000"));
    assert!(why.contains("now locked"), "{why}");
    // A new Warden on the same root, as after a crash or `systemctl restart`.
    w.restart();
    let why = refused(prod_mode_off(&w, PIN));
    assert!(
        why.contains("locked"),
        "the restart cleared the lock: {why}"
    );
    assert!(w.layout().state_dir.join("prod-mode").exists());
    // The lock still ends after its fifteen minutes.
    w.clock.advance(15 * 60);
    assert!(matches!(prod_mode_off(&w, PIN), Response::Noted { .. }));
}

#[test]
fn pin_guesses_sent_at_once_are_each_counted_before_any_is_checked() {
    let w = Warden::start("adv-pin-together", true, &[]);
    w.set_pin_and_prod_mode_on(PIN);
    // Eight taps at once, each on its own proposal, each with a wrong PIN.
    let taps: Vec<Request> = (0..8)
        .map(|i| {
            let (action, server, _) = w.propose(&Request::ProposeProdModeOff);
            w.tap(&server, &action, "approve", Some(&format!("90000{i}")))
        })
        .collect();
    let answers: Vec<String> = std::thread::scope(|s| {
        let handles: Vec<_> = taps
            .iter()
            .map(|tap| s.spawn(|| refused(w.ask(tap))))
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let checked = answers
        .iter()
        .filter(|a| a.starts_with("wrong PIN"))
        .count();
    assert_eq!(
        checked, 5,
        "only five guesses may be checked before the lock: {answers:#?}"
    );
    assert!(
        answers
            .iter()
            .filter(|a| !a.starts_with("wrong PIN"))
            .all(|a| a.contains("locked")),
        "{answers:#?}"
    );
}

/// The PIN set, a wrong one and the right one sent with taps and with
/// `prod-mode off`: none reaches the journal (each request is journaled
/// whole, and a `Pin` prints as `[pin]`).
#[test]
fn no_pin_sent_to_the_warden_reaches_the_journal() {
    let w = Warden::start("adv-pin-journal", true, &[]);
    w.set_pin_and_prod_mode_on(PIN);
    let (action, server, _) = w.propose(&Request::ProposeProdModeOff);
    assert_eq!(
        refused(w.ask(&w.tap(&server, &action, "approve", Some("913472")))),
        "wrong PIN"
    );
    assert!(matches!(prod_mode_off(&w, PIN), Response::Noted { .. }));
    let journal = std::fs::read_to_string(w.layout().journal_file()).expect("the journal");
    assert!(
        journal.contains(&action) && journal.contains("prod"),
        "the tap and prod mode were journaled: {journal}"
    );
    for pin in [PIN, "913472"] {
        assert!(!journal.contains(pin), "{pin} is in the journal");
    }
}
