//! The frames, versioned from the first one.
//!
//! The hello is the only frame sent in the clear (inside TLS): it proves the
//! server holds its token. Every later frame is a [`Body`] sealed by
//! [`crate::session`]: a counter, a timestamp and an HMAC under the session
//! key. Every field is checked on the way in; unknown fields are refused.

use crate::token::ServerToken;
use serde::{Deserialize, Serialize};
use uuid::Uuid;

/// The protocol version this build speaks.
pub const PROTOCOL_VERSION: u32 = 1;

/// The largest message either side accepts, checked before parsing: a
/// Telegram message (4096 characters, at most 16 KiB of UTF-8) with its
/// buttons and the framing around it.
pub const MAX_MESSAGE: usize = 24 * 1024;

/// Telegram's limit on a message's text, in characters.
pub const MAX_TEXT_CHARS: usize = 4096;
/// Buttons a message may carry.
pub const MAX_BUTTONS: usize = 8;
/// A button's label, in characters.
pub const MAX_LABEL_CHARS: usize = 64;
/// A button's id: the server's own name for it, 1–32 bytes of `[A-Za-z0-9_-]`.
pub const MAX_BUTTON_ID: usize = 32;

/// The 32 random bytes each side contributes to the session key, base64url.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct Nonce(pub [u8; 32]);

impl Nonce {
    pub fn random() -> Nonce {
        use rand::RngCore;
        let mut bytes = [0u8; 32];
        rand::rng().fill_bytes(&mut bytes);
        Nonce(bytes)
    }
}

impl Serialize for Nonce {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use base64::Engine;
        s.serialize_str(&base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(self.0))
    }
}

impl<'de> Deserialize<'de> for Nonce {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Nonce, D::Error> {
        use base64::Engine;
        let text = <std::borrow::Cow<'de, str>>::deserialize(d)?;
        let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD
            .decode(text.as_bytes())
            .map_err(serde::de::Error::custom)?;
        let bytes: [u8; 32] = bytes
            .try_into()
            .map_err(|_| serde::de::Error::custom("a nonce is 32 bytes"))?;
        Ok(Nonce(bytes))
    }
}

/// Server → relay, the first message of a connection.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Hello {
    pub v: u32,
    pub server_id: Uuid,
    pub token: ServerToken,
    pub nonce: Nonce,
    /// Milliseconds since the Unix epoch.
    pub ts: i64,
}

impl Hello {
    /// The hello of this protocol version for `server_id`, with a fresh
    /// nonce, stamped now.
    pub fn new(server_id: Uuid, token: ServerToken) -> Hello {
        Hello {
            v: PROTOCOL_VERSION,
            server_id,
            token,
            nonce: Nonce::random(),
            ts: crate::session::now_ms(),
        }
    }
}

/// Relay → server, the answer to an accepted hello: the relay's nonce, and
/// the welcome sealed under the key both sides now derive (so the server
/// knows the relay derived the same key before it sends anything sealed).
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Accept {
    pub v: u32,
    pub nonce: Nonce,
    /// A sealed frame holding [`Body::Welcome`].
    pub welcome: String,
}

/// A button on a message: the server's id for it, its label, and, on a
/// button of an approval, the action id the Warden issued (the relay signs
/// it with the tap). A button with `app` opens the bot's Mini App from a
/// direct link carrying `app` as its `start_param` (Telegram signs it in
/// the launch): it is never tapped through the relay.
#[cfg_attr(feature = "arbitrary", derive(arbitrary::Arbitrary))]
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Button {
    pub id: String,
    pub label: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub action: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub app: Option<String>,
}

impl Button {
    /// A button without an action.
    pub fn new(id: &str, label: &str) -> Button {
        Button {
            id: id.into(),
            label: label.into(),
            action: None,
            app: None,
        }
    }

    /// A button that opens the Mini App with `start_param`.
    pub fn app(id: &str, label: &str, start_param: &str) -> Button {
        Button {
            app: Some(start_param.into()),
            ..Button::new(id, label)
        }
    }
}

/// The longest `start_param` a direct link carries (the Bot API's limit).
pub const MAX_START_PARAM: usize = 512;

/// A `start_param`'s shape: 1 to [`MAX_START_PARAM`] of `A-Za-z0-9_-`.
pub fn valid_start_param(param: &str) -> bool {
    (1..=MAX_START_PARAM).contains(&param.len())
        && param
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

/// The longest launch data the relay passes on (Telegram's is a few hundred
/// bytes).
pub const MAX_LAUNCH: usize = 4096;

/// The longest sealed PIN passed on (the Warden's bound is lower).
pub const MAX_SEALED_PIN: usize = 512;

/// A sealed PIN's shape: 1 to [`MAX_SEALED_PIN`] of base64url, no padding.
pub fn valid_sealed_pin(sealed: &str) -> bool {
    (1..=MAX_SEALED_PIN).contains(&sealed.len())
        && sealed
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

/// What the Mini App asks the server, with the launch Telegram signed.
#[cfg_attr(feature = "arbitrary", derive(arbitrary::Arbitrary))]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AppAsk {
    /// What the button it was opened from is about: the proposal's text.
    View,
    /// The person tapped Approve (or Confirm, for the pairing) in the app.
    Approve,
    /// The Trust page (opened from `/trust`): what Aromba may do here and
    /// whether its record holds, read-only.
    Trust,
    /// The Trust page's policy section: the Warden's rendering verbatim
    /// (asked apart, to keep each answer within a frame).
    Policy,
    /// An Undo link of the Trust page: propose undoing the run whose undo
    /// id comes with the ask (the proposal goes to the chat, approved
    /// there as any Undo).
    Undo,
}

/// The longest answer to the Mini App, as JSON: within one frame, with
/// room for the frame around it.
pub const MAX_APP_ANSWER: usize = 20 * 1024;
/// Sections an answer may have.
pub const MAX_APP_SECTIONS: usize = 32;
/// A section's heading, in characters.
pub const MAX_APP_HEADING_CHARS: usize = 80;
/// Lines a section may have (the policy rendering is one section).
pub const MAX_APP_LINES: usize = 512;

/// An undo id's shape: 32 lowercase hex digits.
pub fn valid_undo_id(id: &str) -> bool {
    is_lower_hex(id, 32)
}

/// One section of a page the app shows (the Trust page): a heading and
/// its lines, shown as text. `verbatim` lines keep their spacing (the
/// policy rendering); a section with `undo` carries a link that proposes
/// undoing that run.
#[cfg_attr(feature = "arbitrary", derive(arbitrary::Arbitrary))]
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AppSection {
    pub heading: String,
    pub lines: Vec<String>,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub verbatim: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub undo: Option<String>,
}

/// The server's answer to the Mini App, shown as it is.
#[cfg_attr(feature = "arbitrary", derive(arbitrary::Arbitrary))]
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AppAnswer {
    pub kind: AppAnswerKind,
    /// Plain words (a proposal's text, a verdict), no markup.
    pub text: String,
    /// A page's sections under the verdict in `text` (the Trust page).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub sections: Vec<AppSection>,
}

impl AppAnswer {
    /// An answer of plain words.
    pub fn said(kind: AppAnswerKind, text: &str) -> AppAnswer {
        AppAnswer {
            kind,
            text: text.to_string(),
            sections: Vec::new(),
        }
    }

    /// Checks what serde cannot: the text, the sections' shapes, and the
    /// whole within [`MAX_APP_ANSWER`].
    pub fn check(&self) -> Result<(), ContentError> {
        check_text(&self.text)?;
        if self.sections.len() > MAX_APP_SECTIONS {
            return Err(ContentError::AppSections);
        }
        for s in &self.sections {
            let heading = s.heading.chars().count();
            let shaped = (1..=MAX_APP_HEADING_CHARS).contains(&heading)
                && !s.heading.chars().any(char::is_control)
                && s.lines.len() <= MAX_APP_LINES
                && s.lines.iter().all(|l| {
                    l.chars().count() <= MAX_TEXT_CHARS
                        && !l.chars().any(|c| c.is_control() && c != '\t')
                })
                && s.undo.as_deref().is_none_or(valid_undo_id);
            if !shaped {
                return Err(ContentError::AppSections);
            }
        }
        match serde_json::to_string(self) {
            Ok(json) if json.len() <= MAX_APP_ANSWER => Ok(()),
            _ => Err(ContentError::AppSections),
        }
    }
}

/// How the app shows an answer.
#[cfg_attr(feature = "arbitrary", derive(arbitrary::Arbitrary))]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AppAnswerKind {
    /// A proposal waiting for the person: its text, with Approve.
    Proposal,
    /// The outcome of an approval (done, or not, said in the text).
    Outcome,
    /// Nothing to approve (answered already, gone, not this server's).
    Closed,
    /// A read-only page: a verdict in the text, then the sections.
    Page,
}

/// The relay's signature over a tap, in the minisign format, and what it
/// covers besides the server id, the message's button id and the action id
/// (`docs/approvals.md`): the chat, when the relay received the tap, the
/// label of the tapped button and the SHA-256 of the exact text of the
/// message it was on.
#[cfg_attr(feature = "arbitrary", derive(arbitrary::Arbitrary))]
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TapProof {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub action: Option<String>,
    pub label: String,
    pub chat: i64,
    /// Unix seconds.
    pub time: u64,
    /// 64 lowercase hex digits.
    pub text_sha256: String,
    /// The minisign signature's text.
    pub signature: String,
}

/// The longest signature text a tap may carry (a minisign signature with
/// its comments is about 300 bytes).
pub const MAX_SIGNATURE: usize = 1024;

/// A stretch of a message's text, in UTF-16 code units as Telegram counts
/// them.
#[cfg_attr(feature = "arbitrary", derive(arbitrary::Arbitrary))]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Span {
    pub start: u32,
    pub len: u32,
}

impl Span {
    /// The span over `part`, which must be a slice of `text` (the Worker
    /// marks the block it appended).
    pub fn of(text: &str, start_byte: usize, end_byte: usize) -> Option<Span> {
        let before = text.get(..start_byte)?;
        let inside = text.get(start_byte..end_byte)?;
        let start = u32::try_from(before.encode_utf16().count()).ok()?;
        let len = u32::try_from(inside.encode_utf16().count()).ok()?;
        Some(Span { start, len })
    }
}

/// Monospace stretches a message may have.
pub const MAX_SPANS: usize = 8;

/// What the relay delivers to a server.
#[cfg_attr(feature = "arbitrary", derive(arbitrary::Arbitrary))]
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum Delivery {
    /// A message the person wrote in the chat.
    Message { text: String },
    /// A tap on a button of a message the server sent, signed by the relay.
    Tap {
        message: Uuid,
        button: String,
        proof: TapProof,
    },
    /// The server was paired with a chat: the relay's public key for taps
    /// (minisign, base64), which the Warden pins; the bot's id, whose Mini
    /// App launches Telegram signs; and the `start_param` of the button
    /// that asks the person to confirm in the app (`pair_<code>`), whose
    /// launch binds approvals to their Telegram account.
    Paired {
        approval_key: String,
        bot_id: u64,
        confirm: String,
    },
    /// The paired person opened the Mini App: the launch as Telegram made
    /// it (checked by the relay with the bot token only to refuse junk
    /// early; the Warden checks Telegram's own signature), and what the app
    /// asks. The server answers with `app_answer` under `request`.
    ///
    /// With `approve` on an action that needs the PIN, the PIN as the page
    /// sealed it for the Warden (base64url): only the Warden opens it.
    App {
        request: Uuid,
        ask: AppAsk,
        launch: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        sealed_pin: Option<String>,
        /// With `undo`: the undo id of the run to propose undoing.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        undo: Option<String>,
    },
}

/// Every frame after the hello.
#[cfg_attr(feature = "arbitrary", derive(arbitrary::Arbitrary))]
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case", deny_unknown_fields)]
pub enum Body {
    /// Relay → server: the hello was accepted.
    Welcome {
        /// Seconds between the relay's pings.
        ping_secs: u32,
    },
    /// Relay → server: a chat message or a tap, at least once, by id.
    Deliver { id: i64, delivery: Delivery },
    /// Server → relay: a message for the chat, with buttons, and the
    /// stretches of its text to show in a monospace font (the relay makes
    /// them Telegram's `pre` entities: no markup ever travels in the text).
    Send {
        id: Uuid,
        text: String,
        buttons: Vec<Button>,
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        monospace: Vec<Span>,
    },
    /// Server → relay: a new text and buttons for a message it sent.
    Edit {
        id: Uuid,
        message: Uuid,
        text: String,
        buttons: Vec<Button>,
    },
    /// Server → relay: the delivery is safely kept and need not be sent
    /// again.
    AckDelivery { id: i64 },
    /// Relay → server: the message or edit is safely kept and need not be
    /// sent again.
    AckMessage { id: Uuid },
    /// Server → relay: a pairing code, please.
    PairingRequest {},
    /// Relay → server: the code to show, the link that carries it to the
    /// bot, and until when it holds (milliseconds since the Unix epoch).
    PairingCode {
        code: String,
        link: String,
        expires_at: i64,
    },
    /// Relay → server: no code, since the server is paired already; a new
    /// pairing starts with `/unpair` in the chat it has.
    AlreadyPaired {},
    /// Server → relay: the head of the Warden's journal (never its entries).
    JournalHead { seq: u64, hash: String },
    /// Relay → server, after the welcome: the last head the relay holds,
    /// which the server's journal must still extend, signed with the
    /// relay's approval key (`docs/approvals.md`, "The anchor"): the Warden
    /// takes only a signed anchor as evidence.
    Anchor {
        seq: u64,
        hash: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        signature: Option<String>,
    },
    /// Server → relay: the answer to the Mini App's `app` delivery
    /// `request`, for the page that asked (never kept).
    AppAnswer { request: Uuid, answer: AppAnswer },
    /// Relay → server: a planned shutdown; come back after this long.
    Restarting { after_ms: u64, jitter_ms: u64 },
    /// Relay → server: a frame was refused; the connection closes.
    Error { reason: String },
}

/// Why a frame's content is refused.
#[derive(Debug, Clone, Copy, thiserror::Error, PartialEq, Eq)]
pub enum ContentError {
    #[error(
        "monospace stretches are at most {MAX_SPANS}, each non-empty, in order, apart, and within the text's characters"
    )]
    Spans,
    #[error("text is empty, longer than {MAX_TEXT_CHARS} characters, or holds a control character")]
    Text,
    #[error("more than {MAX_BUTTONS} buttons")]
    TooManyButtons,
    #[error("a button id is 1 to {MAX_BUTTON_ID} bytes of letters, digits, `_` and `-`")]
    ButtonId,
    #[error(
        "a button label is 1 to {MAX_LABEL_CHARS} characters, with no control character or line separator"
    )]
    ButtonLabel,
    #[error("two buttons share an id")]
    DuplicateButton,
    #[error("a journal hash is 64 lowercase hex digits")]
    JournalHash,
    #[error("an action id is 32 lowercase hex digits")]
    ActionId,
    #[error("a tap's proof is malformed")]
    Proof,
    #[error(
        "a Mini App button's start parameter is 1 to {MAX_START_PARAM} of A-Z, a-z, 0-9, `_` and `-`"
    )]
    StartParam,
    #[error("a Mini App launch is 1 to {MAX_LAUNCH} bytes with no control character")]
    Launch,
    #[error("a sealed PIN comes only with an approval and is 1 to {MAX_SEALED_PIN} of base64url")]
    SealedPin,
    #[error("an undo id (32 lowercase hex digits) comes with an Undo, and only with one")]
    UndoId,
    #[error(
        "an app answer has at most {MAX_APP_SECTIONS} sections, each a heading of 1 to {MAX_APP_HEADING_CHARS} characters and at most {MAX_APP_LINES} lines without control characters, in {MAX_APP_ANSWER} bytes in all"
    )]
    AppSections,
}

/// Control characters other than line breaks and tabs: never in a chat
/// message, and U+0000 cannot be stored at all.
fn has_control(text: &str) -> bool {
    text.chars()
        .any(|c| c.is_control() && c != '\n' && c != '\t' && c != '\r')
}

/// An undo id comes with an Undo and an Undo with an undo id.
pub fn check_undo(ask: AppAsk, undo: Option<&str>) -> Result<(), ContentError> {
    match (ask, undo) {
        (AppAsk::Undo, Some(id)) if valid_undo_id(id) => Ok(()),
        (AppAsk::Undo, _) | (_, Some(_)) => Err(ContentError::UndoId),
        _ => Ok(()),
    }
}

/// Whether a chat message, trimmed, has the shape of the Worker's PIN:
/// one word of 6 to 64 characters with a digit, no whitespace, control or
/// invisible character, not a command. The relay deletes such a message
/// from the chat as soon as it has read it and passes it on to nobody: a
/// PIN is typed only in the Mini App, sealed for the Warden. The Warden's
/// protocol keeps the same rule
/// (`aromba_warden_proto::could_be_pin`, which the Warden enforces on a
/// new PIN); a test in the Worker holds the two equal.
pub fn could_be_pin(text: &str) -> bool {
    let text = text.trim();
    let n = text.chars().count();
    (6..=64).contains(&n)
        && !text.starts_with('/')
        && text.chars().any(|c| c.is_numeric())
        && !text
            .chars()
            .any(|c| c.is_whitespace() || c.is_control() || shows_nothing(c))
}

/// A character that shows nothing, reorders the text around it, or breaks
/// a line of its own: the set of `aromba_warden_proto::hidden::invisible_or_separator`
/// (the relay links no Warden crate; a test in the Worker, which links
/// both, holds the two equal over every character).
pub fn shows_nothing(c: char) -> bool {
    matches!(
        c,
        '\u{00ad}'
            | '\u{034f}'
            | '\u{061c}'
            | '\u{115f}'
            | '\u{1160}'
            | '\u{17b4}'
            | '\u{17b5}'
            | '\u{180e}'
            | '\u{200b}'..='\u{200f}'
            | '\u{2028}'..='\u{202e}'
            | '\u{2060}'..='\u{206f}'
            | '\u{3164}'
            | '\u{feff}'
            | '\u{ffa0}'
            | '\u{fff9}'..='\u{fffb}'
            | '\u{1bca0}'..='\u{1bca3}'
            | '\u{1d173}'..='\u{1d17a}'
            | '\u{e0000}'..='\u{e007f}'
    )
}

/// Whether a chat message may hold the PIN: it has the PIN's shape once
/// the characters that show nothing are taken out. [`could_be_pin`] says
/// whether a text may *be* a PIN (the Warden refuses a new PIN with an
/// invisible character); this says whether a message typed or pasted may
/// *hold* one — found by the attack round: "472913" with a zero-width
/// space after it, or a soft hyphen in it, stayed in the chat and went on
/// to the server.
pub fn holds_a_pin(text: &str) -> bool {
    let visible: String = text.chars().filter(|c| !shows_nothing(*c)).collect();
    could_be_pin(&visible)
}

/// A character that may not stand in a field of a signed tap: any control
/// character (line breaks and tabs included) and the Unicode line and
/// paragraph separators. The signed text is one field per line, so a label
/// holding one would add lines of its own choosing to what the relay signs.
pub fn breaks_a_signed_line(c: char) -> bool {
    c.is_control() || matches!(c, '\u{0085}' | '\u{2028}' | '\u{2029}')
}

/// A button label's shape: 1 to [`MAX_LABEL_CHARS`] characters, none of
/// them [`breaks_a_signed_line`] (the label is signed with a tap).
pub fn valid_label(label: &str) -> bool {
    let chars = label.chars().count();
    (1..=MAX_LABEL_CHARS).contains(&chars) && !label.chars().any(breaks_a_signed_line)
}

fn check_text(text: &str) -> Result<(), ContentError> {
    let chars = text.chars().count();
    if chars == 0 || chars > MAX_TEXT_CHARS || has_control(text) {
        return Err(ContentError::Text);
    }
    Ok(())
}

/// Spans in order, apart, non-empty, on character boundaries of `text`.
fn check_spans(text: &str, spans: &[Span]) -> Result<(), ContentError> {
    if spans.len() > MAX_SPANS {
        return Err(ContentError::Spans);
    }
    // The UTF-16 offsets at which a character starts, and the end.
    let mut boundaries = Vec::with_capacity(text.len() + 1);
    let mut at = 0u32;
    for c in text.chars() {
        boundaries.push(at);
        at += c.len_utf16() as u32;
    }
    boundaries.push(at);
    let mut end_of_last = 0u32;
    for (i, span) in spans.iter().enumerate() {
        let end = span
            .start
            .checked_add(span.len)
            .ok_or(ContentError::Spans)?;
        let apart = i == 0 || span.start >= end_of_last;
        if span.len == 0
            || !apart
            || boundaries.binary_search(&span.start).is_err()
            || boundaries.binary_search(&end).is_err()
        {
            return Err(ContentError::Spans);
        }
        end_of_last = end;
    }
    Ok(())
}

fn is_lower_hex(s: &str, len: usize) -> bool {
    s.len() == len && s.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}

/// An action id's shape, as the Warden issues them.
pub fn valid_action_id(id: &str) -> bool {
    is_lower_hex(id, 32)
}

/// A button id's shape.
pub fn valid_button_id(id: &str) -> bool {
    (1..=MAX_BUTTON_ID).contains(&id.len())
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

fn check_buttons(buttons: &[Button]) -> Result<(), ContentError> {
    if buttons.len() > MAX_BUTTONS {
        return Err(ContentError::TooManyButtons);
    }
    for (i, b) in buttons.iter().enumerate() {
        if !valid_button_id(&b.id) {
            return Err(ContentError::ButtonId);
        }
        if !valid_label(&b.label) {
            return Err(ContentError::ButtonLabel);
        }
        if buttons[..i].iter().any(|o| o.id == b.id) {
            return Err(ContentError::DuplicateButton);
        }
        if b.action.as_deref().is_some_and(|a| !valid_action_id(a)) {
            return Err(ContentError::ActionId);
        }
        if b.app.as_deref().is_some_and(|p| !valid_start_param(p)) {
            return Err(ContentError::StartParam);
        }
    }
    Ok(())
}

impl Delivery {
    /// Checks what serde cannot, as the server checks a `deliver` frame: a
    /// message's text, a tap's button id. The relay queues nothing that
    /// fails it (a row the server must refuse would block its queue).
    pub fn check(&self) -> Result<(), ContentError> {
        match self {
            Delivery::Message { text } => check_text(text),
            Delivery::Tap { button, proof, .. } => {
                if !valid_button_id(button) {
                    return Err(ContentError::ButtonId);
                }
                if proof.action.as_deref().is_some_and(|a| !valid_action_id(a)) {
                    return Err(ContentError::ActionId);
                }
                if !valid_label(&proof.label)
                    || !is_lower_hex(&proof.text_sha256, 64)
                    || proof.signature.is_empty()
                    || proof.signature.len() > MAX_SIGNATURE
                    || proof.signature.chars().any(|c| c.is_control() && c != '\n')
                {
                    return Err(ContentError::Proof);
                }
                Ok(())
            }
            Delivery::Paired {
                approval_key,
                bot_id,
                confirm,
            } => {
                if *bot_id == 0 || !confirm.starts_with("pair_") || !valid_start_param(confirm) {
                    return Err(ContentError::Proof);
                }
                if approval_key.is_empty()
                    || approval_key.len() > 128
                    || !approval_key
                        .bytes()
                        .all(|b| b.is_ascii_alphanumeric() || b == b'+' || b == b'/' || b == b'=')
                {
                    return Err(ContentError::Proof);
                }
                Ok(())
            }
            Delivery::App {
                launch,
                ask,
                sealed_pin,
                undo,
                ..
            } => {
                if launch.is_empty() || launch.len() > MAX_LAUNCH || has_control(launch) {
                    return Err(ContentError::Launch);
                }
                if let Some(s) = sealed_pin
                    && (*ask != AppAsk::Approve || !valid_sealed_pin(s))
                {
                    return Err(ContentError::SealedPin);
                }
                check_undo(*ask, undo.as_deref())
            }
        }
    }
}

impl Body {
    /// Checks what serde cannot: lengths, counts and shapes.
    pub fn check(&self) -> Result<(), ContentError> {
        match self {
            Body::Send {
                text,
                buttons,
                monospace,
                ..
            } => {
                check_text(text)?;
                check_spans(text, monospace)?;
                check_buttons(buttons)
            }
            Body::Edit { text, buttons, .. } => {
                check_text(text)?;
                check_buttons(buttons)
            }
            Body::Deliver { delivery, .. } => delivery.check(),
            Body::AppAnswer { answer, .. } => answer.check(),
            Body::JournalHead { hash, .. } | Body::Anchor { hash, .. } => {
                if is_lower_hex(hash, 64) {
                    Ok(())
                } else {
                    Err(ContentError::JournalHash)
                }
            }
            _ => Ok(()),
        }
    }

    /// The frame's type, for counts and logs (never its content).
    pub fn kind(&self) -> &'static str {
        match self {
            Body::Welcome { .. } => "welcome",
            Body::Deliver { .. } => "deliver",
            Body::Send { .. } => "send",
            Body::Edit { .. } => "edit",
            Body::AckDelivery { .. } => "ack_delivery",
            Body::AckMessage { .. } => "ack_message",
            Body::PairingRequest {} => "pairing_request",
            Body::PairingCode { .. } => "pairing_code",
            Body::AlreadyPaired {} => "already_paired",
            Body::JournalHead { .. } => "journal_head",
            Body::Anchor { .. } => "anchor",
            Body::AppAnswer { .. } => "app_answer",
            Body::Restarting { .. } => "restarting",
            Body::Error { .. } => "error",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_message_holds_a_pin_once_what_shows_nothing_is_taken_out() {
        for held in [
            "472913",
            "472913\u{200B}",
            "\u{2068}472913\u{2069}",
            "\u{FEFF}472913",
            "472\u{00AD}913",
            "Tr0ub4dor&3\u{3164}",
        ] {
            assert!(holds_a_pin(held), "{held:?}");
        }
        for not_held in ["hello", "is disk 2 full?", "/run tidy2024", "12345\u{200B}"] {
            assert!(!holds_a_pin(not_held), "{not_held:?}");
        }
        // A new PIN may not hold an invisible character at all.
        assert!(!could_be_pin("472913\u{200B}"));
    }

    #[test]
    fn an_app_page_is_checked_for_its_shape_and_its_size() {
        let section = |lines: Vec<String>| AppSection {
            heading: "Chores".into(),
            lines,
            verbatim: false,
            undo: None,
        };
        let page = |sections| AppAnswer {
            kind: AppAnswerKind::Page,
            text: "All good.".into(),
            sections,
        };
        assert_eq!(
            page(vec![section(vec!["clean-tmp (green)".into()])]).check(),
            Ok(())
        );
        let too_big = page(vec![section(vec!["x".repeat(4000); 6])]);
        assert_eq!(too_big.check(), Err(ContentError::AppSections));
        let control = page(vec![section(vec!["a\u{1b}[2Jb".into()])]);
        assert_eq!(control.check(), Err(ContentError::AppSections));
        let heading = AppSection {
            heading: String::new(),
            ..section(vec![])
        };
        assert_eq!(page(vec![heading]).check(), Err(ContentError::AppSections));
        let bad_undo = AppSection {
            undo: Some("not an undo id".into()),
            ..section(vec![])
        };
        assert_eq!(page(vec![bad_undo]).check(), Err(ContentError::AppSections));
        let many = page(vec![section(vec![]); MAX_APP_SECTIONS + 1]);
        assert_eq!(many.check(), Err(ContentError::AppSections));
        let body = Body::AppAnswer {
            request: Uuid::nil(),
            answer: page(vec![section(vec!["x".repeat(4000); 6])]),
        };
        assert_eq!(body.check(), Err(ContentError::AppSections));
    }

    #[test]
    fn an_undo_id_comes_with_an_undo_and_only_with_one() {
        let id = "0123456789abcdef0123456789abcdef";
        assert_eq!(check_undo(AppAsk::Undo, Some(id)), Ok(()));
        assert_eq!(check_undo(AppAsk::Trust, None), Ok(()));
        assert_eq!(check_undo(AppAsk::Undo, None), Err(ContentError::UndoId));
        assert_eq!(
            check_undo(AppAsk::Undo, Some("0123")),
            Err(ContentError::UndoId)
        );
        assert_eq!(
            check_undo(AppAsk::View, Some(id)),
            Err(ContentError::UndoId)
        );
    }

    #[test]
    fn refuses_unknown_fields_and_types() {
        assert!(serde_json::from_str::<Body>(r#"{"type":"pairing_request","x":1}"#).is_err());
        assert!(serde_json::from_str::<Body>(r#"{"type":"shell","cmd":"id"}"#).is_err());
        assert!(serde_json::from_str::<Body>(r#"{"type":"pairing_request"}"#).is_ok());
    }

    #[test]
    fn monospace_spans_stay_in_order_inside_the_text_on_character_boundaries() {
        let send = |text: &str, spans: Vec<(u32, u32)>| Body::Send {
            id: Uuid::nil(),
            text: text.into(),
            buttons: vec![],
            monospace: spans
                .into_iter()
                .map(|(start, len)| Span { start, len })
                .collect(),
        };
        // "Disk:\n😀 90%": the emoji is two UTF-16 units.
        let text = "Disk:\n😀 90%";
        assert_eq!(send(text, vec![(6, 6)]).check(), Ok(()));
        assert_eq!(send(text, vec![(0, 5), (6, 6)]).check(), Ok(()));
        assert_eq!(
            send(text, vec![(6, 7)]).check(),
            Err(ContentError::Spans),
            "past the end"
        );
        assert_eq!(
            send(text, vec![(7, 5)]).check(),
            Err(ContentError::Spans),
            "inside the emoji"
        );
        assert_eq!(
            send(text, vec![(6, 0)]).check(),
            Err(ContentError::Spans),
            "empty"
        );
        assert_eq!(
            send(text, vec![(6, 6), (0, 5)]).check(),
            Err(ContentError::Spans),
            "out of order"
        );
        assert_eq!(
            send(text, vec![(0, 7), (6, 6)]).check(),
            Err(ContentError::Spans),
            "overlapping"
        );
        assert_eq!(
            send(text, vec![(u32::MAX, 2)]).check(),
            Err(ContentError::Spans),
            "an end past u32"
        );
        let many = (0..=MAX_SPANS as u32).map(|i| (i, 1)).collect();
        assert_eq!(send("abcdefghijk", many).check(), Err(ContentError::Spans));
        let text = "Disk:\n/ 5%";
        assert_eq!(
            Span::of(text, 6, text.len()),
            Some(Span { start: 6, len: 4 })
        );
        assert_eq!(Span::of("😀x", 1, 5), None, "not a character boundary");
    }

    #[test]
    fn checks_text_buttons_and_hashes() {
        let send = |text: &str, buttons: Vec<Button>| Body::Send {
            id: Uuid::nil(),
            text: text.into(),
            buttons,
            monospace: Vec::new(),
        };
        let b = Button::new;
        assert_eq!(send("hi", vec![b("ok", "OK")]).check(), Ok(()));
        assert_eq!(send("", vec![]).check(), Err(ContentError::Text));
        assert_eq!(
            send(&"é".repeat(MAX_TEXT_CHARS + 1), vec![]).check(),
            Err(ContentError::Text)
        );
        assert_eq!(
            send("hi", vec![b("a b", "x")]).check(),
            Err(ContentError::ButtonId)
        );
        assert_eq!(
            send("hi", vec![b("a", "")]).check(),
            Err(ContentError::ButtonLabel)
        );
        assert_eq!(
            send("hi", vec![b("a", "x"), b("a", "y")]).check(),
            Err(ContentError::DuplicateButton)
        );
        assert_eq!(
            send("hi", (0..9).map(|i| b(&i.to_string(), "x")).collect()).check(),
            Err(ContentError::TooManyButtons)
        );
        let head = |hash: &str| Body::JournalHead {
            seq: 1,
            hash: hash.into(),
        };
        assert_eq!(head(&"a".repeat(64)).check(), Ok(()));
        assert_eq!(
            head(&"A".repeat(64)).check(),
            Err(ContentError::JournalHash)
        );
    }

    /// Every character that would start a line of its own in the signed
    /// tap, or hide in one.
    const LINE_BREAKERS: [char; 9] = [
        '\n', '\r', '\t', '\0', '\u{1b}', '\u{7f}', '\u{85}', '\u{2028}', '\u{2029}',
    ];

    fn a_tap(label: &str) -> Delivery {
        Delivery::Tap {
            message: Uuid::nil(),
            button: "approve".into(),
            proof: TapProof {
                action: Some("a".repeat(32)),
                label: label.into(),
                chat: 42,
                time: 1_700_000_000,
                text_sha256: "0".repeat(64),
                signature: "untrusted comment: x\nRW…\ntrusted comment: y\nsig".into(),
            },
        }
    }

    #[test]
    fn a_button_label_with_a_newline_is_refused() {
        let send = |label: &str| Body::Send {
            id: Uuid::nil(),
            text: "Run tidy-cache?".into(),
            buttons: vec![Button::new("approve", label)],
            monospace: Vec::new(),
        };
        let edit = |label: &str| Body::Edit {
            id: Uuid::nil(),
            message: Uuid::nil(),
            text: "Run tidy-cache?".into(),
            buttons: vec![Button::new("approve", label)],
        };
        assert_eq!(send("Approve").check(), Ok(()));
        assert_eq!(
            send("Approve\nchat=1\rtime=2").check(),
            Err(ContentError::ButtonLabel)
        );
        for c in LINE_BREAKERS {
            let label = format!("Approve{c}chat=1");
            assert_eq!(
                send(&label).check(),
                Err(ContentError::ButtonLabel),
                "{c:?} in a send"
            );
            assert_eq!(
                edit(&label).check(),
                Err(ContentError::ButtonLabel),
                "{c:?} in an edit"
            );
        }
    }

    #[test]
    fn a_tap_label_with_a_carriage_return_is_refused() {
        assert_eq!(a_tap("Approve").check(), Ok(()));
        assert_eq!(a_tap("Approve\rtime=2").check(), Err(ContentError::Proof));
        for c in LINE_BREAKERS {
            assert_eq!(
                a_tap(&format!("Approve{c}")).check(),
                Err(ContentError::Proof),
                "{c:?}"
            );
        }
    }

    #[test]
    fn ids_and_actions_of_a_signed_tap_refuse_control_characters() {
        for c in LINE_BREAKERS {
            let bad = format!("approve{c}");
            assert!(!valid_button_id(&bad), "{c:?} in a button id");
            let action = format!("{}{c}", "a".repeat(31));
            assert!(!valid_action_id(&action), "{c:?} in an action id");
            let mut button = Button::new(&bad, "Approve");
            assert_eq!(
                check_buttons(std::slice::from_ref(&button)),
                Err(ContentError::ButtonId)
            );
            button.id = "approve".into();
            button.action = Some(action.clone());
            assert_eq!(check_buttons(&[button]), Err(ContentError::ActionId));
            let Delivery::Tap { message, proof, .. } = a_tap("Approve") else {
                unreachable!()
            };
            let tap = Delivery::Tap {
                message,
                button: bad,
                proof: TapProof {
                    action: Some(action),
                    ..proof.clone()
                },
            };
            assert_eq!(tap.check(), Err(ContentError::ButtonId));
            let tap = Delivery::Tap {
                message,
                button: "approve".into(),
                proof: TapProof {
                    text_sha256: format!("{}{c}", "0".repeat(63)),
                    ..proof
                },
            };
            assert_eq!(tap.check(), Err(ContentError::Proof));
        }
    }

    #[test]
    fn a_message_text_keeps_its_line_breaks_and_tabs() {
        let send = |text: &str| Body::Send {
            id: Uuid::nil(),
            text: text.into(),
            buttons: vec![],
            monospace: Vec::new(),
        };
        assert_eq!(send("Disk:\n\t/ 90%\r\n").check(), Ok(()));
        assert_eq!(send("bell\u{7}").check(), Err(ContentError::Text));
    }
}
