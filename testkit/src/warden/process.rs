//! Where a test Warden runs: on a thread of the test's process (most
//! tests), or as a process of its own, `aromba-test-warden`, for the tests
//! that kill it with SIGKILL mid-act and start it again.

use crate::serving::Serving;
use aromba_warden_proto::{
    MAX_RESPONSE, Request, Response, decode_response, encode_request, read_frame, write_frame,
};
use assert_cmd::cargo::CommandCargoExt;
use std::io::{BufRead, BufReader};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::process::{Child, Stdio};

/// What serves a test Warden.
pub enum Host {
    InProcess(Serving),
    /// `None` once killed or stopped.
    Process(Option<Child>),
}

/// What `aromba-test-warden` prints once its sockets are bound.
pub const READY: &str = "serving";

impl Host {
    /// Starts `aromba-test-warden ROOT AHEAD` (installing the Warden first
    /// when `ROOT` is not installed yet) and waits until it serves.
    pub fn process(root: &Path, ahead: u64) -> Host {
        let mut child = std::process::Command::cargo_bin("aromba-test-warden")
            .expect("aromba-test-warden is built with the test kit's tests")
            .arg(root)
            .arg(ahead.to_string())
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("aromba-test-warden starts");
        let stdout = child.stdout.take().expect("piped");
        let mut line = String::new();
        let _ = BufReader::new(stdout).read_line(&mut line);
        if line.trim() != READY {
            let _ = child.kill();
            let status = child.wait();
            panic!("aromba-test-warden did not serve ({status:?}): {line:?}");
        }
        Host::Process(Some(child))
    }

    /// Stops it: a thread is shut down and joined, a process killed.
    pub fn stop(&mut self) {
        match self {
            Host::InProcess(s) => s.stop(),
            Host::Process(_) => self.kill(),
        }
    }

    /// SIGKILL, and the process reaped.
    pub fn kill(&mut self) {
        match self {
            Host::Process(child) => {
                if let Some(mut c) = child.take() {
                    let _ = c.kill();
                    let _ = c.wait();
                }
            }
            Host::InProcess(_) => panic!("a Warden on a thread of the test cannot be killed"),
        }
    }
}

impl Drop for Host {
    fn drop(&mut self) {
        if let Host::Process(Some(_)) = self {
            self.kill();
        }
    }
}

/// `r` sent on the Warden socket `socket`, its answer not waited for: the
/// tests that kill the Warden or drop the connection while it works.
pub fn send(socket: &Path, r: &Request) -> UnixStream {
    let mut s = UnixStream::connect(socket).expect("the Warden serves");
    write_frame(&mut s, &encode_request(r), 1 << 16).expect("the request is written");
    s
}

/// The answer on a connection [`send`] opened; `None` when none came (the
/// Warden was killed first).
pub fn answer(mut s: UnixStream) -> Option<Response> {
    let frame = read_frame(&mut s, MAX_RESPONSE).ok()?;
    decode_response(&frame).ok()
}
