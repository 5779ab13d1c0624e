//! The load test: the relay under every availability attack at once
//! (thousands of slow bodies and silent WebSockets from hundreds of
//! loopback addresses, a strangers' `/start` flood during a guess lock, a
//! 429 with a day's `retry_after`), and the legitimate paths asserted while
//! it runs. Bounded: a fixed number of connections and probes, loopback
//! only. `cargo bench -p aromba-relay --bench under_attack` measures the
//! same paths with and without each attack (BENCHMARKS.md).

use aromba_testkit::relay as support;

use sqlx::PgPool;
use std::time::Duration;
use support::under_attack::{Attacks, percentile_ms, run};

const PROBES: usize = 6;

#[sqlx::test(migrations = false)]
async fn health_hellos_webhook_and_a_paired_chat_hold_while_every_attack_runs(db: PgPool) {
    let seen = run(db, &Attacks::all(), PROBES).await;
    println!(
        "under attack: healthz p50 {:.1} ms p99 {:.1} ms; hello p50 {:.1} ms p99 {:.1} ms; \
         chat out p50 {:.1} ms p99 {:.1} ms; webhook in p50 {:.1} ms p99 {:.1} ms",
        percentile_ms(&seen.healthz, 0.5),
        percentile_ms(&seen.healthz, 0.99),
        percentile_ms(&seen.hello, 0.5),
        percentile_ms(&seen.hello, 0.99),
        percentile_ms(&seen.chat_out, 0.5),
        percentile_ms(&seen.chat_out, 0.99),
        percentile_ms(&seen.webhook_in, 0.5),
        percentile_ms(&seen.webhook_in, 0.99),
    );
    assert_eq!(seen.healthz_failed, 0, "/healthz always answered");
    assert!(
        seen.healthz.iter().all(|d| *d < Duration::from_secs(1)),
        "/healthz within a second: {:?}",
        seen.healthz
    );
    assert_eq!(
        seen.hello_refused, 0,
        "every registered server's hello accepted"
    );
    assert_eq!(seen.webhook_in.len(), PROBES, "every webhook update taken");
    assert_eq!(seen.chat_out.len(), PROBES, "every paired message sent");
    assert!(
        seen.chat_out.iter().all(|d| *d < Duration::from_secs(2)),
        "a paired chat's message within its pace: {:?}",
        seen.chat_out
    );
}
