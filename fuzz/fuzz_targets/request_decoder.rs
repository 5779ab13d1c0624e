//! The Warden's request decoder on arbitrary frames: no panic, and whatever
//! it accepts encodes back to a frame that decodes to the same request.

#![no_main]

use aromba_warden_proto::{MAX_REQUEST, decode_request, encode_request, read_frame};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    // As a body, and as a stream of length-prefixed frames.
    if let Ok(request) = decode_request(data) {
        let again = decode_request(&encode_request(&request));
        assert_eq!(again.as_ref(), Ok(&request));
    }
    let mut stream = data;
    while let Ok(frame) = read_frame(&mut stream, MAX_REQUEST) {
        let _ = decode_request(&frame);
    }
});
