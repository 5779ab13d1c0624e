//! The owner's PIN: what a PIN action (turning prod mode off) needs on top
//! of a relay-signed tap. The Warden keeps only its argon2id hash, as a PHC
//! string in the state record `pin` (so it is under the integrity
//! baseline), with OWASP's parameters: 19 MiB, two passes, one lane. A
//! guess costs that much, and five wrong ones in a row lock PIN actions for
//! fifteen minutes (the caller keeps the count, `Attempts`).
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
use std::io::Read;

/// The state record holding the hash.
pub const RECORD: &str = "pin";
pub const MIN_LEN: usize = 6;
pub const MAX_LEN: usize = 64;
/// Wrong PINs in a row before PIN actions lock.
pub const MAX_FAILURES: u32 = 5;
pub const LOCK_S: u64 = 15 * 60;

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

/// Wrong PINs in a row, and the lock they lead to.
#[derive(Debug, Default)]
pub struct Attempts {
    failures: u32,
    locked_until: u64,
}

impl Attempts {
    /// `Err` with the reason while PIN actions are locked.
    pub fn check(&self, now: u64) -> Result<(), String> {
        if now < self.locked_until {
            return Err(format!(
                "PIN actions are locked for {} more seconds after {MAX_FAILURES} wrong PINs",
                self.locked_until - now
            ));
        }
        Ok(())
    }

    /// Records a wrong PIN; true when it locks PIN actions.
    pub fn failed(&mut self, now: u64) -> bool {
        self.failures += 1;
        if self.failures >= MAX_FAILURES {
            self.failures = 0;
            self.locked_until = now + LOCK_S;
            return true;
        }
        false
    }

    pub fn succeeded(&mut self) {
        self.failures = 0;
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
        assert!(weakness("correct horse").is_none());
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

    #[test]
    fn five_wrong_pins_lock_pin_actions_for_fifteen_minutes() {
        let mut a = Attempts::default();
        for _ in 0..4 {
            assert!(!a.failed(100));
        }
        assert!(a.check(100).is_ok());
        assert!(a.failed(100));
        assert!(a.check(100 + LOCK_S - 1).is_err());
        assert!(a.check(100 + LOCK_S).is_ok());
        a.failed(2000);
        a.succeeded();
        for _ in 0..4 {
            assert!(!a.failed(2000));
        }
    }
}
