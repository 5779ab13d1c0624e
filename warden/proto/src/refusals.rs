//! How some of the Warden's refusals begin, said once: the Worker
//! recognises them to tell the person what happened in plain words (a
//! wrong PIN and how to try again, a Cancel that is no refusal at all, a
//! command held back at Slow).

/// How a refusal for a wrong PIN begins (the Worker tells the person how
/// to try again).
pub const WRONG_PIN: &str = "wrong PIN";

/// How the refusal of a tap on Cancel (or any button but Approve) begins:
/// the person chose not to go ahead, which the chat says without calling
/// it a refusal.
pub const DECLINED: &str = "the user chose";

/// How the Warden's refusal of a request held back at Slow begins: a
/// sentence for the chat as it stands (with the seconds to wait, which the
/// Warden keeps).
pub const SLOWED: &str = "I'm slowed down after unusual activity:";

/// The reason of a ladder move made by the chat's `/panic` (and by "No,
/// stop Aromba"): the chat answered it already, so its event is not said
/// again.
pub const PANIC_FROM_CHAT: &str = "/panic from the chat";

/// How the Warden's refusal of a skill update that asks for more than the
/// installed version begins (`Request::SkillUpdate`): it is not applied by
/// itself, and the Worker proposes it as a new install.
pub const SKILL_WIDENS: &str = "this update asks for more than the installed version";
