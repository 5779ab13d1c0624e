//! Telegram's signature over Mini App launches, in the tests: the test key
//! pair of `keys/test/telegram-launch.*` (a test Warden pins its public
//! half at install), a test bot and the paired person.

pub use aromba_botfake::launch::{LaunchKey, Person, launch, signature};

/// The public key a test Warden pins with `--telegram-key`.
pub const TEST_PUB: &str = include_str!("../../keys/test/telegram-launch.pub");
const TEST_SEED: &str = include_str!("../../keys/test/telegram-launch.seed");

/// The bot the tests' launches are for (its token's number is its id).
pub const BOT_TOKEN: &str = "7000000001:TEST-launch-token-not-a-secret";
pub const BOT_ID: u64 = 7_000_000_001;

/// The paired person's Telegram user id (their private chat's id).
pub const PERSON: i64 = 4242;

/// The test key Telegram's part signs with.
pub fn test_key() -> LaunchKey {
    LaunchKey::from_seed_hex(TEST_SEED).expect("keys/test/telegram-launch.seed is a seed")
}

/// The public key, trimmed, as `--telegram-key` takes it.
pub fn test_pub() -> &'static str {
    TEST_PUB.trim()
}

/// Launch data of Telegram user `user` opening the test bot's app from a
/// direct link with `start_param`, at `now`, signed with the test key.
pub fn launch_of(user: i64, start_param: Option<&str>, now: u64) -> String {
    launch(
        &test_key(),
        BOT_TOKEN,
        &Person::new(user, "Ana"),
        start_param,
        now,
    )
}

/// The PIN sealed as the Mini App's page seals it (`seal.js`) for the
/// Warden key the proposal's `start_param` names, with a fresh key and
/// nonce: what the page sends with an approval that needs the PIN.
/// Panics on a `start_param` with no key (a test's mistake).
pub fn seal_pin(start_param: &str, pin: &str) -> String {
    let warden_hex = start_param
        .rsplit('_')
        .next()
        .filter(|k| k.len() == 64)
        .expect("a start_param with a PIN key");
    let mut random = [0u8; 44];
    std::io::Read::read_exact(
        &mut std::fs::File::open("/dev/urandom").expect("/dev/urandom"),
        &mut random,
    )
    .expect("random bytes");
    let (page_secret, nonce) = random.split_at(32);
    seal_pin_with(
        warden_hex,
        start_param.as_bytes(),
        pin.as_bytes(),
        page_secret.try_into().expect("32 bytes"),
        nonce.try_into().expect("12 bytes"),
    )
}

/// A PIN sealed as the page seals it, with everything chosen by the
/// caller (an attacker's seal): the Warden key `warden_key_hex`, the
/// associated data `aad`, the bytes `pin` (not necessarily text), the
/// page's secret and the nonce.
pub fn seal_pin_with(
    warden_key_hex: &str,
    aad: &[u8],
    pin: &[u8],
    page_secret: [u8; 32],
    nonce: [u8; 12],
) -> String {
    use aes_gcm::aead::Aead;
    use aes_gcm::{Aes256Gcm, KeyInit, Nonce};
    use ed25519_compact::x25519;
    let warden = x25519::PublicKey::from_slice(
        &aromba_warden_proto::decode_hex(warden_key_hex).expect("a hex key"),
    )
    .expect("an X25519 key");
    let page_secret = x25519::SecretKey::from_slice(&page_secret).expect("a secret");
    let page = page_secret.recover_public_key().expect("a public key");
    let shared = warden.dh(&page_secret).expect("a shared secret");
    let salt = [page.as_ref(), warden.as_ref()].concat();
    let mut key = [0u8; 32];
    hkdf::Hkdf::<sha2::Sha256>::new(Some(&salt), shared.as_ref())
        .expand(b"aromba pin seal v1", &mut key)
        .expect("32 bytes");
    let sealed = Aes256Gcm::new_from_slice(&key)
        .expect("a 32-byte key")
        .encrypt(
            Nonce::from_slice(&nonce),
            aes_gcm::aead::Payload { msg: pin, aad },
        )
        .expect("a short PIN");
    aromba_botfake::launch::base64url(&[page.as_ref(), &nonce, &sealed].concat())
}
