//! What the relay itself says in a chat. Plain text (no parse mode), as
//! everything the relay sends.

pub const FOREIGN: &str = "This bot talks only to the server it is paired with, and this chat is not paired with one. To pair your server, run `sudo aromba pair` on it and open the link it prints.";

pub const PAIRED: &str = "Paired. This chat now looks after your server; it will say hello in a moment. Send /help to see what it can do.\nOne more step: open the app with the button below and confirm it is you. From then on, red actions, undos and updates on your server can be approved only there, from this Telegram account.";

pub const WRONG_CODE: &str = "That pairing code is not valid, or it has expired (a code holds fifteen minutes and works once). Run `sudo aromba pair` on your server for a new link.";

pub const LOCKED_OUT: &str =
    "Too many wrong pairing codes from this chat. Pairing is paused here for an hour.";

pub const BUSY: &str = "Too many pairing attempts right now. Please try again in a few minutes.";

pub const ALREADY_PAIRED: &str = "This Telegram account already looks after a server, and one account looks after one server. To pair a different server, send /unpair here first, then open the new link again.";

pub const PRIVATE_ONLY: &str = "A server pairs in a private chat with the bot, not in a group.";

pub const START_WHEN_PAIRED: &str =
    "This chat is paired with your server. Send /help to see what it can do.";

pub const TEXT_ONLY: &str = "Your server reads text messages only.";

/// A message with the PIN's shape, deleted as soon as it was read and
/// passed on to nobody.
pub const PIN_SHAPED: &str = "Deleted: that message looked like a PIN, so I took it out of the chat and passed it on to nobody. Your PIN is typed only in the app, after you tap Approve on an action that needs it — never in the chat. If it was a question, ask it in a few words.";

pub const EXPIRED: &str = "This button has expired.";

/// A tap's answer (the toast) once the tap is on its way to the server,
/// which answers in the chat.
pub const TAP_SENT: &str = "Sent to your server.";

/// A tap's answer on a button the server took off its message: the message
/// was answered already (a double tap), which is no fault.
pub const TAP_ANSWERED: &str = "Already answered: nothing more was done.";

pub const UNPAIR_ASK: &str = "Unpair this chat from your server? The server stops talking to this chat, and it can be paired again (with `sudo aromba pair`) within 24 hours; after that it must register again.";

pub const UNPAIR_YES: &str = "Unpair";
pub const UNPAIR_NO: &str = "Keep";

pub const UNPAIRED: &str = "Unpaired. This chat no longer looks after a server.";
pub const KEPT: &str = "Nothing changed: this chat still looks after your server.";

/// The toasts of the relay's own buttons.
pub const UNPAIRED_TOAST: &str = "Unpaired.";
pub const KEPT_TOAST: &str = "Nothing changed.";
pub const REINSTALL_TOAST: &str = "Done: it is your server.";
pub const OTHER_TOAST: &str = "Refused that machine.";

pub const NOT_PAIRED_UNPAIR: &str = "This chat is not paired with a server.";

pub const DUPLICATE_ASK: &str = "Another machine just registered with your server's identity (the same server id, a different boot). If you reinstalled Aromba or restored this server from a backup, it is the same server. Otherwise, refuse it: it will not be able to act as your server.";

pub const DUPLICATE_REINSTALL: &str = "This is a reinstall of my server";
pub const DUPLICATE_OTHER: &str = "This is another machine";

pub const REINSTALL_DONE: &str = "Done: the reinstalled server now speaks for your server, and the old installation's connection has ended.";
pub const OTHER_DONE: &str = "Refused: that machine cannot act as your server. If it is yours, install Aromba on it afresh to give it its own identity.";
pub const CHOICE_GONE: &str = "This question has already been answered, or it expired.";

/// `/unpair` in the command menu.
pub const UNPAIR_COMMAND: &str = "Unpair this chat from its server";

/// The label of the pairing's confirmation button.
pub const CONFIRM_BUTTON: &str = "Confirm it is you (opens the app)";

/// The Mini App's refusals, shown on its page (JSON `message`).
pub const APP_NOT_FROM_TELEGRAM: &str = "This page was not opened from Telegram (or it was opened more than an hour ago). Open it again from the button in your chat.";
pub const APP_NOT_PAIRED: &str =
    "This Telegram account is not paired with a server, so there is nothing here to approve.";
pub const APP_SERVER_SILENT: &str = "Your server did not answer within 20 seconds: it may be offline or busy. Nothing was done from this page; if the server comes back within ten minutes it may still carry out an approval, and the chat will say so.";
/// The server answered the page with something out of bounds: the relay
/// refused it, so it cannot say what the server did.
pub const APP_ANSWER_UNREADABLE: &str = "Your server's answer could not be shown: it was not one this page can read. So this page cannot say what happened — look in the chat, where your server says what it did.";
/// The Trust page's Undo link came without its run, or with a run on
/// another ask.
pub const APP_UNDO_UNREADABLE: &str = "Not sent: that Undo link does not name a run. Open the Trust page again from /trust and try it there.";
pub const APP_PIN_UNREADABLE: &str = "Not sent: the PIN did not come sealed the way this page seals it. Open the app again from the button and type your PIN there.";
pub const APP_BUSY: &str = "The relay is busy right now. Try again in a minute.";
pub const APP_WAITING: &str =
    "Your server has not answered what this app asked a moment ago. Wait for it, then try again.";
