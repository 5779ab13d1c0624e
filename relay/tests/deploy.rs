//! The self-hosting files: docker-compose.yml parses, runs the relay from
//! deploy/relay.Dockerfile beside PostgreSQL with healthchecks and a named
//! volume, and sets only settings the binary knows.

use clap::CommandFactory;
use std::collections::BTreeSet;
use std::path::PathBuf;
use yaml_rust2::{Yaml, YamlLoader};

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// Every environment variable the binary reads, its subcommands' included.
fn known_settings() -> BTreeSet<String> {
    let cli = aromba_relay::config::Cli::command();
    let mut names = BTreeSet::new();
    let mut add = |cmd: &clap::Command| {
        for arg in cmd.get_arguments() {
            if let Some(env) = arg.get_env() {
                names.insert(env.to_string_lossy().into_owned());
            }
        }
    };
    add(&cli);
    for sub in cli.get_subcommands() {
        add(sub);
    }
    // Read by `main` itself, never a flag.
    names.insert(aromba_relay::telegram::token::ENV.to_string());
    names
}

fn compose() -> Yaml {
    let text =
        std::fs::read_to_string(repo().join("docker-compose.yml")).expect("docker-compose.yml");
    let mut docs = YamlLoader::load_from_str(&text).expect("docker-compose.yml is YAML");
    assert_eq!(docs.len(), 1);
    docs.remove(0)
}

#[test]
fn compose_runs_the_relay_from_its_dockerfile_beside_postgres() {
    let doc = compose();
    let relay = &doc["services"]["relay"];
    let db = &doc["services"]["db"];
    assert!(
        !relay.is_badvalue() && !db.is_badvalue(),
        "services relay and db"
    );
    let dockerfile = relay["build"]["dockerfile"].as_str().expect("a dockerfile");
    assert_eq!(dockerfile, "deploy/relay.Dockerfile");
    assert!(repo().join(dockerfile).is_file());
    assert_eq!(
        relay["depends_on"]["db"]["condition"].as_str(),
        Some("service_healthy")
    );
    let health: Vec<&str> = relay["healthcheck"]["test"]
        .as_vec()
        .expect("a healthcheck")
        .iter()
        .filter_map(Yaml::as_str)
        .collect();
    assert_eq!(
        health,
        ["CMD", "/usr/local/bin/aromba-relay", "healthcheck"]
    );
    assert!(db["healthcheck"]["test"].as_vec().is_some());
    // The database lives in a named volume.
    let volumes = doc["volumes"].as_hash().expect("named volumes");
    assert!(volumes.contains_key(&Yaml::String("db".into())));
    let mounts: Vec<&str> = db["volumes"]
        .as_vec()
        .expect("db volumes")
        .iter()
        .filter_map(Yaml::as_str)
        .collect();
    assert!(
        mounts.contains(&"db:/var/lib/postgresql/data"),
        "{mounts:?}"
    );
    // Metrics are published on the host's loopback only.
    let ports: Vec<&str> = relay["ports"]
        .as_vec()
        .expect("ports")
        .iter()
        .filter_map(Yaml::as_str)
        .collect();
    assert!(ports.contains(&"127.0.0.1:9090:9090"), "{ports:?}");
}

#[test]
fn compose_sets_only_settings_the_relay_knows() {
    let known = known_settings();
    for required in [
        "DATABASE_URL",
        "AROMBA_RELAY_LISTEN",
        "AROMBA_RELAY_METRICS_LISTEN",
        "AROMBA_TOKEN_PEPPER",
        "AROMBA_TRUSTED_PROXIES",
        "AROMBA_RELAY_TLS_CERT",
        "AROMBA_RELAY_TLS_KEY",
        "TELEGRAM_BOT_TOKEN",
        "AROMBA_TELEGRAM_MODE",
        "AROMBA_PUBLIC_URL",
        "TELEGRAM_WEBHOOK_SECRET",
        "AROMBA_TELEGRAM_APP",
    ] {
        assert!(
            known.contains(required),
            "the binary does not read {required}"
        );
    }
    let doc = compose();
    let env = doc["services"]["relay"]["environment"]
        .as_hash()
        .expect("the relay's environment");
    assert!(!env.is_empty());
    for (name, _) in env {
        let name = name.as_str().expect("a name");
        assert!(
            known.contains(name),
            "compose sets {name}, which the relay does not read"
        );
    }
}

#[test]
fn the_dockerfile_builds_offline_and_runs_without_shell_as_non_root() {
    let text = std::fs::read_to_string(repo().join("deploy/relay.Dockerfile")).expect("dockerfile");
    let froms: Vec<&str> = text.lines().filter(|l| l.starts_with("FROM ")).collect();
    assert_eq!(froms.len(), 2, "a build stage and a run stage");
    assert!(
        froms[1].contains("distroless"),
        "the run stage has no shell: {}",
        froms[1]
    );
    let after_last_from = &text[text.rfind("FROM ").expect("FROM")..];
    let user = after_last_from
        .lines()
        .find_map(|l| l.strip_prefix("USER "))
        .expect("a USER in the run stage");
    assert!(
        !user.starts_with("root") && !user.starts_with('0'),
        "{user}"
    );
    assert!(
        text.contains("SQLX_OFFLINE=true"),
        "the build needs no database"
    );
    let known = known_settings();
    for line in text.lines() {
        for word in line.split_whitespace() {
            if let Some((name, _)) = word.split_once('=')
                && name.starts_with("AROMBA_")
            {
                assert!(known.contains(name), "the Dockerfile sets {name}");
            }
        }
    }
}
