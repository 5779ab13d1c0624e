//! The checks of the `worker_config` fuzz target, shared with the corpus
//! replay in `agent/tests/fuzz_corpora.rs` (the target includes this file
//! by path).
//!
//! An input is a selector byte (bit 0: `relay.toml` or `network.toml`),
//! then the file's text. What parses renders (as `aromba pair` writes it)
//! to text that parses to the same configuration, and rendering that again
//! gives the same text; what is refused is refused without a panic.

use aromba::config::{NetworkConfig, RelayConfig};
use std::path::Path;

fn relay(text: &str) -> Result<(), String> {
    let path = Path::new("/etc/aromba/relay.toml");
    let Ok(config) = RelayConfig::parse(path, text) else {
        return Ok(());
    };
    let rendered = config.render();
    let again = RelayConfig::parse(path, &rendered)
        .map_err(|e| format!("{config:?} renders as {rendered:?}, refused: {e}"))?;
    if format!("{again:?}") != format!("{config:?}")
        || again.token.expose() != config.token.expose()
    {
        return Err(format!(
            "{config:?} renders as {rendered:?}, parses as {again:?}"
        ));
    }
    if again.render() != rendered {
        return Err(format!("{config:?} renders differently the second time"));
    }
    Ok(())
}

fn network(text: &str) -> Result<(), String> {
    let path = Path::new("/etc/aromba/network.toml");
    let Ok(config) = NetworkConfig::parse(path, text) else {
        return Ok(());
    };
    let rendered = config.render();
    match NetworkConfig::parse(path, &rendered) {
        Ok(again) if again == config => {}
        other => {
            return Err(format!(
                "{config:?} renders as {rendered:?}, parses as {other:?}"
            ));
        }
    }
    Ok(())
}

/// Every check on one input; `Err` says which property broke.
pub fn check(data: &[u8]) -> Result<(), String> {
    let Some((selector, rest)) = data.split_first() else {
        return Ok(());
    };
    let Ok(text) = std::str::from_utf8(rest) else {
        return Ok(());
    };
    if selector & 1 == 0 {
        relay(text)
    } else {
        network(text)
    }
}
