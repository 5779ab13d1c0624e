//! The checks of the `sse_stream` fuzz target, shared with the corpus
//! replay in `agent/tests/fuzz_corpora.rs` (the target includes this file
//! by path).
//!
//! An input is a selector byte (bit 0: OpenAI or Anthropic), a seed byte
//! for the cuts, then the body of an event stream. The stream is fed whole,
//! a byte at a time, and in pieces the seed picks; every way gives the same
//! outcome (the same reply, or the same error), the same text and usage at
//! the end, and the text shown so far is always a prefix of the final text.

use aromba::assistant::model::{Reply, Usage};
use aromba::assistant::stream::{AnthropicStream, Events, OpenAiStream};

#[derive(Debug, PartialEq)]
struct Outcome {
    reply: Result<Reply, String>,
    text: String,
    usage: Usage,
}

/// Feeds `stream` in pieces of the given sizes (the last piece takes what is
/// left), stopping at the first error as a caller does.
fn run<E: Events>(
    stream: &[u8],
    sizes: &mut dyn Iterator<Item = usize>,
) -> Result<Outcome, String> {
    let mut events = E::default();
    let mut rest = stream;
    let mut shown: Vec<String> = Vec::new();
    let mut failed = None;
    while !rest.is_empty() {
        let size = sizes.next().unwrap_or(rest.len()).clamp(1, rest.len());
        let (piece, after) = rest.split_at(size);
        rest = after;
        if let Err(e) = events.feed(piece) {
            failed = Some(e.to_string());
            break;
        }
        shown.push(events.text().to_string());
    }
    let text = events.text().to_string();
    if let Some(early) = shown.iter().find(|s| !text.starts_with(s.as_str())) {
        return Err(format!(
            "text shown early {early:?} is not a prefix of {text:?}"
        ));
    }
    let usage = events.usage();
    let reply = match failed {
        Some(e) => Err(e),
        None => events.reply().map_err(|e| e.to_string()),
    };
    Ok(Outcome { reply, text, usage })
}

/// Sizes from a seed: a small xorshift, pieces of 1 to 64 bytes.
fn seeded(seed: u8) -> impl Iterator<Item = usize> {
    let mut state = u32::from(seed) | 0x9e37_7900;
    let most = usize::from(seed % 64) + 1;
    std::iter::repeat_with(move || {
        state ^= state << 13;
        state ^= state >> 17;
        state ^= state << 5;
        usize::try_from(state).unwrap_or(0) % most + 1
    })
}

/// The outcomes agree, fed whole, a byte at a time and in pieces: the same
/// reply or the same error, the same text and usage. (A piece holding good
/// lines and then a line that is not UTF-8 was once refused before its good
/// lines were read, so the text after the error depended on the cutting:
/// found by the fuzzer, seed `crash_not_utf8_line_after_text_in_one_piece`,
/// and fixed.)
fn same_every_way<E: Events>(stream: &[u8], seed: u8) -> Result<(), String> {
    let whole = run::<E>(stream, &mut std::iter::empty())?;
    let bytewise = run::<E>(stream, &mut std::iter::repeat(1))?;
    if bytewise != whole {
        return Err(format!(
            "a byte at a time gives {bytewise:?}, whole gives {whole:?}"
        ));
    }
    let pieces = run::<E>(stream, &mut seeded(seed))?;
    if pieces != whole {
        return Err(format!(
            "in pieces (seed {seed}) gives {pieces:?}, whole gives {whole:?}"
        ));
    }
    Ok(())
}

/// Every check on one input; `Err` says which property broke.
pub fn check(data: &[u8]) -> Result<(), String> {
    let [selector, seed, stream @ ..] = data else {
        return Ok(());
    };
    if selector & 1 == 0 {
        same_every_way::<OpenAiStream>(stream, *seed)
    } else {
        same_every_way::<AnthropicStream>(stream, *seed)
    }
}
