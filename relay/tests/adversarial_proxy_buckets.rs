//! Clients behind the relay's trusted proxy against the per-address rate
//! buckets, which key on the address X-Forwarded-For names. What they
//! try: a proxy that writes ports (`203.0.113.1:50000`,
//! `[2001:db8:9::1]:443`) so that every client counts against the proxy,
//! and a client that spells its address again (IPv4-mapped, upper case,
//! hex) or moves within its IPv6 /64 to earn a fresh bucket. What holds:
//! one bucket per client, never the proxy's for everyone, and never a new
//! one for another spelling of the same client.

use aromba_testkit::relay as support;

use sqlx::PgPool;
use support::{Server, behind_proxy, post_from, start};

#[sqlx::test(migrations = false)]
async fn clients_behind_a_proxy_that_writes_ports_keep_their_own_buckets(db: PgPool) {
    // The rightmost entry is the trusted proxy's own writing; when it
    // carries a port the parse fails and the request counts against the
    // proxy. Then one client's few requests use up everyone's burst and
    // daily count.
    let mut c = behind_proxy();
    c.limits.burst = 1;
    c.limits.refill_ms = 600_000;
    let relay = start(db.clone(), c).await;
    assert_eq!(
        post_from(&relay, "203.0.113.1:50000", &Server::new().registration()).await,
        201
    );
    assert_eq!(
        post_from(&relay, "203.0.113.2:50001", &Server::new().registration()).await,
        201,
        "another client behind the proxy was refused with the first one's bucket"
    );
    assert_eq!(
        post_from(&relay, "[2001:db8:9::1]:443", &Server::new().registration()).await,
        201
    );
    relay.stop().await;
}

#[sqlx::test(migrations = false)]
async fn an_ipv4_mapped_forwarded_for_shares_the_ipv4_bucket(db: PgPool) {
    let mut c = behind_proxy();
    c.limits.burst = 1;
    c.limits.refill_ms = 600_000;
    let relay = start(db.clone(), c).await;
    assert_eq!(
        post_from(&relay, "203.0.113.9", &Server::new().registration()).await,
        201
    );
    for spelled in ["::ffff:203.0.113.9", "::FFFF:cb00:7109", "203.0.113.9"] {
        assert_eq!(
            post_from(&relay, spelled, &Server::new().registration()).await,
            429,
            "{spelled} earned a fresh bucket"
        );
    }
    // Another host in the same IPv6 /64 is the same client.
    assert_eq!(
        post_from(&relay, "2001:db8:7:7::1", &Server::new().registration()).await,
        201
    );
    assert_eq!(
        post_from(
            &relay,
            "2001:db8:7:7:ffff::2",
            &Server::new().registration()
        )
        .await,
        429
    );
    relay.stop().await;
}
