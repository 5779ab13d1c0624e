//! Talks to the Warden over its Worker socket: one request, one response.

use aromba_warden_proto::{
    FrameError, MAX_REQUEST, MAX_RESPONSE, Request, Response, decode_response, encode_request,
    read_frame, write_frame,
};
use std::fmt;
use std::io;
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::time::Duration;

#[derive(Debug)]
pub enum ClientError {
    NotRunning(PathBuf),
    PermissionDenied(PathBuf),
    Connect { path: PathBuf, source: io::Error },
    Frame(FrameError),
    BadResponse(String),
}

impl fmt::Display for ClientError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ClientError::NotRunning(p) => write!(
                f,
                "the Warden is not running (no socket at {})",
                p.display()
            ),
            ClientError::PermissionDenied(p) => write!(
                f,
                "permission denied on {}: the Worker socket serves only the aromba user, the control socket only root",
                p.display()
            ),
            ClientError::Connect { path, source } => {
                write!(f, "cannot reach the Warden at {}: {source}", path.display())
            }
            ClientError::Frame(e) => write!(f, "talking to the Warden failed: {e}"),
            ClientError::BadResponse(e) => write!(f, "the Warden's answer could not be read: {e}"),
        }
    }
}

impl std::error::Error for ClientError {}

/// Sends `request` to the socket at `path` and returns the answer. Reads
/// may run for minutes (`du` has five), so the wait is long.
pub fn ask(path: &Path, request: &Request) -> Result<Response, ClientError> {
    let mut stream = UnixStream::connect(path).map_err(|source| match source.kind() {
        io::ErrorKind::NotFound | io::ErrorKind::ConnectionRefused => {
            ClientError::NotRunning(path.to_path_buf())
        }
        io::ErrorKind::PermissionDenied => ClientError::PermissionDenied(path.to_path_buf()),
        _ => ClientError::Connect {
            path: path.to_path_buf(),
            source,
        },
    })?;
    let _ = stream.set_read_timeout(Some(Duration::from_secs(15 * 60)));
    // A Warden that refuses the peer answers at once and closes, so the
    // write can fail while its answer is already waiting: read it anyway.
    let written = write_frame(&mut stream, &encode_request(request), MAX_REQUEST);
    let frame = match (read_frame(&mut stream, MAX_RESPONSE), written) {
        (Ok(frame), _) => frame,
        (Err(_), Err(e)) => return Err(ClientError::Frame(e)),
        (Err(e), Ok(())) => return Err(ClientError::Frame(e)),
    };
    decode_response(&frame).map_err(|e| ClientError::BadResponse(e.to_string()))
}
