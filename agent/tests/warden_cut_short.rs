//! An approval the Warden took and never answered: the Warden stopped
//! (killed mid-run, say) after the approval reached it. The chat must not
//! say "not done" — the run may have happened, and the Warden, started
//! again, closes it with its receipt and undo (`warden/src/server/recover.rs`,
//! `testkit/tests/warden_killed.rs`) — but that it cannot tell, and where to
//! look. A real relay with the fake Bot API, a real Warden, `aromba run`;
//! the Warden's Worker socket taken over, for the approval, by one that
//! reads the request and closes, as a Warden killed in its middle does.

use aromba_testkit::paired;
use aromba_warden_proto::{MAX_REQUEST, Request, decode_request_in, read_frame};
use sqlx::PgPool;
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::UnixListener;
use std::time::{Duration, Instant};

#[sqlx::test(migrations = false)]
async fn an_approval_the_warden_never_answered_is_said_cut_short_not_undone(db: PgPool) {
    let (p, dir) = paired::with_red_counting_chore(db, "cut-short").await;
    let proposal = p
        .ask("/run count", |t| {
            t.starts_with("Run the red chore \"count\"")
        })
        .await;
    p.bot.wait_recorded(&proposal).await;

    // The Warden that takes the approval dies before it answers: its
    // socket moved aside (it still serves there), and in its place one
    // that drops what it is asked unanswered until the approval comes;
    // then the Warden's socket is put back.
    let socket = p.warden.layout().worker_socket();
    let aside = socket.with_extension("aside");
    std::fs::rename(&socket, &aside).expect("the Warden's socket moved aside");
    let listener = UnixListener::bind(&socket).expect("a socket in the Warden's place");
    std::fs::set_permissions(&socket, std::fs::Permissions::from_mode(0o666)).expect("chmod");
    listener.set_nonblocking(true).expect("nonblocking");
    let took = std::thread::spawn({
        let socket = socket.clone();
        move || {
            let deadline = Instant::now() + Duration::from_secs(60);
            let mut seen = Vec::new();
            while Instant::now() < deadline {
                let mut conn = match listener.accept() {
                    Ok((conn, _)) => conn,
                    Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                        std::thread::sleep(Duration::from_millis(10));
                        continue;
                    }
                    Err(e) => panic!("accept: {e}"),
                };
                conn.set_nonblocking(false).expect("blocking");
                let Ok(frame) = read_frame(&mut conn, MAX_REQUEST) else {
                    continue;
                };
                match decode_request_in(&frame) {
                    Ok((Request::ApproveInApp { .. }, _)) => {
                        std::fs::rename(&aside, &socket).expect("the Warden's socket put back");
                        return Ok(seen);
                    }
                    other => seen.push(format!("{other:?}")),
                }
            }
            Err(seen)
        }
    });

    p.tap(&proposal, "Approve").await;
    let took = tokio::task::spawn_blocking(move || took.join().expect("the socket's thread"))
        .await
        .expect("joined");
    assert!(
        took.is_ok(),
        "the approval never reached the Warden's socket; it took: {took:?}"
    );
    let shown = p
        .shows(&proposal, |t| {
            t.contains("the Warden stopped before it answered")
        })
        .await;
    assert!(
        shown.text.contains("sudo aromba chores") && !shown.text.contains("not done"),
        "{}",
        shown.text
    );
    let texts = p.chat_texts();
    assert!(
        !texts
            .iter()
            .any(|t| t.starts_with("I could not ask the Warden")),
        "no second sentence contradicting it: {texts:?}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}
