//! What the relays in a test binary log, captured: the relay runs in the
//! test's process, so one global subscriber sees all of it.

use std::io::Write;
use std::sync::{Arc, Mutex, OnceLock};

/// Everything every relay in this test binary logs from the first call
/// on, as the binary's JSON logs would carry it (info, and everything of
/// the relay's own crates).
pub fn captured() -> Arc<Mutex<Vec<u8>>> {
    static LOGS: OnceLock<Arc<Mutex<Vec<u8>>>> = OnceLock::new();
    LOGS.get_or_init(|| {
        let logs = Arc::new(Mutex::new(Vec::new()));
        let sink = logs.clone();
        let subscriber = tracing_subscriber::fmt()
            .json()
            .with_env_filter(tracing_subscriber::EnvFilter::new(
                "info,aromba_relay=trace,aromba_relay_proto=trace",
            ))
            .with_writer(move || LogWriter(sink.clone()))
            .finish();
        tracing::subscriber::set_global_default(subscriber)
            .expect("nothing else in this test binary sets a subscriber");
        logs
    })
    .clone()
}

/// The captured logs so far, as text.
pub fn text(logs: &Mutex<Vec<u8>>) -> String {
    String::from_utf8_lossy(&logs.lock().unwrap_or_else(|p| p.into_inner())).into_owned()
}

struct LogWriter(Arc<Mutex<Vec<u8>>>);

impl Write for LogWriter {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}
