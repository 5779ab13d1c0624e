//! PostgreSQL restarted under load: a private cluster of the test's own
//! (initdb in a temporary directory, run as the postgres user), restarted
//! while deliveries are being queued; every delivery whose enqueue
//! committed still reaches its server, once.

use aromba_testkit::relay as support;

use aromba_relay_proto::client::{Outgoing, run};
use aromba_relay_proto::frame::Delivery;
use sqlx::postgres::PgPoolOptions;
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use support::{Server, config, free_port, post_json, start};

/// A PostgreSQL cluster in a temporary directory, on its own port.
struct PrivatePostgres {
    _dir: tempfile::TempDir,
    data: PathBuf,
    bin: PathBuf,
    port: u16,
}

fn as_postgres(program: &std::path::Path) -> assert_cmd::Command {
    let mut cmd = assert_cmd::Command::new("runuser");
    cmd.args(["-u", "postgres", "--"]).arg(program);
    cmd
}

impl PrivatePostgres {
    fn start() -> PrivatePostgres {
        let versions = std::fs::read_dir("/usr/lib/postgresql").expect("PostgreSQL is installed");
        let bin = versions
            .filter_map(Result::ok)
            .map(|e| e.path().join("bin"))
            .filter(|p| p.join("initdb").is_file())
            .max()
            .expect("an initdb under /usr/lib/postgresql");
        let dir = tempfile::Builder::new()
            .prefix("aromba-pg-")
            .tempdir_in("/tmp")
            .expect("tempdir");
        let postgres = nix::unistd::User::from_name("postgres")
            .expect("users")
            .expect("a postgres user");
        nix::unistd::chown(dir.path(), Some(postgres.uid), Some(postgres.gid)).expect("chown");
        let data = dir.path().join("data");
        as_postgres(&bin.join("initdb"))
            .args(["-A", "trust", "-U", "aromba", "--no-sync", "-D"])
            .arg(&data)
            .timeout(Duration::from_secs(120))
            .assert()
            .success();
        let port = free_port();
        let pg = PrivatePostgres {
            data,
            bin,
            port,
            _dir: dir,
        };
        pg.pg_ctl(&format!(
            "-o '-p {port} -k {data} -c listen_addresses=127.0.0.1 -c fsync=off' -l {data}/log -w start",
            data = pg.data.display()
        ));
        pg
    }

    fn url(&self) -> String {
        format!("postgres://aromba@127.0.0.1:{}/postgres", self.port)
    }

    fn restart(&self) {
        self.pg_ctl("-m fast -w restart");
    }

    /// `pg_ctl` through a shell whose output goes nowhere: the server it
    /// starts inherits its descriptors, and a pipe it held would never
    /// close.
    fn pg_ctl(&self, args: &str) {
        let line = format!(
            "{} -D {} {args} >/dev/null 2>&1",
            self.bin.join("pg_ctl").display(),
            self.data.display()
        );
        assert_cmd::Command::new("runuser")
            .args(["-u", "postgres", "--", "sh", "-c", &line])
            .timeout(Duration::from_secs(60))
            .assert()
            .success();
    }
}

impl Drop for PrivatePostgres {
    fn drop(&mut self) {
        let line = format!(
            "{} -D {} -m immediate stop >/dev/null 2>&1",
            self.bin.join("pg_ctl").display(),
            self.data.display()
        );
        let _ = assert_cmd::Command::new("runuser")
            .args(["-u", "postgres", "--", "sh", "-c", &line])
            .timeout(Duration::from_secs(30))
            .output();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_restarted_under_load_loses_no_committed_delivery() {
    let pg = tokio::task::spawn_blocking(PrivatePostgres::start)
        .await
        .expect("started");
    let db = PgPoolOptions::new()
        .max_connections(8)
        .connect(&pg.url())
        .await
        .expect("the private PostgreSQL answers");
    let relay = start(db.clone(), config()).await;
    let seen = Arc::new(Mutex::new(HashMap::<i64, u32>::new()));
    let (stop, stopped) = tokio::sync::watch::channel(false);
    let mut servers = Vec::new();
    let mut keep = Vec::new();
    for _ in 0..5 {
        let server = Server::new();
        assert_eq!(post_json(&relay, &server.registration()).await.0, 201);
        let (tx, rx) = tokio::sync::mpsc::channel::<Outgoing>(1);
        keep.push(tx);
        let record = seen.clone();
        tokio::spawn(run(
            server.endpoint(&relay),
            move |id, _| {
                *record.lock().expect("lock").entry(id).or_default() += 1;
            },
            rx,
            stopped.clone(),
        ));
        servers.push(server);
    }
    // Load: enqueue as fast as the database lets us, through a restart.
    let committed = Arc::new(Mutex::new(Vec::<i64>::new()));
    let load = {
        let (db, committed) = (db.clone(), committed.clone());
        let ids: Vec<_> = servers.iter().map(|s| s.id).collect();
        tokio::spawn(async move {
            let until = tokio::time::Instant::now() + Duration::from_secs(4);
            let mut i = 0usize;
            while tokio::time::Instant::now() < until {
                let d = Delivery::Message {
                    text: format!("m{i}"),
                };
                if let Ok((id, _)) = aromba_relay::outbox::enqueue(
                    &db,
                    ids[i % ids.len()],
                    &d,
                    chrono::Utc::now(),
                    500,
                )
                .await
                {
                    committed.lock().expect("lock").push(id);
                }
                i += 1;
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        })
    };
    tokio::time::sleep(Duration::from_millis(1_500)).await;
    let pg = tokio::task::spawn_blocking(move || {
        pg.restart();
        pg
    })
    .await
    .expect("restarted");
    load.await.expect("load");
    let committed = committed.lock().expect("lock").clone();
    assert!(committed.len() > 100, "only {} enqueued", committed.len());
    let mut all = false;
    for _ in 0..1_200 {
        let arrived = {
            let seen = seen.lock().expect("lock");
            committed.iter().all(|id| seen.contains_key(id))
        };
        if arrived {
            all = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let seen = seen.lock().expect("lock").clone();
    let missing = committed.iter().filter(|id| !seen.contains_key(id)).count();
    assert!(
        all,
        "{missing} of {} committed deliveries never arrived",
        committed.len()
    );
    assert!(
        seen.values().all(|&n| n == 1),
        "a delivery was handled twice"
    );
    let _ = stop.send(true);
    relay.stop().await;
    drop(pg);
}
