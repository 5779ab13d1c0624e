#![forbid(unsafe_code)]

use super::*;

/// RFC 7748's Bob: the Warden's key of the vector.
const WARDEN_SECRET: &str = "5dab087e624a8a4b79e17f8b83800ee66f3bb1292618b6fd1c2f8b27ff88e0eb";
/// What the page's `seal.js` made under Node's WebCrypto for PIN "428193"
/// (`scripts/seal-vector.js`).
const PAGE_SEALED: &str =
    "hSDwCYkwp1R0i33ctD73Wg2_Og0mOBr066SpjqqbTmoAAQIDBAUGBwgJCgtPCI9tb5NCvjPcnC096s2UmxSKNC20";

fn warden() -> SealKey {
    SealKey::from_secret_hex(WARDEN_SECRET).unwrap()
}

fn param() -> String {
    format!(
        "00112233445566778899aabbccddeeff_{}_{}",
        "0".repeat(64),
        warden().public_hex()
    )
}

/// Seals as the page does, with the page's secret and nonce given.
fn seal_with(public_hex: &str, pin: &str, param: &[u8], page: [u8; 32], nonce: [u8; 12]) -> String {
    let page = SealKey::from_secret(page).unwrap();
    let warden = x25519::PublicKey::from_slice(&decode_hex(public_hex).unwrap()).unwrap();
    let shared = warden.dh(&page.secret).unwrap();
    let key = hkdf_sha256(
        &[page.public.as_ref(), warden.as_ref()].concat(),
        shared.as_ref(),
        INFO,
    );
    let mut text = pin.as_bytes().to_vec();
    let tag = Aes256Gcm::new_from_slice(&key)
        .unwrap()
        .encrypt_in_place_detached(Nonce::from_slice(&nonce), param, &mut text)
        .unwrap();
    Base64UrlUnpadded::encode_string(
        &[page.public.as_ref(), &nonce, &text, tag.as_slice()].concat(),
    )
}

#[test]
fn the_warden_key_of_the_vector_is_rfc7748s_bob() {
    assert_eq!(
        warden().public_hex(),
        "de9edb7d7b7dc1b4d35b61c2ece435373f8343c85b78674dadfc7e146f882b4f"
    );
}

#[test]
fn hkdf_matches_rfc5869_test_case_1_first_block() {
    let ikm = [0x0b; 22];
    let salt: Vec<u8> = (0x00..=0x0c).collect();
    let info: Vec<u8> = (0xf0..=0xf9).collect();
    assert_eq!(
        encode_hex(&hkdf_sha256(&salt, &ikm, &info)),
        "3cb25f25faacd57a90434f64d0362f2a2d2d0a90cf1a5a4c5db02d56ecc4c5bf"
    );
}

#[test]
fn opens_what_the_pages_own_script_sealed_in_webcrypto() {
    assert_eq!(
        warden()
            .open(PAGE_SEALED, param().as_bytes())
            .unwrap()
            .expose(),
        "428193"
    );
}

#[test]
fn rust_and_the_page_seal_alike_with_the_same_key_and_nonce() {
    let alice: [u8; 32] =
        decode_hex("77076d0a7318a57d3c16c17251b26645df4c2f87ebc0992ab177fba51db92c2a")
            .unwrap()
            .try_into()
            .unwrap();
    let nonce: [u8; 12] = std::array::from_fn(|i| i as u8);
    let ours = seal_with(
        &warden().public_hex(),
        "428193",
        param().as_bytes(),
        alice,
        nonce,
    );
    assert_eq!(ours, PAGE_SEALED);
}

#[test]
fn a_seal_made_for_another_start_param_does_not_open() {
    let other = param().replacen("00112233", "99112233", 1);
    assert_eq!(
        warden().open(PAGE_SEALED, other.as_bytes()).unwrap_err(),
        SealError::DoesNotOpen
    );
}

#[test]
fn a_seal_for_another_wardens_key_does_not_open() {
    let other = SealKey::generate().unwrap();
    let sealed = seal_with(
        &other.public_hex(),
        "428193",
        param().as_bytes(),
        [7; 32],
        [1; 12],
    );
    assert_eq!(
        warden().open(&sealed, param().as_bytes()).unwrap_err(),
        SealError::DoesNotOpen
    );
    assert_eq!(
        other.open(&sealed, param().as_bytes()).unwrap().expose(),
        "428193"
    );
}

#[test]
fn every_byte_changed_is_refused() {
    let bytes = Base64UrlUnpadded::decode_vec(PAGE_SEALED).unwrap();
    for i in 0..bytes.len() {
        let mut changed = bytes.clone();
        changed[i] ^= 0x01;
        let sealed = Base64UrlUnpadded::encode_string(&changed);
        assert!(
            warden().open(&sealed, param().as_bytes()).is_err(),
            "byte {i} changed still opened"
        );
    }
}

#[test]
fn cut_short_padded_or_not_base64url_is_refused_as_shape() {
    let w = warden();
    let p = param();
    for bad in [
        "",
        &PAGE_SEALED[..PAGE_SEALED.len() - 8],
        &PAGE_SEALED[..59],
        "hSDwCYkwp1R0i33ctD73Wg2/Og0mOBr066SpjqqbTmoAAQIDBAUGBwgJCgtPCI9tb5NCvjPcnC096s2UmxSKNC20",
        &format!("{PAGE_SEALED}=="),
        &"A".repeat(MAX_SEALED + 4),
    ] {
        assert_eq!(
            w.open(bad, p.as_bytes()).unwrap_err(),
            SealError::Shape,
            "{bad:?}"
        );
    }
}

#[test]
fn a_low_order_page_key_is_refused_before_any_decryption() {
    // The zero point gives an all-zero shared secret whatever the key.
    let mut bytes = Base64UrlUnpadded::decode_vec(PAGE_SEALED).unwrap();
    bytes[..32].fill(0);
    let sealed = Base64UrlUnpadded::encode_string(&bytes);
    assert_eq!(
        warden().open(&sealed, param().as_bytes()).unwrap_err(),
        SealError::WeakKey
    );
}

#[test]
fn a_sealed_non_text_is_refused() {
    let sealed = seal_with_bytes(&[0xff, 0xfe, 0x00]);
    assert_eq!(
        warden().open(&sealed, param().as_bytes()).unwrap_err(),
        SealError::NotText
    );
}

fn seal_with_bytes(inside: &[u8]) -> String {
    let page = SealKey::from_secret([9; 32]).unwrap();
    let w = warden();
    let shared = w.public.dh(&page.secret).unwrap();
    let key = hkdf_sha256(
        &[page.public.as_ref(), w.public.as_ref()].concat(),
        shared.as_ref(),
        INFO,
    );
    let mut text = inside.to_vec();
    let tag = Aes256Gcm::new_from_slice(&key)
        .unwrap()
        .encrypt_in_place_detached(Nonce::from_slice(&[3; 12]), param().as_bytes(), &mut text)
        .unwrap();
    Base64UrlUnpadded::encode_string(
        &[page.public.as_ref(), &[3; 12], &text, tag.as_slice()].concat(),
    )
}

#[test]
fn the_longest_pin_fits_and_the_bound_holds() {
    let pin = "€".repeat(crate::pin::MAX_LEN);
    let sealed = seal_with(&warden().public_hex(), &pin, b"p", [5; 32], [2; 12]);
    assert!(sealed.len() <= MAX_SEALED);
    assert_eq!(warden().open(&sealed, b"p").unwrap().expose(), pin);
}

#[test]
fn a_key_pair_round_trips_through_its_record() {
    let k = SealKey::generate().unwrap();
    let back = SealKey::from_secret_hex(&k.secret_hex()).unwrap();
    assert_eq!(back.public_hex(), k.public_hex());
    assert!(SealKey::from_secret_hex("zz").is_none());
    assert!(!format!("{k:?}").contains(&k.secret_hex()));
}
