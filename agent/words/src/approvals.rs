//! Proposals and taps: what a message with buttons says once it is
//! answered (edited in place, its buttons off), the PIN, and what a second
//! tap is told. The proposals themselves (what a chore does, what it may
//! change) are the Warden's words, written in its policy.

/// Under a proposal approved, while it runs.
pub const APPROVED_RUNNING: &str = "Approved ✓ — running…";
/// Under a proposal approved and done (its receipt follows).
pub const APPROVED_DONE: &str = "Approved ✓ — done.";
/// Under a proposal approved whose run did not go well.
pub const APPROVED_WENT_BADLY: &str = "Approved, but it did not go well: the receipt is below.";
/// Under a release install approved.
pub const APPROVED_INSTALLING: &str = "Approved ✓ — installing…";
/// Under a PIN action whose PIN was wrong.
pub const NOT_DONE_WRONG_PIN: &str = "Not done: the PIN was wrong.";
/// Under a proposal approved that the Warden did not carry out.
pub const APPROVED_NOT_DONE: &str = "Approved, but not done: the reason is below.";
/// Under a proposal cancelled.
pub const CANCELLED: &str = "Cancelled. Nothing was done.";
/// Under a proposal the Warden had answered before (the Worker forgot).
pub const ANSWERED_BEFORE: &str = "Already answered.";
/// Under "Was that you?" answered yes, while the Warden checks the tap.
pub const STEPPING_BACK: &str = "You said it was you: stepping back…";
/// Under "Was that you?" answered yes, once the Warden stepped down.
pub const IT_WAS_ME: &str = "You said it was you ✓ — back to normal.";
/// Under "Was that you?" answered yes that the Warden did not carry out.
pub const YES_NOT_DONE: &str =
    "You said it was you, but I could not step back: the reason is below.";
/// Under "Was that you?" answered no.
pub const IT_WAS_NOT_ME: &str = "You said it was not you: I am stopping.";
/// The button under a receipt that can be undone.
pub const UNDO: &str = "Undo";
/// Under a receipt whose run was undone.
pub const UNDONE: &str = "Undone ✓ (see below).";
/// Under a proposal approved whose run the Worker's restart interrupted
/// (its receipt went nowhere).
pub const INTERRUPTED: &str = "Approved ✓ — I restarted while it ran, so its receipt did not reach this chat. Run `sudo aromba chores` on the server to see how it went.";
/// Under a proposal approved whose answer never came: the Warden's
/// connection ended after the approval went to it (the Warden stopped
/// mid-run, say). Whether it ran is not known here; the Warden closes such
/// a run when it starts again, with its receipt and undo.
pub const APPROVED_CUT_SHORT: &str = "Approved ✓ — but the Warden stopped before it answered, so I can't tell how it went. Run `sudo aromba chores` on the server: it shows the run's receipt, and an undo id if it changed files.";

/// An approval the Warden carried out that has no receipt (prod mode
/// turned off).
pub const DONE: &str = "Done.";

/// What a second tap on an answered proposal (a double tap, Approve after
/// Cancel) is told: nothing happened, and nothing is wrong.
pub const ALREADY_ANSWERED: &str = "Already answered: a button on that message was tapped before, so nothing more was done, and nothing is wrong. To do it again, ask for it again.";

/// What the chat is told after a wrong PIN: the approval is spent, so the
/// way to try again is to ask again. `failures` wrong PINs in a row lock
/// PIN actions for `lock_minutes`; `locked` when this one did.
pub fn wrong_pin(locked: bool, failures: u32, lock_minutes: u64) -> String {
    if locked {
        format!(
            "Wrong PIN, so nothing was done. That was the {failures}th wrong PIN in a row: PIN actions are locked for {lock_minutes} minutes. If it was not you typing, send /panic."
        )
    } else {
        format!(
            "Wrong PIN, so nothing was done. To try again, ask for it again (for example /prodmode off) and tap Approve. After {failures} wrong PINs in a row, PIN actions lock for {lock_minutes} minutes."
        )
    }
}

/// A release's install approved: the services restart.
pub fn installing(version: &str) -> String {
    format!(
        "Installing Aromba {version}: both services restart now, and I will say when it is back."
    )
}

/// The label of a button that opens the Mini App to approve there (the
/// Warden's own label, said to open the app).
pub fn in_app(label: &str) -> String {
    format!("{label} (opens the app)")
}

/// The app was opened on a proposal this server no longer has open (an old
/// message, answered on another phone, or gone after a restart).
pub const APP_NOTHING_OPEN: &str = "Nothing to approve here: that proposal is answered or no longer open. Ask for it again in the chat if you still want it.";

/// The app was opened from a button the Worker does not know (not one of
/// its proposals).
pub const APP_NOT_A_PROPOSAL: &str =
    "This button is not one of your server's proposals, so there is nothing to approve.";

/// The pairing's app was opened while `aromba pair` was no longer waiting.
pub const APP_PAIRING_OVER: &str = "This pairing is over: `aromba pair` is no longer waiting on the server. To bind approvals to your Telegram account, type /unpair here, then run `sudo aromba pair` on the server again.";

/// What the app shows at pairing, before the person confirms.
pub const PAIR_CONFIRM: &str = "Bind your server's approvals to this Telegram account?\nAfter this, red actions, undos, cap changes and updates on your server are approved only here, in the app, from this account: the relay that carries the chat cannot approve them for you.";

/// What the app shows once the account is pinned.
pub const PAIR_CONFIRMED: &str =
    "Done ✓ — approvals on your server are bound to this Telegram account. You can close this.";

/// What the app shows when the Warden refused the confirmation.
pub fn pair_not_confirmed(reason: &str) -> String {
    format!("Not confirmed: {reason}. Open the app again from the button in the chat.")
}

/// The app's answer once an approval is on its way to the Warden (the
/// outcome is said in the chat, as a receipt or a reason).
/// The Trust page opened while `aromba pair` waits for the confirmation.
pub const APP_PAIRING_FIRST: &str = "Confirm the pairing first: tap the button under \"Paired.\" in the chat. The Trust page opens from /trust once it is done.";
/// An Undo link of the Trust page whose run can no longer be undone.
pub const APP_UNDO_GONE: &str = "Not proposed: that run can no longer be undone (its 7 days are over, or it was undone already).";
/// The app asked past the chat's pace.
pub const APP_TOO_MANY: &str =
    "Your server is answering a lot at once: close this and open it again in a minute.";
/// The Trust page's Undo link followed while its Undo waits in the chat.
pub const APP_UNDO_PROPOSED_ALREADY: &str =
    "Proposed already: the Undo is waiting in your chat. Close this and approve it there.";
/// The Trust page's Undo link, not proposed by the Warden (the chat says why).
pub const APP_UNDO_NOT_PROPOSED: &str =
    "Not proposed: your server's Warden did not propose this Undo, and the chat says why.";
/// An Undo link of the Trust page, proposed in the chat.
pub const APP_UNDO_PROPOSED: &str = "Proposed in your chat: close this and approve the Undo there (its button opens this app again). Nothing is undone until you do.";

pub const APP_SENT: &str = "Sent to your server. Its Warden checks Telegram's signature on this approval, then carries it out: what happens is said in the chat.";
