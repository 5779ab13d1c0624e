//! Length-prefixed frames with a cap.

use std::io::{self, Read, Write};

/// The largest request a Worker may send.
pub const MAX_REQUEST: usize = 64 << 10;
/// The largest response: two streams of up to 1 MiB of output as hex, and
/// room for the rest.
pub const MAX_RESPONSE: usize = 8 << 20;

#[derive(Debug)]
pub enum FrameError {
    /// The peer closed the connection before a frame started.
    Closed,
    TooLarge {
        len: usize,
        max: usize,
    },
    Io(io::Error),
}

impl std::fmt::Display for FrameError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            FrameError::Closed => write!(f, "the connection was closed"),
            FrameError::TooLarge { len, max } => {
                write!(f, "a message of {len} bytes is over the limit of {max}")
            }
            FrameError::Io(e) => write!(f, "{e}"),
        }
    }
}

impl std::error::Error for FrameError {}

/// Reads one frame of at most `max` bytes. The length is checked before
/// anything is allocated.
pub fn read_frame(r: &mut impl Read, max: usize) -> Result<Vec<u8>, FrameError> {
    let mut len = [0u8; 4];
    let mut got = 0;
    while got < 4 {
        match r.read(&mut len[got..]) {
            Ok(0) if got == 0 => return Err(FrameError::Closed),
            Ok(0) => return Err(FrameError::Io(io::ErrorKind::UnexpectedEof.into())),
            Ok(n) => got += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(FrameError::Io(e)),
        }
    }
    let len = u32::from_be_bytes(len) as usize;
    if len > max {
        return Err(FrameError::TooLarge { len, max });
    }
    let mut body = vec![0u8; len];
    r.read_exact(&mut body).map_err(FrameError::Io)?;
    Ok(body)
}

pub fn write_frame(w: &mut impl Write, body: &[u8], max: usize) -> Result<(), FrameError> {
    if body.len() > max {
        return Err(FrameError::TooLarge {
            len: body.len(),
            max,
        });
    }
    let len = u32::try_from(body.len()).map_err(|_| FrameError::TooLarge {
        len: body.len(),
        max,
    })?;
    w.write_all(&len.to_be_bytes()).map_err(FrameError::Io)?;
    w.write_all(body).map_err(FrameError::Io)?;
    w.flush().map_err(FrameError::Io)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refuses_an_oversize_length_before_reading_the_body() {
        let mut input: &[u8] = &[0xff, 0xff, 0xff, 0xff];
        assert!(matches!(
            read_frame(&mut input, MAX_REQUEST),
            Err(FrameError::TooLarge { .. })
        ));
    }

    #[test]
    fn a_truncated_body_is_an_error() {
        let mut input: &[u8] = &[0, 0, 0, 10, b'{'];
        assert!(matches!(
            read_frame(&mut input, MAX_REQUEST),
            Err(FrameError::Io(_))
        ));
    }

    #[test]
    fn round_trips() {
        let mut buf = Vec::new();
        write_frame(&mut buf, b"{}", MAX_REQUEST).unwrap();
        assert_eq!(read_frame(&mut buf.as_slice(), MAX_REQUEST).unwrap(), b"{}");
    }
}
