//! Talks to the Warden over a socket: one request, one response, on tokio.
//! The command-line verbs use [`ask_blocking`], which runs the same code on
//! a runtime of its own.

use aromba_warden_proto::{
    Lane, MAX_REQUEST, MAX_RESPONSE, Request, Response, decode_response, encode_request_in,
};
use std::fmt;
use std::io;
use std::path::{Path, PathBuf};
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::UnixStream;

#[derive(Debug)]
pub enum ClientError {
    NotRunning(PathBuf),
    PermissionDenied(PathBuf),
    Connect { path: PathBuf, source: io::Error },
    Io(io::Error),
    TooLarge { len: usize, max: usize },
    Closed,
    TimedOut,
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
            ClientError::Io(e) => write!(f, "talking to the Warden failed: {e}"),
            ClientError::TooLarge { len, max } => write!(
                f,
                "talking to the Warden failed: a message of {len} bytes is over the limit of {max}"
            ),
            ClientError::Closed => {
                write!(f, "talking to the Warden failed: the connection was closed")
            }
            ClientError::TimedOut => write!(f, "the Warden did not answer in time"),
            ClientError::BadResponse(e) => write!(f, "the Warden's answer could not be read: {e}"),
        }
    }
}

impl std::error::Error for ClientError {}

tokio::task_local! {
    /// On whose behalf the task asks: the daemon's chat tasks in the
    /// person's lane, its other tasks in the background's ([`Lane`]).
    pub static LANE: Lane;
}

/// The lane the current task asks in; outside the daemon's tasks (a
/// command-line verb) the person's, which names no lane at all.
pub fn lane() -> Lane {
    LANE.try_with(|l| *l).unwrap_or(Lane::Person)
}

/// Reads may run for minutes (`du` has five; a chore fifteen), so the
/// wait is long.
const ANSWER_WITHIN: Duration = Duration::from_secs(20 * 60);

/// Sends `request` to the socket at `path` and returns the answer.
pub async fn ask(path: &Path, request: &Request) -> Result<Response, ClientError> {
    let mut stream = UnixStream::connect(path)
        .await
        .map_err(|source| match source.kind() {
            io::ErrorKind::NotFound | io::ErrorKind::ConnectionRefused => {
                ClientError::NotRunning(path.to_path_buf())
            }
            io::ErrorKind::PermissionDenied => ClientError::PermissionDenied(path.to_path_buf()),
            _ => ClientError::Connect {
                path: path.to_path_buf(),
                source,
            },
        })?;
    let body = encode_request_in(request, lane());
    if body.len() > MAX_REQUEST {
        return Err(ClientError::TooLarge {
            len: body.len(),
            max: MAX_REQUEST,
        });
    }
    let exchange = async {
        // A Warden that refuses the peer answers at once and closes, so the
        // write can fail while its answer is already waiting: read it anyway.
        let mut framed = Vec::with_capacity(4 + body.len());
        framed.extend_from_slice(&(body.len() as u32).to_be_bytes());
        framed.extend_from_slice(&body);
        let written = stream.write_all(&framed).await;
        let read = read_frame(&mut stream).await;
        match (read, written) {
            (Ok(frame), _) => Ok(frame),
            (Err(_), Err(e)) => Err(ClientError::Io(e)),
            (Err(e), Ok(())) => Err(e),
        }
    };
    let frame = tokio::time::timeout(ANSWER_WITHIN, exchange)
        .await
        .map_err(|_| ClientError::TimedOut)??;
    decode_response(&frame).map_err(|e| ClientError::BadResponse(e.to_string()))
}

async fn read_frame(stream: &mut UnixStream) -> Result<Vec<u8>, ClientError> {
    let mut len = [0u8; 4];
    match stream.read_exact(&mut len).await {
        Ok(_) => {}
        Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => return Err(ClientError::Closed),
        Err(e) => return Err(ClientError::Io(e)),
    }
    let len = u32::from_be_bytes(len) as usize;
    if len > MAX_RESPONSE {
        return Err(ClientError::TooLarge {
            len,
            max: MAX_RESPONSE,
        });
    }
    let mut body = vec![0u8; len];
    stream
        .read_exact(&mut body)
        .await
        .map_err(ClientError::Io)?;
    Ok(body)
}

/// [`ask`] from synchronous code (the command-line verbs).
pub fn ask_blocking(path: &Path, request: &Request) -> Result<Response, ClientError> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(ClientError::Io)?;
    runtime.block_on(ask(path, request))
}

/// Why the Warden's answer is not the one a request expects.
#[derive(Debug)]
pub enum WardenError {
    /// The socket: the Warden not running, the connection refused or cut,
    /// no answer in time, an answer that cannot be read.
    Unreachable(ClientError),
    /// The Warden refused, in its own words.
    Refused(String),
    /// The Warden could not do it, in its own words.
    Failed(String),
    /// An answer of another kind than the request's.
    Unexpected(Box<Response>),
}

impl From<ClientError> for WardenError {
    fn from(e: ClientError) -> WardenError {
        WardenError::Unreachable(e)
    }
}

impl fmt::Display for WardenError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            WardenError::Unreachable(e) => e.fmt(f),
            WardenError::Refused(reason) => write!(f, "the Warden refused: {reason}"),
            WardenError::Failed(message) => write!(f, "the Warden could not: {message}"),
            WardenError::Unexpected(answer) => {
                write!(f, "the Warden answered something else: {answer:?}")
            }
        }
    }
}

impl std::error::Error for WardenError {}

/// `answer` as the kind `pick` takes; a refusal, a failure or another
/// kind as a [`WardenError`].
fn expect<T>(
    answer: Result<Response, ClientError>,
    pick: impl FnOnce(Response) -> Result<T, Box<Response>>,
) -> Result<T, WardenError> {
    pick(answer?).map_err(|other| WardenError::not_asked_for(*other))
}

impl WardenError {
    /// An answer that is not the one asked for: a refusal, a failure, or
    /// another kind.
    pub fn not_asked_for(answer: Response) -> WardenError {
        match answer {
            Response::Refused { reason, .. } => WardenError::Refused(reason),
            Response::Error { message } => WardenError::Failed(message),
            other => WardenError::Unexpected(Box::new(other)),
        }
    }
}

/// The Warden's answer to `Request::Trust`.
#[derive(Debug, Clone)]
pub struct TrustFacts {
    pub policy: String,
    pub fences: Vec<String>,
    pub fences_total: u64,
    pub journal: String,
}

/// The Warden's Worker socket, asked for one kind of answer per request:
/// the answer typed, anything else a [`WardenError`], so no caller matches
/// the whole [`Response`].
pub struct Warden {
    socket: PathBuf,
}

impl Warden {
    pub fn at(socket: PathBuf) -> Warden {
        Warden { socket }
    }

    /// Any request, answered as it comes (an approval has several kinds
    /// of answer).
    pub async fn ask(&self, request: &Request) -> Result<Response, ClientError> {
        ask(&self.socket, request).await
    }

    /// How things stand: the ladder, the journal, prod mode, …
    pub async fn status(&self) -> Result<aromba_warden_proto::Status, WardenError> {
        expect(self.ask(&Request::Status).await, |r| match r {
            Response::Status(st) => Ok(st),
            other => Err(Box::new(other)),
        })
    }

    /// What the Trust page shows besides the status: the policy rendering,
    /// the fence list, the journal's last check.
    pub async fn trust(&self) -> Result<TrustFacts, WardenError> {
        expect(self.ask(&Request::Trust).await, |r| match r {
            Response::Trust {
                policy,
                fences,
                fences_total,
                journal,
            } => Ok(TrustFacts {
                policy,
                fences,
                fences_total,
                journal,
            }),
            other => Err(Box::new(other)),
        })
    }

    /// The chores here.
    pub async fn chores(&self) -> Result<Vec<aromba_warden_proto::ChoreInfo>, WardenError> {
        expect(self.ask(&Request::Chores).await, |r| match r {
            Response::Chores { chores } => Ok(chores),
            other => Err(Box::new(other)),
        })
    }

    /// The skills installed, and each that no longer verifies, why.
    pub async fn skills(
        &self,
    ) -> Result<(Vec<aromba_warden_proto::SkillInfo>, Vec<String>), WardenError> {
        expect(self.ask(&Request::Skills).await, |r| match r {
            Response::Skills { skills, refused } => Ok((skills, refused)),
            other => Err(Box::new(other)),
        })
    }

    /// The health set: each read by its name, with its own answer.
    pub async fn health(&self) -> Result<Vec<(String, Response)>, WardenError> {
        expect(self.ask(&Request::Health).await, |r| match r {
            Response::Health { reads } => Ok(reads),
            other => Err(Box::new(other)),
        })
    }

    /// One read of the policy's: its result, whatever its exit code.
    pub async fn read(
        &self,
        cmd: &str,
        args: Vec<String>,
    ) -> Result<aromba_warden_proto::ReadResult, WardenError> {
        let request = Request::Read {
            cmd: cmd.to_string(),
            args,
        };
        expect(self.ask(&request).await, |r| match r {
            Response::Result(result) => Ok(result),
            other => Err(Box::new(other)),
        })
    }

    /// The ladder's events after `after`.
    pub async fn events(
        &self,
        after: u64,
    ) -> Result<Vec<aromba_warden_proto::LadderEvent>, WardenError> {
        expect(self.ask(&Request::Events { after }).await, |r| match r {
            Response::Events { events } => Ok(events),
            other => Err(Box::new(other)),
        })
    }

    /// A request the Warden answers with "noted" when it did it.
    pub async fn noted(&self, request: &Request) -> Result<(), WardenError> {
        expect(self.ask(request).await, |r| match r {
            Response::Noted { .. } => Ok(()),
            other => Err(Box::new(other)),
        })
    }
}

/// Sends a root verb to the control socket; one clear sentence on failure
/// (the command line's verbs and `lifecycle.rs`'s).
pub fn control(
    root: Option<std::path::PathBuf>,
    request: &Request,
    verb: &str,
) -> Result<Response, std::process::ExitCode> {
    let (_, socket) = aromba_warden_proto::socket_paths(root.as_deref());
    match ask_blocking(&socket, request) {
        Ok(Response::Error { message }) => {
            eprintln!("aromba: the Warden refused {verb}: {message}");
            Err(std::process::ExitCode::from(1))
        }
        Ok(r) => Ok(r),
        Err(ClientError::PermissionDenied(p)) => {
            eprintln!(
                "aromba: {verb} needs a root terminal (permission denied on {})",
                p.display()
            );
            Err(std::process::ExitCode::from(1))
        }
        Err(ClientError::NotRunning(p)) => {
            eprintln!(
                "aromba: the Warden is not running (no socket at {}); nothing to {verb}",
                p.display()
            );
            Err(std::process::ExitCode::from(2))
        }
        Err(e) => {
            eprintln!("aromba: {e}");
            Err(std::process::ExitCode::from(2))
        }
    }
}
