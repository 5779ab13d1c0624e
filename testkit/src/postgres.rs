//! A PostgreSQL cluster of the test's own (initdb in a temporary
//! directory, run as the `postgres` user, on its own port), which a test
//! may restart, or crash, while the relay works on it. Needs PostgreSQL's
//! programs under /usr/lib/postgresql and a `postgres` user (the test
//! command installs both); a test using it fails, never skips, without them.

use crate::relay::free_port;
use std::path::PathBuf;
use std::time::Duration;

/// A PostgreSQL cluster in a temporary directory, on its own port.
pub struct PrivatePostgres {
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
    pub fn start() -> PrivatePostgres {
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
        pg.start_server();
        pg
    }

    /// Starts the server on its port, its socket and log in its directory.
    fn start_server(&self) {
        self.pg_ctl(&format!(
            "-o '-p {port} -k {data} -c listen_addresses=127.0.0.1 -c fsync=off' -l {data}/log -w start",
            port = self.port,
            data = self.data.display()
        ));
    }

    pub fn url(&self) -> String {
        format!("postgres://aromba@127.0.0.1:{}/postgres", self.port)
    }

    /// A clean restart: connections are told, then closed.
    pub fn restart(&self) {
        self.pg_ctl("-m fast -w restart");
    }

    /// A crash and a start: every backend killed at once, as a power cut
    /// does to the server (not to the disk: the data directory is
    /// recovered from the write-ahead log when it starts again).
    pub fn crash_and_start(&self) {
        self.pg_ctl("-m immediate -w stop");
        self.start_server();
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
