//! The relay under attack (not a test; figures in BENCHMARKS.md, "Relay
//! under attack"): the legitimate paths' p50/p99 — `/healthz` from a fresh
//! address, a new server's hello, a paired chat's message out, the
//! person's message in through the webhook — without any attack, then
//! under each attack alone and under all at once, in the same run, with
//! the ratio to the run without.
//!
//!     DATABASE_URL=postgres://… cargo bench -p aromba-relay --bench under_attack
//!
//! `AROMBA_BENCH_PROBES` (default 20) sets the probes per scenario, a
//! little over a second apart (a chat's pace). Loopback only.

#![forbid(unsafe_code)]

use aromba_testkit::relay as support;

use aromba_testkit::bench as common;

use common::{R, env_usize, on_scratch_database};
use std::time::Duration;
use support::under_attack::{Attacks, Seen, percentile_ms, run};

fn scenarios() -> Vec<(&'static str, Attacks)> {
    let all = Attacks::all();
    vec![
        ("none", Attacks::none()),
        (
            "slow bodies (2,048 from 256 addresses)",
            Attacks {
                slow_bodies: all.slow_bodies,
                ..Attacks::none()
            },
        ),
        (
            "silent WebSockets (1,536 from 308 addresses)",
            Attacks {
                silent_sockets: all.silent_sockets,
                ..Attacks::none()
            },
        ),
        (
            "strangers' /start during a guess lock (1,000)",
            Attacks {
                strangers: all.strangers,
                ..Attacks::none()
            },
        ),
        (
            "a 429 with a day's retry_after",
            Attacks {
                day_429: true,
                ..Attacks::none()
            },
        ),
        ("all at once", all),
    ]
}

fn row(name: &str, seen: &Seen, base: &Seen) {
    let cell = |s: &[Duration], b: &[Duration]| {
        let (p50, p99) = (percentile_ms(s, 0.5), percentile_ms(s, 0.99));
        format!(
            "{p50:.1} / {p99:.1} ({:.2}×)",
            p99 / percentile_ms(b, 0.99).max(0.001)
        )
    };
    println!(
        "| {name} | {} | {} | {} | {} | {} |",
        cell(&seen.healthz, &base.healthz),
        cell(&seen.hello, &base.hello),
        cell(&seen.chat_out, &base.chat_out),
        cell(&seen.webhook_in, &base.webhook_in),
        seen.healthz_failed + seen.hello_refused,
    );
}

fn main() -> R<()> {
    let runtime = tokio::runtime::Runtime::new()?;
    runtime.block_on(async {
        let _ = rustls::crypto::ring::default_provider().install_default();
        let probes = env_usize("AROMBA_BENCH_PROBES", 20);
        let mut results = Vec::new();
        for (i, (name, attacks)) in scenarios().into_iter().enumerate() {
            let seen = std::sync::Arc::new(std::sync::Mutex::new(None));
            let out = seen.clone();
            on_scratch_database(&format!("aromba_bench_attack_{i}"), |url| async move {
                let db = sqlx::postgres::PgPoolOptions::new()
                    .max_connections(32)
                    .connect(&url)
                    .await?;
                let s = run(db, &attacks, probes).await;
                *out.lock().map_err(|_| "poisoned")? = Some(s);
                Ok(())
            })
            .await?;
            let s = seen.lock().map_err(|_| "poisoned")?.take().ok_or("no result")?;
            eprintln!("{name}: done");
            results.push((name, s));
        }
        println!("probes per scenario: {probes}; each cell p50 / p99 in ms (p99 over the run without attacks)");
        println!("| attack | /healthz | new server's hello | paired chat out | webhook in | failed |");
        println!("|---|---|---|---|---|---|");
        let base = &results[0].1;
        for (name, seen) in &results {
            row(name, seen, base);
        }
        Ok(())
    })
}
