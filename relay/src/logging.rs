//! The relay's log: JSON lines on standard error, every line passed through
//! the token scrubber on its way out.
//!
//! The relay's own code logs ids, kinds and counts, and scrubs the errors
//! of the Telegram client; this writer is the last net under both, for a
//! token a dependency might print (a URL in a debug line): the exact bot
//! token and anything shaped like one become `<bot-token>`.

use crate::telegram::token::{BotToken, scrub, scrub_shape};
use std::io::Write;

/// Writes each formatted event scrubbed, in one write to standard error.
#[derive(Clone)]
pub struct ScrubbingWriter {
    token: Option<BotToken>,
}

impl ScrubbingWriter {
    pub fn new(token: Option<BotToken>) -> ScrubbingWriter {
        ScrubbingWriter { token }
    }
}

/// One event's bytes, scrubbed and written when dropped (the formatter
/// writes an event and then drops its writer).
pub struct Line {
    token: Option<BotToken>,
    buffer: Vec<u8>,
}

impl Write for Line {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.buffer.extend_from_slice(bytes);
        Ok(bytes.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        if self.buffer.is_empty() {
            return Ok(());
        }
        let text = String::from_utf8_lossy(&self.buffer);
        let clean = match &self.token {
            Some(token) => scrub(&text, token),
            None => scrub_shape(&text),
        };
        self.buffer.clear();
        let mut err = std::io::stderr().lock();
        err.write_all(clean.as_bytes())?;
        err.flush()
    }
}

impl Drop for Line {
    fn drop(&mut self) {
        let _ = self.flush();
    }
}

impl<'a> tracing_subscriber::fmt::MakeWriter<'a> for ScrubbingWriter {
    type Writer = Line;

    fn make_writer(&'a self) -> Line {
        Line {
            token: self.token.clone(),
            buffer: Vec::with_capacity(256),
        }
    }
}

/// Crates that log the bytes they carry at their finest level: tungstenite
/// writes every WebSocket frame at trace, and a frame is sealed (MAC'd),
/// not encrypted — the hello with its token, every message, every secret.
const PAYLOAD_LOGGERS: &[&str] = &["tungstenite", "tokio_tungstenite"];

/// An event of a crate that logs payloads at trace: never logged, whatever
/// `RUST_LOG` says (found by the attack round: `RUST_LOG=trace` logged
/// every server's token and every PIN).
pub fn carries_payloads(meta: &tracing::Metadata<'_>) -> bool {
    *meta.level() == tracing::Level::TRACE
        && PAYLOAD_LOGGERS.iter().any(|c| {
            meta.target()
                .strip_prefix(c)
                .is_some_and(|rest| rest.is_empty() || rest.starts_with("::"))
        })
}

/// Installs the relay's subscriber: JSON, `RUST_LOG` (default `info`) but
/// never a payload logger's trace, scrubbed.
pub fn init(token: Option<BotToken>) {
    use tracing_subscriber::layer::SubscriberExt;
    use tracing_subscriber::util::SubscriberInitExt;
    tracing_subscriber::fmt()
        .json()
        .with_writer(ScrubbingWriter::new(token))
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .finish()
        .with(tracing_subscriber::filter::filter_fn(|meta| {
            !carries_payloads(meta)
        }))
        .init();
}
