//! The checks of the `telegram_update` fuzz target, shared with the corpus
//! replay in `relay/tests/fuzz_corpora.rs` (the target includes this file
//! by path).
//!
//! An input is a webhook's body. What the relay's parser
//! (`telegram::inbound::parse`) takes says what the bytes say, read plainly
//! as JSON: the update's id, its kind, and for the kinds the relay acts on
//! the chat, the sender, the text, a tap's data and whether the tapped
//! message is still there (`date` 0 or not). So no trick of encoding makes
//! the relay act for another chat or on other words than the JSON holds.
//! Anything else is refused without a panic.
//!
//! (A re-encoding round trip is no property here: the relay never encodes
//! an update, and teloxide drops `date` from an inaccessible message it
//! encodes, so such an update does not parse back; the seed
//! `tap_inaccessible` holds one.)

use aromba_relay::telegram::inbound::parse;
use serde_json::Value;
use teloxide::types::{MaybeInaccessibleMessage, Message, UpdateKind};

fn same<T: PartialEq + std::fmt::Debug>(what: &str, parsed: T, plain: T) -> Result<(), String> {
    if parsed == plain {
        Ok(())
    } else {
        Err(format!(
            "{what}: the parser read {parsed:?}, the JSON holds {plain:?}"
        ))
    }
}

fn message(what: &str, m: &Message, v: &Value) -> Result<(), String> {
    same(
        &format!("{what} chat"),
        Some(m.chat.id.0),
        v["chat"]["id"].as_i64(),
    )?;
    same(
        &format!("{what} sender"),
        m.from.as_ref().map(|u| u.id.0),
        v["from"]["id"].as_u64(),
    )?;
    if let Some(text) = m.text() {
        same(&format!("{what} text"), Some(text), v["text"].as_str())?;
    }
    Ok(())
}

/// Every check on one input; `Err` says which property broke.
pub fn check(data: &[u8]) -> Result<(), String> {
    let Some(update) = parse(data) else {
        return Ok(());
    };
    let v: Value = serde_json::from_slice(data)
        .map_err(|e| format!("{update:?} was taken from bytes that are not JSON: {e}"))?;
    same(
        "update id",
        Some(u64::from(update.id.0)),
        v["update_id"].as_u64(),
    )?;
    match &update.kind {
        UpdateKind::Message(m) => message("message", m, &v["message"])?,
        UpdateKind::EditedMessage(m) => message("edited message", m, &v["edited_message"])?,
        UpdateKind::CallbackQuery(q) => {
            let plain = &v["callback_query"];
            same(
                "tap sender",
                Some(q.from.id.0),
                plain["from"]["id"].as_u64(),
            )?;
            same("tap data", q.data.as_deref(), plain["data"].as_str())?;
            match &q.message {
                None => same("tap message", None, plain.get("message"))?,
                Some(MaybeInaccessibleMessage::Regular(m)) => {
                    message("tapped message", m, &plain["message"])?;
                    if plain["message"]["date"].as_i64() == Some(0) {
                        return Err("a message of date 0 read as still there".into());
                    }
                }
                Some(MaybeInaccessibleMessage::Inaccessible(m)) => {
                    same(
                        "gone message chat",
                        Some(m.chat.id.0),
                        plain["message"]["chat"]["id"].as_i64(),
                    )?;
                    same(
                        "gone message date",
                        Some(0),
                        plain["message"]["date"].as_i64(),
                    )?;
                }
            }
        }
        _ => {}
    }
    // The chat and sender the queue shards by are the update's own.
    if let (Some(chat), UpdateKind::Message(m)) = (update.chat(), &update.kind) {
        same("shard chat", chat.id, m.chat.id)?;
    }
    Ok(())
}
