//! Webhook bodies shaped like Telegram's updates, built field by field
//! (`arbitrary`), for the structure-aware `telegram_update_shaped` fuzz
//! target and the replay of its corpus: every kind the relay reads (a
//! message, an edit, a channel post, a tap on a message still there or gone,
//! a chat member change) with chats, senders, texts and taps' data of any
//! value, an unknown field now and then, and a field given twice (JSON
//! readers differ on which one counts). Each body then goes through
//! [`super::update::check`]: what the relay takes says what the JSON says.

use arbitrary::Arbitrary;
use serde_json::{Value, json};

#[derive(Arbitrary, Debug)]
pub struct ShapedUpdate {
    update_id: Number,
    kind: Kind,
    /// A field of the update given a second time, with another value.
    twice: Option<(Field, Number)>,
    /// A field Telegram may add one day.
    unknown: Option<(String, Scalar)>,
}

#[derive(Arbitrary, Debug)]
enum Kind {
    Message(Msg),
    EditedMessage(Msg),
    ChannelPost(Msg),
    CallbackQuery(Tap),
    MyChatMember {
        chat: Chat,
        from: User,
        date: Number,
    },
    /// Not one of Telegram's kinds.
    Other(String, Scalar),
}

#[derive(Arbitrary, Debug, Clone, Copy)]
enum Field {
    UpdateId,
    ChatId,
    FromId,
    Text,
    Data,
}

/// Numbers near the edges of the types Telegram's fields have.
#[derive(Arbitrary, Debug, Clone, Copy)]
enum Number {
    Small(u8),
    Int(i32),
    Long(i64),
    Unsigned(u64),
    Float(i16),
    Text(i32),
}

impl Number {
    fn value(self) -> Value {
        match self {
            Number::Small(n) => json!(n),
            Number::Int(n) => json!(n),
            Number::Long(n) => json!(n),
            Number::Unsigned(n) => json!(n),
            Number::Float(n) => json!(f64::from(n) + 0.5),
            Number::Text(n) => json!(n.to_string()),
        }
    }
}

#[derive(Arbitrary, Debug, Clone)]
enum Scalar {
    Null,
    Bool(bool),
    Number(Number),
    Text(String),
}

impl Scalar {
    fn value(&self) -> Value {
        match self {
            Scalar::Null => Value::Null,
            Scalar::Bool(b) => json!(b),
            Scalar::Number(n) => n.value(),
            Scalar::Text(t) => json!(t),
        }
    }
}

#[derive(Arbitrary, Debug)]
struct Chat {
    id: Number,
    kind: ChatKind,
    title: Option<String>,
}

#[derive(Arbitrary, Debug)]
enum ChatKind {
    Private,
    Group,
    Supergroup,
    Channel,
    Other(String),
}

#[derive(Arbitrary, Debug)]
struct User {
    id: Number,
    is_bot: bool,
    first_name: String,
    username: Option<String>,
}

#[derive(Arbitrary, Debug)]
struct Msg {
    message_id: Number,
    date: Number,
    chat: Chat,
    from: Option<User>,
    text: Option<String>,
}

#[derive(Arbitrary, Debug)]
struct Tap {
    id: String,
    from: User,
    data: Option<String>,
    /// `None`: no message; `Some(false)`: the message, gone (`date` 0).
    message: Option<(bool, Msg)>,
    chat_instance: String,
}

fn chat(c: &Chat) -> Value {
    let kind = match &c.kind {
        ChatKind::Private => "private".to_string(),
        ChatKind::Group => "group".to_string(),
        ChatKind::Supergroup => "supergroup".to_string(),
        ChatKind::Channel => "channel".to_string(),
        ChatKind::Other(s) => s.clone(),
    };
    let mut v = json!({ "id": c.id.value(), "type": kind });
    match &c.title {
        Some(title) if kind == "private" => v["first_name"] = json!(title),
        Some(title) => v["title"] = json!(title),
        None => {}
    }
    v
}

fn user(u: &User) -> Value {
    let mut v = json!({ "id": u.id.value(), "is_bot": u.is_bot, "first_name": u.first_name });
    if let Some(name) = &u.username {
        v["username"] = json!(name);
    }
    v
}

fn message(m: &Msg, still_there: bool) -> Value {
    let date = if still_there {
        m.date.value()
    } else {
        json!(0)
    };
    let mut v = json!({ "message_id": m.message_id.value(), "date": date, "chat": chat(&m.chat) });
    if still_there {
        if let Some(from) = &m.from {
            v["from"] = user(from);
        }
        if let Some(text) = &m.text {
            v["text"] = json!(text);
        }
    }
    v
}

impl ShapedUpdate {
    /// The webhook body: compact JSON, with the field given twice (when
    /// there is one) written again after the first.
    pub fn render(&self) -> Vec<u8> {
        let (name, inner) = match &self.kind {
            Kind::Message(m) => ("message", message(m, true)),
            Kind::EditedMessage(m) => ("edited_message", message(m, true)),
            Kind::ChannelPost(m) => ("channel_post", message(m, true)),
            Kind::CallbackQuery(t) => {
                let mut v =
                    json!({ "id": t.id, "from": user(&t.from), "chat_instance": t.chat_instance });
                if let Some(data) = &t.data {
                    v["data"] = json!(data);
                }
                if let Some((there, m)) = &t.message {
                    v["message"] = message(m, *there);
                }
                ("callback_query", v)
            }
            Kind::MyChatMember {
                chat: c,
                from,
                date,
            } => (
                "my_chat_member",
                json!({ "chat": chat(c), "from": user(from), "date": date.value() }),
            ),
            Kind::Other(name, value) => (name.as_str(), value.value()),
        };
        let mut fields = vec![
            ("update_id".to_string(), self.update_id.value()),
            (name.to_string(), inner),
        ];
        if let Some((name, value)) = &self.unknown {
            fields.push((name.clone(), value.value()));
        }
        let mut out = String::from("{");
        for (i, (name, value)) in fields.iter().enumerate() {
            if i > 0 {
                out.push(',');
            }
            out.push_str(&json!(name).to_string());
            out.push(':');
            let mut value = value.clone();
            if let Some((field, again)) = self.twice {
                twice(&mut value, field, again);
            }
            out.push_str(&value.to_string());
        }
        if let Some((Field::UpdateId, again)) = self.twice {
            out.push_str(&format!(",\"update_id\":{}", again.value()));
        }
        out.push('}');
        out.replace(&format!("\"{}", escaped_twice()), "\"")
            .into_bytes()
    }
}

/// How serde_json writes [`TWICE`] inside a string.
fn escaped_twice() -> String {
    let quoted = json!(TWICE).to_string();
    quoted[1..quoted.len() - 1].to_string()
}

/// A key that the rendered text turns into `key` itself: serde_json keeps
/// one value per key, so the duplicate is made in the text.
const TWICE: &str = "\u{0}twice\u{0}";

/// Gives `field` a second value inside the object it belongs to.
fn twice(value: &mut Value, field: Field, again: Number) {
    let (target, key) = match field {
        Field::UpdateId => return,
        Field::ChatId => (value.get_mut("chat"), "id"),
        Field::FromId => (value.get_mut("from"), "id"),
        Field::Text => (Some(&mut *value), "text"),
        Field::Data => (Some(&mut *value), "data"),
    };
    if let Some(Value::Object(map)) = target
        && map.contains_key(key)
    {
        map.insert(format!("{TWICE}{key}"), again.value());
    }
}
