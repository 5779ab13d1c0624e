//! The one way a test serves a Warden in-process: bound with options every
//! test Warden starts from, served on a thread of the test's process, and
//! stopped (the thread joined) when asked or when dropped. [`crate::warden`]
//! and [`crate::worker`] build their Wardens on it.

use aromba_warden::chores::snapshot::KeepFree;
use aromba_warden::layout::Layout;
use aromba_warden::server::{ServeOptions, Server, ShutdownHandle};
use std::thread::JoinHandle;

/// What a red run's snapshot keeps free: the machine's disk is not the
/// test's, so a fixed margin rather than a tenth of whatever disk the
/// tests run on.
pub const TEST_KEEP_FREE: u64 = 64 << 20;

/// The options every test Warden starts from, for a Worker of `uid` and
/// `gid`: no test touches the system's services or users unless it names
/// stand-ins for them, and snapshots keep [`TEST_KEEP_FREE`] free.
pub fn options(layout: Layout, uid: u32, gid: u32) -> ServeOptions {
    let mut o = ServeOptions::new(layout, uid, gid);
    o.host = None;
    o.snapshot_keep_free = KeepFree::Bytes(TEST_KEEP_FREE);
    o
}

/// A Warden serving on a thread until [`Serving::stop`] or drop.
pub struct Serving {
    handle: ShutdownHandle,
    thread: Option<JoinHandle<()>>,
}

impl Serving {
    /// Binds with `options`, runs `between` once bound and before it serves
    /// (what another process could do the moment the Warden started), and
    /// serves.
    pub fn start(options: ServeOptions, between: impl FnOnce()) -> Serving {
        let server = Server::bind(options).expect("the Warden binds");
        between();
        let handle = server.shutdown_handle();
        Serving {
            handle,
            thread: Some(std::thread::spawn(move || server.run())),
        }
    }

    /// Stops serving and waits for the thread; its root stays, as stopping
    /// the service leaves it.
    pub fn stop(&mut self) {
        self.handle.shutdown();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Drop for Serving {
    fn drop(&mut self) {
        self.stop();
    }
}
