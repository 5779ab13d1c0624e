//! A relay that carries the sealed PIN, or that makes the buttons, attacks
//! prod mode off on a server bound to the person's Telegram account: it
//! signs a tap and passes the PIN it once saw, drops or garbles the seal,
//! replays a seal made for another proposal, or puts a key of its own in
//! the button so the page seals the PIN for it. Prod mode stays on each
//! time; only the person's launch with the PIN sealed for this proposal's
//! key turns it off.

use aromba_testkit::telegram::{PERSON, launch_of, seal_pin};
use aromba_testkit::warden::{self as support, bound, refused};

use aromba_warden::approvals::text_sha256;
use aromba_warden::ladder::Clock;
use aromba_warden::seal::SealKey;
use aromba_warden::telegram::action_param;
use aromba_warden_proto::{Request, Response};
use support::Warden;

const PIN: &str = "472913";

fn prod_mode_on(w: &Warden) -> bool {
    w.status().prod_mode.starts_with("on")
}

fn bound_in_prod_mode(name: &str) -> Warden {
    let w = bound(name);
    w.set_pin_and_prod_mode_on(PIN);
    w
}

fn approve(w: &Warden, param: &str, sealed_pin: Option<String>) -> Response {
    w.ask(&Request::ApproveInApp {
        launch: launch_of(PERSON, Some(param), w.clock.now()),
        sealed_pin,
    })
}

#[test]
fn a_relay_signed_tap_with_the_pin_cannot_turn_prod_mode_off() {
    let w = bound_in_prod_mode("adv-seal-tap");
    let (action, server, app) = w.proposal(&Request::ProposeProdModeOff);
    assert!(
        app.is_some(),
        "on a bound server prod mode off is in the app"
    );
    // The relay learned the PIN somehow, and signs the tap itself.
    let why = refused(w.ask(&w.tap(&server, &action, "approve", Some(PIN))));
    assert!(why.contains("only in the Mini App"), "{why}");
    assert!(prod_mode_on(&w));
    assert!(
        w.ladder() >= 1,
        "a relay approving an app action is a signal"
    );
}

#[test]
fn an_approval_without_its_sealed_pin_turns_nothing_off_and_counts_no_wrong_pin() {
    let w = bound_in_prod_mode("adv-seal-dropped");
    for _ in 0..6 {
        let (_, param) = w.propose_in_app(&Request::ProposeProdModeOff);
        let why = refused(approve(&w, &param, None));
        assert!(why.contains("did not arrive sealed"), "{why}");
    }
    assert!(prod_mode_on(&w));
    assert_eq!(w.ladder(), 0, "a dropped seal is the relay's to drop");
    // Six dropped seals locked nothing: the PIN still works.
    let (_, param) = w.propose_in_app(&Request::ProposeProdModeOff);
    assert!(matches!(
        approve(&w, &param, Some(seal_pin(&param, PIN))),
        Response::Noted { .. }
    ));
    assert!(!prod_mode_on(&w));
}

#[test]
fn a_garbled_seal_turns_nothing_off_and_moves_no_ladder() {
    let w = bound_in_prod_mode("adv-seal-garbled");
    let (_, param) = w.propose_in_app(&Request::ProposeProdModeOff);
    let sealed = seal_pin(&param, PIN);
    // One character changed in the ciphertext.
    let mut garbled: Vec<char> = sealed.chars().collect();
    let at = garbled.len() - 20;
    garbled[at] = if garbled[at] == 'A' { 'B' } else { 'A' };
    let why = refused(approve(&w, &param, Some(garbled.into_iter().collect())));
    assert!(why.contains("does not open"), "{why}");
    assert!(prod_mode_on(&w));
    assert_eq!(w.ladder(), 0);
}

#[test]
fn a_pin_sealed_for_an_earlier_proposal_opens_for_no_other() {
    let w = bound_in_prod_mode("adv-seal-replayed");
    let (_, first) = w.propose_in_app(&Request::ProposeProdModeOff);
    let seen = seal_pin(&first, PIN);
    let (_, second) = w.propose_in_app(&Request::ProposeProdModeOff);
    assert_ne!(first, second, "each proposal has its own key");
    let why = refused(approve(&w, &second, Some(seen)));
    assert!(why.contains("does not open"), "{why}");
    assert!(prod_mode_on(&w));
}

#[test]
fn a_button_naming_the_relays_own_key_is_refused_before_the_pin_is_looked_at() {
    let w = bound_in_prod_mode("adv-seal-swapped-key");
    let (action, _) = w.propose_in_app(&Request::ProposeProdModeOff);
    // The relay makes the button: the Warden's action and text, its own key.
    let relays = SealKey::generate().unwrap();
    let hash = text_sha256(&w.text_of(&action));
    let param = action_param(&action, &hash, Some(&relays.public_hex()));
    let sealed = seal_pin(&param, PIN);
    assert_eq!(
        relays.open(&sealed, param.as_bytes()).unwrap().expose(),
        PIN,
        "the relay can read what the page sealed for its key"
    );
    let why = refused(approve(&w, &param, Some(sealed)));
    assert!(why.contains("another PIN key"), "{why}");
    assert!(prod_mode_on(&w));
    assert!(w.ladder() >= 1, "a swapped key is the relay's doing");
}

#[test]
fn a_button_without_the_pin_key_is_refused() {
    let w = bound_in_prod_mode("adv-seal-no-key");
    let (action, _) = w.propose_in_app(&Request::ProposeProdModeOff);
    let param = action_param(&action, &text_sha256(&w.text_of(&action)), None);
    let why = refused(approve(&w, &param, None));
    assert!(why.contains("another PIN key"), "{why}");
    assert!(prod_mode_on(&w));
}

#[test]
fn a_sealed_pin_sent_again_turns_prod_mode_off_once() {
    let w = bound_in_prod_mode("adv-seal-twice");
    let (_, param) = w.propose_in_app(&Request::ProposeProdModeOff);
    let request = Request::ApproveInApp {
        launch: launch_of(PERSON, Some(&param), w.clock.now()),
        sealed_pin: Some(seal_pin(&param, PIN)),
    };
    assert!(matches!(w.ask(&request), Response::Noted { .. }));
    w.set_pin_and_prod_mode_on(PIN);
    let again = w.ask(&request);
    assert!(!matches!(again, Response::Noted { .. }), "{again:?}");
    assert!(prod_mode_on(&w), "the replay turned nothing off");
}

#[test]
fn a_seal_on_an_action_without_a_pin_is_ignored_and_reveals_nothing() {
    // A seal sent with a red run (which needs no PIN) is not opened: the
    // approval is judged as without it.
    let w = bound("adv-seal-on-run");
    let (_, _, param) = w.proposed_wipe();
    let r = approve(&w, &param, Some("AAAA".repeat(20)));
    assert!(matches!(r, Response::Receipt { ok: true, .. }), "{r:?}");
}
