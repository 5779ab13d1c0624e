//! Start-up overhead of the cage: a caged `/bin/true` (all of the cage's
//! flags, the seccomp filter through a pipe, secret paths hidden) next to a
//! bare `bwrap --ro-bind / / /bin/true`, in the same run.
//!
//! Run as root: `cargo bench -p aromba-warden --bench cage`
//! (`AROMBA_BENCH_N=50` for a quicker run).

use aromba_warden::cage::{CageSpec, run_caged, secret_paths};
use aromba_warden::exec::{Bounds, pick_binary, run_program};
use aromba_warden::layout::Layout;
use std::path::Path;
use std::time::{Duration, Instant};

fn percentiles(mut v: Vec<Duration>) -> (f64, f64) {
    v.sort();
    let ms = |d: Duration| d.as_secs_f64() * 1000.0;
    (
        ms(v[v.len() / 2]),
        ms(v[(v.len() * 99 / 100).min(v.len() - 1)]),
    )
}

fn main() {
    let n: usize = std::env::var("AROMBA_BENCH_N")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(300);
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
    let bwrap =
        pick_binary("bwrap", &["/usr/bin/bwrap", "/bin/bwrap"]).expect("bubblewrap is installed");
    let bare_args: Vec<String> = ["--ro-bind", "/", "/", "/bin/true"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    let spec = CageSpec {
        hide: secret_paths(&Layout::system()),
        ..CageSpec::default()
    };
    let mut bare = Vec::with_capacity(n);
    let mut caged = Vec::with_capacity(n);
    // Interleaved, so both see the same machine.
    for _ in 0..n {
        let t = Instant::now();
        let o = run_program(&bwrap, &bare_args, &[], &bounds).expect("bare bwrap runs (as root)");
        bare.push(t.elapsed());
        assert_eq!(o.exit_code, Some(0), "{}", o.stderr.lossy());
        let t = Instant::now();
        let o = run_caged(&spec, Path::new("/bin/true"), &[], &bounds)
            .expect("the cage runs (as root)");
        caged.push(t.elapsed());
        assert_eq!(o.exit_code, Some(0), "{}", o.stderr.lossy());
    }
    let (bm, bp) = percentiles(bare);
    let (cm, cp) = percentiles(caged);
    println!("{n} runs each, interleaved");
    println!("bare bwrap --ro-bind / / true   median {bm:7.3} ms   p99 {bp:7.3} ms");
    println!("caged true (full cage)          median {cm:7.3} ms   p99 {cp:7.3} ms");
    println!(
        "ratio caged / bare: median {:.2}   p99 {:.2}",
        cm / bm,
        cp / bp
    );
}
