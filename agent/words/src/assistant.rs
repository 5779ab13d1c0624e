//! The assistant: the marker every one of its messages opens with, the
//! Worker's words around its answers, and `/ai`'s budget. What the model
//! writes is its own (filtered by the Worker's `assistant::voice`), never
//! in this catalogue.

/// The first line of every message of the assistant's: the only place
/// the marker is spelled out.
pub const MARKER: &str = "🤖 Assistant (AI, may be wrong):";

/// Said instead of a line of the model's that presents a command to paste.
pub const LEFT_OUT: &str = "[a command to run as root was left out: I never ask you to paste commands; ask me for a chore instead]";

/// The AI key was wiped at Cut.
pub const OFF: &str = "The assistant is off: its key was wiped when I stepped down to reads only. After `aromba resume`, put a key in secrets.toml and restart the Worker.";

/// A question kept from the model because a word of it could be the PIN.
pub const PIN_KEPT: &str = "I kept that message from the assistant: a word in it could be your PIN (one word with a digit, 6 characters or more). If it is your PIN, it is still in the chat: delete it yourself. I read a PIN only right after you tap Approve on an action that asks for one. If it was a question, ask it without that word (a version like 1.24 is fine).";

/// A question while the last one is still being answered.
pub const STILL_ANSWERING: &str =
    "I am still on your last question; ask again once its answer is here.";

/// An answer cut short by a halt.
pub const STOPPED: &str =
    "The assistant could not finish: I stopped it (the ladder moved, or /panic).";

/// The budget ran out between the model's rounds.
pub const BUDGET_SPENT: &str =
    "I stopped looking: today's AI budget is spent, so this answer is not complete.";

/// The Warden's status could not be read, so nothing goes to the model.
pub const WARDEN_UNKNOWN: &str = "I cannot tell how things stand with the Warden right now, so I am not asking the assistant; try again in a minute.";

/// `/ai` asked while the ladder is at Freeze.
pub fn stopped_by_the_ladder(ladder_name: &str, step: u64) -> String {
    format!(
        "The assistant is stopped while I am at {ladder_name} ({step}); it answers again once the ladder comes down."
    )
}

/// Today's tokens are spent.
pub fn budget_spent_today(budget: u64) -> String {
    format!("Today's AI budget ({budget} tokens) is spent. It starts again tomorrow.")
}

/// What `/ai` says where no assistant is set up.
pub const NO_AI_KEY: &str = "There is no assistant here: no AI key is set up, so there is no budget to show. To add one, root names a model in /etc/aromba/worker/network.toml, puts its key in /etc/aromba/worker/secrets.toml and runs `sudo aromba pair` again (the README's \"Ask your server\" says how). My commands work without it: /help lists them.";

/// The assistant's message while it looks, with the tools called so far.
pub fn looking_into_it(looked: &[String]) -> String {
    if looked.is_empty() {
        "Looking into it…".to_string()
    } else {
        format!("Looking into it: {}…", looked.join(", "))
    }
}

/// Why there is no answer (the endpoint's words, filtered as the model's).
pub fn could_not_answer(why: &str) -> String {
    format!("The assistant could not answer: {why}.")
}

/// An answer with no text.
pub const NO_ANSWER: &str = "(no answer)";

/// The footer under an answer: its tokens, and prod mode's limit.
pub fn usage_footer(input: u64, output: u64, prod_mode: bool) -> String {
    let mut text = format!("\n\n— {input} tokens in, {output} out");
    if prod_mode {
        text.push_str("; prod mode: I only propose");
    }
    text
}

/// A chore the model proposed, with its reason (one line, filtered).
pub fn proposes(chore: &str, why: &str) -> String {
    format!("The assistant proposes the chore {chore}. Its reason, in its own words: {why}")
}

/// A skill of the catalogue the model proposed, with its reason (one
/// line, filtered), before the Warden's own proposal of it.
pub fn proposes_skill(skill: &str, why: &str) -> String {
    format!("The assistant proposes the skill {skill}. Its reason, in its own words: {why}")
}

/// `/ai` with the chat's own budget under root's ceiling.
pub fn today_of_budget(used: u64, budget: u64, ceiling: u64) -> String {
    format!("Today: {used} of {budget} tokens (root's ceiling is {ceiling}).")
}

/// `/ai` with root's ceiling as the budget.
pub fn today_of_ceiling(used: u64, ceiling: u64) -> String {
    format!(
        "Today: {used} of {ceiling} tokens (root's ceiling, `daily_tokens` in network.toml; /ai budget N sets a lower one)."
    )
}

/// `/ai budget off`.
pub fn budget_is_the_ceiling(ceiling: u64, per_question: u64) -> String {
    format!(
        "The daily budget is root's ceiling now: {ceiling} tokens (`daily_tokens` in network.toml sets another). One question costs at most {per_question}."
    )
}

/// `/ai budget N`.
pub fn budget_set(budget: u64, used: u64) -> String {
    format!("The daily budget is {budget} tokens (today so far: {used}).")
}

/// `/ai budget N` above root's ceiling.
pub fn budget_above_the_ceiling(ceiling: u64) -> String {
    format!(
        "The daily budget is {ceiling} tokens, root's ceiling: the chat may set a lower one, not a higher one (root sets `daily_tokens` under [assistant] in network.toml)."
    )
}

/// `/ai budget` with something else than a number in range.
pub fn budget_is_a_number(ceiling: u64) -> String {
    format!("The budget is a number of tokens, 1 to {ceiling}: /ai budget 50000")
}

/// `/ai` with words it does not take.
pub const AI_USAGE: &str = "/ai shows today's tokens; /ai budget N sets a lower daily budget; /ai budget off goes back to root's ceiling.";

/// What the Worker's tools answer the model when a look cannot be done:
/// said to the model, which may pass it on in its own words.
pub mod tool {

    /// The assistant's share of the Worker's reads is spent.
    pub const READS_SPENT: &str = "the Worker's reads for these ten minutes are spent";

    /// No release folder, so no catalogue: what `skill_catalogue` and
    /// `propose_skill` answer.
    pub const NO_CATALOGUE: &str = "no release folder is set here (network.toml names none), so the skill catalogue cannot be reached";

    /// The Warden answered a read with something else.
    pub fn odd_answer(answer: &str) -> String {
        format!("an odd answer: {answer}")
    }

    /// A path another account could swap on the way.
    pub fn not_asked_about(path: &str, why: &str) -> String {
        format!("{path} is not asked about: {why}")
    }

    /// A path whose resolved form is not UTF-8.
    pub fn not_a_plain_path(path: &str) -> String {
        format!("{path} does not resolve to a plain path")
    }

    /// Why a path could not be resolved.
    pub enum Unresolved {
        Missing,
        Closed,
        Other,
    }

    /// A path the Worker cannot resolve.
    pub fn cannot_resolve(path: &str, why: Unresolved) -> String {
        let why = match why {
            Unresolved::Missing => "it does not exist",
            Unresolved::Closed => "a folder on the way is closed to the Worker",
            Unresolved::Other => "it cannot be looked at",
        };
        format!("{path} cannot be resolved here ({why}): ask about a folder above it")
    }
}
