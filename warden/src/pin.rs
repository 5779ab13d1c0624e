//! The owner's PIN: what a PIN action (turning prod mode off) needs on top
//! of a relay-signed tap. The Warden keeps only its argon2id hash, as a PHC
//! string in the state record `pin` (so it is under the integrity
//! baseline), with OWASP's parameters: 19 MiB, two passes, one lane. A
//! guess costs that much, and five wrong ones in a row lock PIN actions for
//! fifteen minutes.
//!
//! The count of wrong PINs ([`Attempts`]) lives in the Warden's state, in
//! [`attempts_file`], so a restart does not clear it. Each attempt is
//! counted as wrong, and written, before the PIN is checked, and only a
//! right PIN takes it back: a Warden killed in the middle of a check has
//! counted it. The file is not in the integrity baseline, for the reasons
//! the ladder's file is not: it changes with every wrong PIN, so keeping a
//! baseline of it would mean re-taking the baseline on every guess (and a
//! Warden killed between the two writes would wake up to a false mismatch
//! and Cut); and the only change that helps a guesser — removing it —
//! needs root, who can set a new PIN outright. It is guarded on its own
//! terms instead: root's, mode 0600, written atomically, and a file that is
//! not a regular file, not root's, readable by others or malformed locks
//! PIN actions rather than resetting the count.
//!
//! ```
//! use aromba_warden::pin;
//! let hash = pin::hash("428193").unwrap();
//! assert!(pin::matches(&hash, "428193"));
//! assert!(!pin::matches(&hash, "428194"));
//! ```

#![forbid(unsafe_code)]

use argon2::password_hash::{PasswordHash, PasswordHasher, PasswordVerifier, SaltString};
use argon2::{Algorithm, Argon2, Params, Version};
use serde_json::{Map, Value};
use std::io::Read;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

/// The state record holding the hash.
pub const RECORD: &str = "pin";
pub const MIN_LEN: usize = 6;
pub const MAX_LEN: usize = 64;
/// Wrong PINs in a row before PIN actions lock.
pub const MAX_FAILURES: u32 = aromba_warden_proto::PIN_MAX_FAILURES;
pub const LOCK_S: u64 = aromba_warden_proto::PIN_LOCK_S;

fn argon2id() -> Result<Argon2<'static>, String> {
    // OWASP's first argon2id setting: m = 19 MiB, t = 2, p = 1.
    let params = Params::new(19 * 1024, 2, 1, None).map_err(|e| e.to_string())?;
    Ok(Argon2::new(Algorithm::Argon2id, Version::V0x13, params))
}

/// Why a PIN is not acceptable as a new one; `None` when it is.
pub fn weakness(pin: &str) -> Option<String> {
    let n = pin.chars().count();
    if n < MIN_LEN {
        return Some(format!("a PIN has at least {MIN_LEN} characters"));
    }
    if n > MAX_LEN {
        return Some(format!("a PIN has at most {MAX_LEN} characters"));
    }
    if pin.chars().any(char::is_control) {
        return Some("a PIN has no control characters".into());
    }
    if pin.chars().any(char::is_whitespace) {
        return Some("a PIN is one word, with no spaces".into());
    }
    if !pin.chars().any(char::is_numeric) {
        return Some("a PIN has at least one digit".into());
    }
    if !aromba_warden_proto::could_be_pin(pin) {
        return Some("a PIN does not start with / and holds no invisible character".into());
    }
    let b = pin.as_bytes();
    if b.iter().all(|&c| c == b[0]) {
        return Some("a PIN of one repeated character is too easy to guess".into());
    }
    let run = |step: i16| {
        b.windows(2)
            .all(|w| w[0].is_ascii_digit() && i16::from(w[1]) - i16::from(w[0]) == step)
            && b[b.len() - 1].is_ascii_digit()
    };
    if run(1) || run(-1) {
        return Some("a PIN of consecutive digits is too easy to guess".into());
    }
    None
}

/// The PHC string of `pin`'s argon2id hash with a fresh random salt.
pub fn hash(pin: &str) -> Result<String, String> {
    if let Some(why) = weakness(pin) {
        return Err(why);
    }
    let mut salt = [0u8; 16];
    std::fs::File::open("/dev/urandom")
        .and_then(|mut f| f.read_exact(&mut salt))
        .map_err(|e| format!("cannot read a salt from /dev/urandom: {e}"))?;
    let salt = SaltString::encode_b64(&salt).map_err(|e| e.to_string())?;
    argon2id()?
        .hash_password(pin.as_bytes(), &salt)
        .map(|h| h.to_string())
        .map_err(|e| format!("cannot hash the PIN: {e}"))
}

/// Whether `pin` matches `phc`. A hash that is not argon2id with at least
/// the parameters above never matches: a weakened record is no shortcut.
pub fn matches(phc: &str, pin: &str) -> bool {
    let Ok(parsed) = PasswordHash::new(phc.trim()) else {
        return false;
    };
    if parsed.algorithm.as_str() != "argon2id" {
        return false;
    }
    let Ok(params) = Params::try_from(&parsed) else {
        return false;
    };
    if params.m_cost() < 19 * 1024 || params.t_cost() < 2 {
        return false;
    }
    let Ok(a) = argon2id() else {
        return false;
    };
    a.verify_password(pin.as_bytes(), &parsed).is_ok()
}

/// Where the count of wrong PINs is kept.
pub fn attempts_file(layout: &crate::layout::Layout) -> PathBuf {
    layout.state_dir.join("pin-attempts.json")
}

/// Wrong PINs in a row, and the lock they lead to.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Attempts {
    failures: u32,
    locked_until: u64,
}

impl Attempts {
    /// The count at `path`; none when there is no file. A file that cannot
    /// be trusted is an `Err`, which the caller treats as locked.
    pub fn load(path: &Path) -> Result<Attempts, String> {
        let meta = match std::fs::symlink_metadata(path) {
            Ok(m) => m,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Attempts::default()),
            Err(e) => return Err(format!("cannot read the count of wrong PINs: {e}")),
        };
        if !meta.file_type().is_file() || meta.uid() != 0 || meta.mode() & 0o077 != 0 {
            return Err(
                "the count of wrong PINs is not a private file of root's; PIN actions stay locked until it is removed".into(),
            );
        }
        let bytes =
            std::fs::read(path).map_err(|e| format!("cannot read the count of wrong PINs: {e}"))?;
        let v: Value = serde_json::from_slice(&bytes).map_err(|_| {
            "the count of wrong PINs is malformed; PIN actions stay locked".to_string()
        })?;
        let n = |k: &str| v.get(k).and_then(Value::as_u64);
        match (n("failures"), n("locked_until")) {
            (Some(f), Some(until)) if v.as_object().is_some_and(|o| o.len() == 2) => Ok(Attempts {
                failures: u32::try_from(f).unwrap_or(u32::MAX),
                locked_until: until,
            }),
            _ => Err("the count of wrong PINs is malformed; PIN actions stay locked".into()),
        }
    }

    /// Writes the count atomically: a temporary file, `fsync`, `rename`,
    /// `fsync` of the directory.
    pub fn save(&self, path: &Path) -> std::io::Result<()> {
        let mut m = Map::new();
        m.insert("failures".into(), Value::from(self.failures));
        m.insert("locked_until".into(), Value::from(self.locked_until));
        let bytes = serde_json::to_vec(&Value::Object(m)).unwrap_or_default();
        crate::atomic_file::replace(path, &bytes, 0o600)
    }

    /// `Err` with the reason while PIN actions are locked. A count already
    /// at the limit — the last attempt's check never finished — locks them
    /// now.
    pub fn check(&mut self, now: u64) -> Result<(), String> {
        if self.failures >= MAX_FAILURES {
            self.lock(now);
        }
        if now < self.locked_until {
            return Err(format!(
                "PIN actions are locked for {} more seconds after {MAX_FAILURES} wrong PINs",
                self.locked_until - now
            ));
        }
        Ok(())
    }

    /// Counts an attempt as wrong before it is checked; [`succeeded`]
    /// takes it back.
    ///
    /// [`succeeded`]: Attempts::succeeded
    pub fn begin(&mut self) {
        self.failures = self.failures.saturating_add(1);
    }

    /// After a wrong PIN, counted by [`begin`]: true when it locks PIN
    /// actions.
    ///
    /// [`begin`]: Attempts::begin
    pub fn failed(&mut self, now: u64) -> bool {
        if self.failures >= MAX_FAILURES {
            self.lock(now);
            return true;
        }
        false
    }

    pub fn succeeded(&mut self) {
        self.failures = 0;
    }

    fn lock(&mut self, now: u64) {
        self.failures = 0;
        self.locked_until = now + LOCK_S;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_hash_is_argon2id_at_owasp_parameters_and_salted() {
        let a = hash("731904").unwrap();
        let b = hash("731904").unwrap();
        assert!(a.starts_with("$argon2id$v=19$m=19456,t=2,p=1$"), "{a}");
        assert_ne!(a, b, "a fresh salt each time");
        assert!(matches(&a, "731904") && matches(&b, "731904"));
        assert!(!matches(&a, "731905") && !matches(&a, ""));
    }

    #[test]
    fn refuses_weak_pins() {
        for weak in ["12345", "000000", "123456", "987654", "aaaaaaa", "12\n3456"] {
            assert!(weakness(weak).is_some(), "{weak:?}");
            assert!(hash(weak).is_err());
        }
        assert!(weakness(&"7".repeat(65)).is_some());
        assert!(weakness("284710").is_none());
        assert!(weakness("Tr0ub4dor&3").is_none());
    }

    /// A PIN is one word with a digit, so that the Worker can tell which
    /// chat messages could be it and keep those from the model.
    #[test]
    fn refuses_a_pin_that_could_not_be_told_from_a_question() {
        for wide in [
            "correct horse 7",
            "correcthorse",
            "/start12",
            "ab\u{202E}12cd",
        ] {
            assert!(weakness(wide).is_some(), "{wide:?}");
        }
    }

    #[test]
    fn a_weakened_or_foreign_hash_never_matches() {
        let weak = Argon2::new(
            Algorithm::Argon2id,
            Version::V0x13,
            Params::new(8, 1, 1, None).unwrap(),
        )
        .hash_password(b"731904", &SaltString::encode_b64(&[1u8; 16]).unwrap())
        .unwrap()
        .to_string();
        assert!(!matches(&weak, "731904"));
        assert!(!matches("731904", "731904"));
        assert!(!matches("", ""));
    }

    fn wrong(a: &mut Attempts, now: u64) -> bool {
        a.begin();
        a.failed(now)
    }

    #[test]
    fn five_wrong_pins_lock_pin_actions_for_fifteen_minutes() {
        let mut a = Attempts::default();
        for _ in 0..4 {
            assert!(!wrong(&mut a, 100));
        }
        assert!(a.check(100).is_ok());
        assert!(wrong(&mut a, 100));
        assert!(a.check(100 + LOCK_S - 1).is_err());
        assert!(a.check(100 + LOCK_S).is_ok());
        wrong(&mut a, 2000);
        a.begin();
        a.succeeded();
        for _ in 0..4 {
            assert!(!wrong(&mut a, 2000));
        }
    }

    #[test]
    fn a_check_that_never_finished_counts_as_wrong() {
        let mut a = Attempts::default();
        for _ in 0..4 {
            wrong(&mut a, 100);
        }
        // The fifth is counted before it is checked, and the check never
        // ends (the Warden was killed): the next attempt finds it locked.
        a.begin();
        assert!(a.check(101).is_err());
        assert!(a.check(101 + LOCK_S).is_ok());
    }

    #[test]
    fn the_count_survives_a_write_and_an_untrusted_file_locks() {
        let dir = std::env::temp_dir().join(format!("aromba-pin-count-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("pin-attempts.json");
        assert_eq!(Attempts::load(&path).unwrap(), Attempts::default());
        let mut a = Attempts::default();
        wrong(&mut a, 100);
        a.save(&path).unwrap();
        assert_eq!(Attempts::load(&path).unwrap(), a);
        for bad in [
            &b"{\"failures\":1}"[..],
            b"[]",
            b"",
            b"{\"failures\":1,\"locked_until\":0,\"x\":1}",
        ] {
            std::fs::write(&path, bad).unwrap();
            assert!(
                Attempts::load(&path).is_err(),
                "{:?}",
                String::from_utf8_lossy(bad)
            );
        }
        a.save(&path).unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
        assert!(Attempts::load(&path).is_err(), "readable by others");
        std::fs::remove_file(&path).unwrap();
        std::os::unix::fs::symlink("/etc/hostname", &path).unwrap();
        assert!(Attempts::load(&path).is_err(), "a link");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
