//! JSON that can be read only one way: no object in it names a key twice.
//!
//! Parsers disagree on a key given twice (teloxide's `Update` took the
//! first `message`, a plain reading of the same bytes the last: found by
//! the fuzz campaign, `fuzz/corpus/telegram_update/message_given_twice`),
//! so an update holding one could make the relay act on another chat or
//! other words than a reader of the JSON sees. Telegram never sends one;
//! the webhook and the poller drop it as malformed.

use serde::de::{Deserialize, Deserializer, Error, MapAccess, SeqAccess, Visitor};
use std::collections::HashSet;

/// Whether `bytes` are JSON in which no object names a key twice (keys
/// compared as read, escapes decoded: `"a"` and `"\u0061"` are one key).
pub fn has_one_reading(bytes: &[u8]) -> bool {
    serde_json::from_slice::<OneReading>(bytes).is_ok()
}

/// Any JSON value, read only for its keys.
struct OneReading;

impl<'de> Deserialize<'de> for OneReading {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<OneReading, D::Error> {
        d.deserialize_any(Keys)
    }
}

struct Keys;

impl<'de> Visitor<'de> for Keys {
    type Value = OneReading;

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("JSON")
    }

    fn visit_bool<E: Error>(self, _: bool) -> Result<OneReading, E> {
        Ok(OneReading)
    }

    fn visit_i64<E: Error>(self, _: i64) -> Result<OneReading, E> {
        Ok(OneReading)
    }

    fn visit_u64<E: Error>(self, _: u64) -> Result<OneReading, E> {
        Ok(OneReading)
    }

    fn visit_f64<E: Error>(self, _: f64) -> Result<OneReading, E> {
        Ok(OneReading)
    }

    fn visit_str<E: Error>(self, _: &str) -> Result<OneReading, E> {
        Ok(OneReading)
    }

    fn visit_unit<E: Error>(self) -> Result<OneReading, E> {
        Ok(OneReading)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<OneReading, A::Error> {
        while seq.next_element::<OneReading>()?.is_some() {}
        Ok(OneReading)
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<OneReading, A::Error> {
        let mut seen = HashSet::new();
        while let Some(key) = map.next_key::<String>()? {
            if !seen.insert(key) {
                return Err(A::Error::custom("an object names a key twice"));
            }
            map.next_value::<OneReading>()?;
        }
        Ok(OneReading)
    }
}

#[cfg(test)]
mod tests {
    use super::has_one_reading;

    #[test]
    fn a_key_named_twice_anywhere_is_refused_also_when_escaped() {
        assert!(has_one_reading(br#"{"a": 1, "b": [{"c": 2}, {"c": 3}]}"#));
        assert!(!has_one_reading(br#"{"a": 1, "a": 2}"#));
        assert!(!has_one_reading(br#"{"x": [{"m": {"c": 1, "c": 1}}]}"#));
        assert!(!has_one_reading(br#"{"a": 1, "\u0061": 2}"#));
        assert!(!has_one_reading(b"{\"a\": 1"));
    }
}
