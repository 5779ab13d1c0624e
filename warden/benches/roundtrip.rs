//! A Warden round trip for `uptime` — socket, policy, exec, redaction, one
//! journal line — against the exec path alone (fork/exec of the same binary
//! with the same confinement, no socket, no policy, no journal), measured in
//! the same run, with and without the journal's per-line fsync.
//!
//! Run as root: `cargo bench -p aromba-warden --bench roundtrip`
//! (`AROMBA_BENCH_N=200` for a quicker run).

use aromba_warden::exec::{Bounds, pick_binary, run_program};
use aromba_warden::layout::Layout;
use aromba_warden::server::{ServeOptions, Server};
use aromba_warden_proto::{
    MAX_RESPONSE, Request, Response, decode_response, encode_request, read_frame, write_frame,
};
use std::os::unix::net::UnixStream;
use std::time::{Duration, Instant};

fn percentiles(mut samples: Vec<Duration>) -> (Duration, Duration) {
    samples.sort();
    let median = samples[samples.len() / 2];
    let p99 = samples[(samples.len() * 99 / 100).min(samples.len() - 1)];
    (median, p99)
}

fn warden_round_trips(n: usize, fsync: bool) -> (Duration, Duration) {
    let root = std::env::temp_dir().join(format!("aromba-bench-{}-{fsync}", std::process::id()));
    let _ = std::fs::remove_dir_all(&root);
    let mut options = ServeOptions::new(Layout::rooted(&root), 0, 0);
    // Root stands in for the Worker: its connections are the machine's.
    options.watch_network = false;
    // A benchmark is a burst by design: keep the ladder out of it.
    options.command_threshold = usize::MAX;
    options.request_threshold = usize::MAX;
    options.fsync = fsync;
    let server = Server::bind(options).expect("the Warden binds (run as root)");
    let handle = server.shutdown_handle();
    let thread = std::thread::spawn(move || server.run());
    let mut stream = UnixStream::connect(Layout::rooted(&root).worker_socket()).expect("connect");
    let request = encode_request(&Request::Read {
        cmd: "uptime".into(),
        args: vec![],
    });
    let mut samples = Vec::with_capacity(n);
    for _ in 0..n {
        let start = Instant::now();
        write_frame(&mut stream, &request, 1 << 16).expect("send");
        let frame = read_frame(&mut stream, MAX_RESPONSE).expect("receive");
        samples.push(start.elapsed());
        assert!(
            matches!(decode_response(&frame), Ok(Response::Result(_))),
            "uptime ran"
        );
    }
    drop(stream);
    handle.shutdown();
    let _ = thread.join();
    let _ = std::fs::remove_dir_all(&root);
    percentiles(samples)
}

fn bare_exec(n: usize) -> (Duration, Duration) {
    let bin =
        pick_binary("uptime", &["/usr/bin/uptime", "/bin/uptime"]).expect("uptime is installed");
    let bounds = Bounds {
        timeout: Duration::from_secs(30),
        max_output_bytes: 1 << 20,
        low_priority: false,
        keep_fd: None,
        stop: None,
        tripwire: None,
        cgroup: Default::default(),
        known_secrets: Vec::new(),
    };
    let samples = (0..n)
        .map(|_| {
            let start = Instant::now();
            let out = run_program(&bin, &[], &[], &bounds).expect("uptime runs");
            assert_eq!(out.exit_code, Some(0));
            start.elapsed()
        })
        .collect();
    percentiles(samples)
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

fn main() {
    let n: usize = std::env::var("AROMBA_BENCH_N")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1000);
    println!("{n} requests each, one connection, sequential");
    let (bm, bp) = bare_exec(n);
    let (fm, fp) = warden_round_trips(n, true);
    let (nm, np) = warden_round_trips(n, false);
    println!(
        "bare fork/exec of uptime      median {:7.3} ms   p99 {:7.3} ms",
        ms(bm),
        ms(bp)
    );
    println!(
        "Warden round trip, fsync      median {:7.3} ms   p99 {:7.3} ms",
        ms(fm),
        ms(fp)
    );
    println!(
        "Warden round trip, no fsync   median {:7.3} ms   p99 {:7.3} ms",
        ms(nm),
        ms(np)
    );
    println!(
        "ratio Warden (fsync) / bare exec:    median {:.2}   p99 {:.2}",
        ms(fm) / ms(bm),
        ms(fp) / ms(bp)
    );
    println!(
        "ratio Warden (no fsync) / bare exec: median {:.2}   p99 {:.2}",
        ms(nm) / ms(bm),
        ms(np) / ms(bp)
    );
}
