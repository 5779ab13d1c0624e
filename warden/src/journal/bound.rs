//! How much one journal line may hold. Applied inside `Journal::append`, so
//! no caller can write an unbounded field: a request's arguments, a
//! decoder's error echoing the request, a note, a refused path.
//!
//! Every string value is cut to [`STRING_BOUND`] bytes (on a UTF-8
//! boundary); every list keeps whole elements only while their JSON stays
//! within [`LIST_BOUND`] bytes. A cut top-level field gets a sibling that
//! records what it was: `<field>_len`, its original length in bytes (for a
//! list, the bytes of all its strings), and for a list `<field>_count`, its
//! original number of elements. Numbers, booleans and hashes (64 hex
//! characters) are never touched. Bounding is idempotent: a bounded line
//! bounds to itself.

#![forbid(unsafe_code)]

use serde_json::{Map, Value};

/// The most bytes one string value keeps.
pub const STRING_BOUND: usize = 512;
/// The most bytes (as JSON) one list keeps.
pub const LIST_BOUND: usize = 2048;

/// What a cut field was before it was cut.
struct Cut {
    len: usize,
    count: Option<usize>,
}

/// Bounds every field of a line (and, inside objects, theirs).
pub(super) fn bound_fields(fields: &mut Map<String, Value>) {
    let keys: Vec<String> = fields.keys().cloned().collect();
    for key in keys {
        let Some(value) = fields.get_mut(&key) else {
            continue;
        };
        if let Some(cut) = bound_value(value) {
            fields.insert(format!("{key}_len"), Value::from(cut.len));
            if let Some(count) = cut.count {
                fields.insert(format!("{key}_count"), Value::from(count));
            }
        }
    }
}

/// Bounds one value in place; says what it was when it was cut.
fn bound_value(value: &mut Value) -> Option<Cut> {
    match value {
        Value::String(s) => {
            let len = s.len();
            if len <= STRING_BOUND {
                return None;
            }
            s.truncate(s.floor_char_boundary(STRING_BOUND));
            Some(Cut { len, count: None })
        }
        Value::Array(items) => {
            let len: usize = items.iter().map(string_bytes).sum();
            let count = items.len();
            let mut cut = false;
            // `[` and `]`; each element then costs its JSON and a comma.
            let mut used = 2;
            let mut keep = 0;
            for item in items.iter_mut() {
                cut |= bound_value(item).is_some();
                let cost = json_len(item) + 1;
                if used + cost > LIST_BOUND {
                    break;
                }
                used += cost;
                keep += 1;
            }
            if keep < count {
                items.truncate(keep);
                cut = true;
            }
            cut.then_some(Cut {
                len,
                count: Some(count),
            })
        }
        Value::Object(inner) => {
            bound_fields(inner);
            None
        }
        Value::Null | Value::Bool(_) | Value::Number(_) => None,
    }
}

/// The bytes of every string in a value.
fn string_bytes(value: &Value) -> usize {
    match value {
        Value::String(s) => s.len(),
        Value::Array(items) => items.iter().map(string_bytes).sum(),
        Value::Object(m) => m.values().map(string_bytes).sum(),
        Value::Null | Value::Bool(_) | Value::Number(_) => 0,
    }
}

fn json_len(value: &Value) -> usize {
    // Serialising a JSON value cannot fail.
    serde_json::to_string(value).map_or(0, |s| s.len())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn one(key: &str, value: Value) -> Map<String, Value> {
        let mut m = Map::new();
        m.insert(key.into(), value);
        bound_fields(&mut m);
        m
    }

    #[test]
    fn a_long_string_is_cut_on_a_character_boundary_with_its_length() {
        // 'é' is two bytes: 300 of them put byte 512 inside no character.
        let s = "a".to_string() + &"é".repeat(300);
        let m = one("error", Value::from(s.as_str()));
        let kept = m["error"].as_str().unwrap();
        assert!(kept.len() <= STRING_BOUND && s.starts_with(kept));
        assert_eq!(kept.len(), 511);
        assert_eq!(m["error_len"], Value::from(s.len()));
    }

    #[test]
    fn short_strings_numbers_and_hashes_are_untouched() {
        let hash = "ab".repeat(32);
        let mut m = Map::new();
        m.insert("stdout_sha256".into(), Value::from(hash.as_str()));
        m.insert("exit_code".into(), Value::from(0));
        m.insert("cut".into(), Value::from(false));
        let before = m.clone();
        bound_fields(&mut m);
        assert_eq!(m, before);
    }

    #[test]
    fn a_long_list_keeps_what_fits_and_says_what_it_was() {
        let args: Vec<String> = (0..5000).map(|i| format!("-x{i}")).collect();
        let m = one("args", Value::from(args.clone()));
        let kept = m["args"].as_array().unwrap();
        assert!(!kept.is_empty() && kept.len() < args.len());
        assert!(json_len(&m["args"]) <= LIST_BOUND);
        assert_eq!(kept[0], Value::from("-x0"), "the list keeps its start");
        assert_eq!(m["args_count"], Value::from(5000));
        let bytes: usize = args.iter().map(String::len).sum();
        assert_eq!(m["args_len"], Value::from(bytes));
    }

    #[test]
    fn a_list_of_long_strings_cuts_each_and_stays_within_its_bound() {
        let args = vec!["y".repeat(60_000); 3];
        let m = one("args", Value::from(args));
        assert!(json_len(&m["args"]) <= LIST_BOUND);
        for a in m["args"].as_array().unwrap() {
            assert_eq!(a.as_str().unwrap().len(), STRING_BOUND);
        }
        assert_eq!(m["args_len"], Value::from(180_000));
        assert_eq!(m["args_count"], Value::from(3));
    }

    #[test]
    fn strings_inside_objects_are_bounded_too() {
        let mut inner = Map::new();
        inner.insert("why".into(), Value::from("z".repeat(9000)));
        let m = one("detail", Value::Object(inner));
        assert_eq!(m["detail"]["why"].as_str().unwrap().len(), STRING_BOUND);
        assert_eq!(m["detail"]["why_len"], Value::from(9000));
    }

    #[test]
    fn bounding_is_idempotent() {
        let mut m = Map::new();
        m.insert("error".into(), Value::from("e".repeat(70_000)));
        m.insert("args".into(), Value::from(vec!["a".repeat(700); 40]));
        bound_fields(&mut m);
        let once = m.clone();
        bound_fields(&mut m);
        assert_eq!(m, once);
    }
}
