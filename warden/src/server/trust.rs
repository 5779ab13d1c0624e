//! What the Trust page shows besides the status (`Request::Trust`): the
//! policy rendering verbatim, the fence list, and the journal's last
//! verification — kept here from the last check, so that no peer can make
//! the Warden read the whole journal on demand.

#![forbid(unsafe_code)]

use super::Shared;
use crate::journal::{AuditKey, verify};
use aromba_warden_proto::{MAX_LISTED, Response};
use std::time::Duration;

/// Verifies the whole journal with the audit key, holding it still while
/// it is read: whether it holds, and the report in words.
pub(super) fn verify_journal(shared: &Shared) -> (bool, String) {
    let layout = &shared.options.layout;
    let path = layout.journal_file();
    let key = match layout.audit_key() {
        k if k.exists() => AuditKey::load(&k, Some(&layout.journal_dir)).ok(),
        _ => None,
    };
    let _j = shared.journal.lock().unwrap_or_else(|p| p.into_inner());
    match verify(&path, key.as_ref()) {
        Ok(r) => (true, r.to_string()),
        Err(e) => (false, e.to_string()),
    }
}

/// The journal's verification, kept for the Trust page with its time
/// (at start and with each integrity check).
pub(super) fn check_journal(shared: &Shared) {
    let (ok, report) = verify_journal(shared);
    let at = crate::journal::time::rfc3339(
        std::time::UNIX_EPOCH + Duration::from_secs(shared.options.clock.now()),
    );
    let said = if ok {
        format!("verified at {at}: {report}")
    } else {
        format!("BROKEN at {at}: {report}")
    };
    *shared
        .journal_checked
        .lock()
        .unwrap_or_else(|p| p.into_inner()) = said;
}

/// `Request::Trust`.
pub(super) fn trust(shared: &Shared) -> Response {
    let fenced = shared.options.layout.fenced_paths();
    Response::Trust {
        policy: crate::policy::render(),
        fences: fenced
            .iter()
            .take(MAX_LISTED)
            .map(|p| p.display().to_string())
            .collect(),
        fences_total: fenced.len() as u64,
        journal: shared
            .journal_checked
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone(),
    }
}
