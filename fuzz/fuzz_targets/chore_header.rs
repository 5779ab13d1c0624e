//! The chore header parser on arbitrary text: no panic, and a header that
//! parses renders back to text that parses to the same header.

#![no_main]

use aromba_warden::chores::header::Header;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    if let Ok(header) = Header::parse(text) {
        let again = Header::parse(&header.render());
        assert_eq!(again.as_ref(), Ok(&header), "render/parse changed the meaning");
    }
});
