#![forbid(unsafe_code)]
#![cfg_attr(not(test), deny(clippy::unwrap_used, clippy::expect_used))]

use aromba_warden::cli::{self, Command};
use std::process::ExitCode;

fn main() -> ExitCode {
    let command = match cli::parse_os(std::env::args_os().skip(1)) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("aromba-warden: {e}");
            return ExitCode::from(2);
        }
    };
    match command {
        Command::Help => {
            print!("{}", cli::HELP);
            ExitCode::SUCCESS
        }
        Command::Version => {
            println!("aromba-warden {}", env!("CARGO_PKG_VERSION"));
            ExitCode::SUCCESS
        }
        Command::PolicyRender => {
            print!("{}", aromba_warden::policy::render());
            ExitCode::SUCCESS
        }
        Command::PolicyCheck {
            cmd,
            args,
            worker_user,
        } => {
            use aromba_warden::policy::{self, Requester, Table};
            let Some(account) = worker_account(&worker_user) else {
                return ExitCode::from(2);
            };
            let worker = match aromba_warden::users::WorkerAccount::system(account.uid, account.gid)
            {
                Ok(w) => w,
                Err(e) => {
                    eprintln!("aromba-warden: cannot read the Worker's groups: {e}");
                    return ExitCode::from(2);
                }
            };
            match policy::check(Table::Allow, &cmd, &args, &Requester::Worker(worker)) {
                Ok(allowed) => {
                    println!(
                        "allowed by {}: {cmd} {}",
                        allowed.rule_name(),
                        allowed.args.join(" ")
                    );
                    ExitCode::SUCCESS
                }
                Err(refused) => {
                    println!("refused: {}", refused.reason);
                    if let Some(signal) = refused.signal {
                        println!("ladder signal: {signal}");
                    }
                    ExitCode::from(1)
                }
            }
        }
        Command::JournalVerify { path, key, root } => journal_verify(path, key, root),
        Command::Serve { root, worker_user } => serve(root, &worker_user),
        Command::Install {
            root,
            worker_bin,
            worker_user,
            installed_days_ago,
            telegram_key,
        } => install(
            root,
            &worker_bin,
            &worker_user,
            installed_days_ago,
            telegram_key,
        ),
        Command::Rollback { root } => rollback(root),
        Command::Redact | Command::RedactCut => {
            let cut = command == Command::RedactCut;
            let result = aromba_warden::redact_cmd::run(
                std::io::stdin().lock(),
                std::io::stdout().lock(),
                std::io::stderr().lock(),
                cut,
            );
            match result {
                Ok(_) => ExitCode::SUCCESS,
                Err(e) => {
                    eprintln!("aromba-warden: redact could not copy stdin to stdout: {e}");
                    ExitCode::FAILURE
                }
            }
        }
    }
}

/// `aromba-warden rollback`: the previous release back, the failure
/// recorded and journaled, both services restarted.
fn rollback(root: Option<std::path::PathBuf>) -> ExitCode {
    use aromba_warden::update::{Releases, roll_back_installed};
    if aromba_warden::system::euid() != 0 {
        eprintln!("aromba-warden: rollback must run as root");
        return ExitCode::FAILURE;
    }
    let layout = aromba_warden::layout::Layout::from_root(root.as_deref());
    let releases = match &root {
        Some(r) => Releases::rooted(r),
        None => Releases::system(),
    };
    let (failed, restored) =
        match roll_back_installed(&layout, &releases, std::path::Path::new("/proc/self/exe")) {
            Ok(v) => v,
            Err(e) => {
                eprintln!("aromba-warden: rollback failed: {e}");
                return ExitCode::FAILURE;
            }
        };
    println!("release {failed} failed to start; {restored} is current again");
    journal_rollback(&layout, &failed.to_string(), &restored.to_string());
    if root.is_some() {
        println!("under --root: the services are not restarted");
        return ExitCode::SUCCESS;
    }
    match aromba_warden::update::restart_services(std::path::Path::new("/usr/bin/systemctl")) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("aromba-warden: the services were not restarted: {e}");
            ExitCode::FAILURE
        }
    }
}

/// One journal line for the rollback (the Warden is stopped while it runs).
fn journal_rollback(layout: &aromba_warden::layout::Layout, failed: &str, restored: &str) {
    use aromba_warden::journal::{AuditKey, Journal, JournalConfig};
    let mut config = JournalConfig::new(layout.journal_dir.clone());
    let key = layout.audit_key();
    if key.exists() {
        match AuditKey::load(&key, Some(&layout.journal_dir)) {
            Ok(k) => config.key = Some(k),
            Err(e) => {
                eprintln!(
                    "aromba-warden: the journal's key cannot be read ({e}); the rollback is not journaled"
                );
                return;
            }
        }
    }
    let line = aromba_warden::server::rolled_back_line(failed, restored);
    match Journal::open(config).and_then(|mut j| j.append(line)) {
        Ok(_) => {}
        Err(e) => eprintln!("aromba-warden: the rollback is not journaled: {e}"),
    }
}

fn journal_verify(
    path: Option<std::path::PathBuf>,
    key: Option<std::path::PathBuf>,
    root: Option<std::path::PathBuf>,
) -> ExitCode {
    use aromba_warden::journal::{AuditKey, verify};
    use aromba_warden::layout::Layout;
    let layout = Layout::from_root(root.as_deref());
    let path = path.unwrap_or_else(|| layout.journal_file());
    let key = match key.map(|k| AuditKey::load(&k, path.parent())) {
        None => None,
        Some(Ok(k)) => Some(k),
        Some(Err(e)) => {
            eprintln!("aromba-warden: {e}");
            return ExitCode::from(2);
        }
    };
    match verify(&path, key.as_ref()) {
        Ok(report) => {
            println!("{report}");
            ExitCode::SUCCESS
        }
        Err(e) => {
            println!("journal broken: {e}");
            ExitCode::from(1)
        }
    }
}

fn serve(root: Option<std::path::PathBuf>, worker_user: &str) -> ExitCode {
    use aromba_warden::layout::Layout;
    use aromba_warden::server::{ServeOptions, Server};
    if aromba_warden::system::euid() != 0 {
        eprintln!("aromba-warden: serve must run as root");
        return ExitCode::FAILURE;
    }
    let Some(account) = worker_account(worker_user) else {
        return ExitCode::FAILURE;
    };
    if account.uid == 0 {
        eprintln!("aromba-warden: the Worker's account must not be root");
        return ExitCode::FAILURE;
    }
    let layout = Layout::from_root(root.as_deref());
    let mut options = ServeOptions::new(layout.clone(), account.uid, account.gid);
    if let Some(root) = &root {
        options.releases = aromba_warden::update::Releases::rooted(root);
        options.host = None;
    }
    let server = match Server::bind(options) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("aromba-warden: cannot start: {e}");
            return ExitCode::FAILURE;
        }
    };
    eprintln!(
        "aromba-warden: serving the Worker (uid {}) on {} and root on {}",
        account.uid,
        layout.worker_socket().display(),
        layout.control_socket().display()
    );
    server.run();
    ExitCode::SUCCESS
}

fn install(
    root: Option<std::path::PathBuf>,
    worker_bin: &std::path::Path,
    worker_user: &str,
    installed_days_ago: u64,
    telegram_key: Option<aromba_warden::init_data::TelegramKey>,
) -> ExitCode {
    use aromba_warden::install::{InstallOptions, install};
    use aromba_warden::ladder::{Clock, ManualClock, SystemClock};
    if aromba_warden::system::euid() != 0 {
        eprintln!("aromba-warden: install must run as root");
        return ExitCode::FAILURE;
    }
    let Some(account) = worker_account(worker_user) else {
        return ExitCode::FAILURE;
    };
    if !worker_bin.is_file() {
        eprintln!(
            "aromba-warden: the Worker's binary {} does not exist; name it with --worker-bin",
            worker_bin.display()
        );
        return ExitCode::FAILURE;
    }
    let layout = aromba_warden::layout::Layout::from_root(root.as_deref());
    let clock: std::sync::Arc<dyn Clock> = if installed_days_ago == 0 {
        std::sync::Arc::new(SystemClock)
    } else {
        ManualClock::new(
            SystemClock
                .now()
                .saturating_sub(installed_days_ago.saturating_mul(86_400)),
        )
    };
    let options = InstallOptions {
        layout: &layout,
        warden_bin: std::path::Path::new("/proc/self/exe"),
        worker_bin,
        worker_gid: account.gid,
        clock,
        telegram_key,
    };
    match install(&options) {
        Ok(done) => {
            println!("wrote the policy rendering to {}", done.policy.display());
            for pot in &done.honeypots {
                println!("planted a honeypot at {}", pot.display());
            }
            for (pot, why) in &done.honeypots_skipped {
                println!(
                    "did not plant the honeypot at {} ({why}); the Warden journals that it is unwatched",
                    pot.display()
                );
            }
            println!(
                "approvals in the Mini App are checked with {}",
                aromba_warden::telegram::key_words(&layout)
            );
            println!(
                "recorded the integrity baseline in {}",
                done.baseline.display()
            );
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("aromba-warden: install failed: {e}");
            ExitCode::FAILURE
        }
    }
}

/// The Worker's account, or one sentence on stderr saying why not.
fn worker_account(name: &str) -> Option<aromba_warden::users::Account> {
    match aromba_warden::users::lookup(std::path::Path::new("/etc/passwd"), name) {
        Ok(Some(a)) => Some(a),
        Ok(None) => {
            eprintln!(
                "aromba-warden: the Worker's account {name:?} does not exist; the installer creates it"
            );
            None
        }
        Err(e) => {
            eprintln!("aromba-warden: cannot read /etc/passwd: {e}");
            None
        }
    }
}
