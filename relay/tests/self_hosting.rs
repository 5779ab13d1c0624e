//! The self-hosting guide against the files it describes: every setting
//! README's "Self-hosting the relay" tells a self-hoster to set reaches
//! the relay's container through `docker-compose.yml` (an explicit
//! environment list drops whatever it does not name, silently: the
//! rotation recipe once did nothing), and the bot token's files never
//! reach git or the image's build context.

use std::collections::BTreeSet;

const README: &str = include_str!("../../README.md");
const COMPOSE: &str = include_str!("../../docker-compose.yml");
const GITIGNORE: &str = include_str!("../../.gitignore");
const DOCKERIGNORE: &str = include_str!("../../.dockerignore");

/// The guide's section.
fn guide() -> &'static str {
    let start = README
        .find("## Self-hosting the relay")
        .expect("README has the self-hosting guide");
    let rest = &README[start + 3..];
    let end = rest.find("\n## ").map_or(rest.len(), |e| e);
    &rest[..end]
}

/// The settings a text names: words of capitals, digits and `_` starting
/// with one of the relay's prefixes.
fn settings(text: &str) -> BTreeSet<String> {
    text.split(|c: char| !(c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_'))
        .filter(|w| {
            ["AROMBA_", "TELEGRAM_", "DATABASE_"]
                .iter()
                .any(|p| w.starts_with(p) && w.len() > p.len())
        })
        .map(String::from)
        .collect()
}

/// The relay service's environment keys, those behind `# rotation: ` (the
/// guide says to uncomment them) included.
fn relay_environment() -> BTreeSet<String> {
    let relay = COMPOSE
        .split("\n  relay:\n")
        .nth(1)
        .expect("a relay service");
    let env = relay
        .split("environment:\n")
        .nth(1)
        .expect("an environment list");
    env.lines()
        .take_while(|l| l.starts_with("      ") || l.trim().is_empty())
        .map(|l| l.trim().trim_start_matches("# rotation: "))
        .filter(|l| !l.starts_with('#'))
        .filter_map(|l| l.split_once(':').map(|(k, _)| k.trim().to_string()))
        .collect()
}

#[test]
fn every_setting_the_self_hosting_guide_names_reaches_the_relay_container() {
    let env = relay_environment();
    let named = settings(guide());
    assert!(named.len() >= 5, "the guide names settings: {named:?}");
    let missing: Vec<&String> = named
        .iter()
        .filter(|s| !env.contains(*s) && !env.contains(&format!("{s}_FILE")))
        .collect();
    assert!(
        missing.is_empty(),
        "the guide names settings docker-compose.yml does not hand the relay: {missing:?} (it hands {env:?})"
    );
}

#[test]
fn the_webhook_secret_rotation_is_all_in_the_compose_file() {
    let env = relay_environment();
    for s in [
        "TELEGRAM_WEBHOOK_SECRET_FILE",
        "TELEGRAM_WEBHOOK_SECRET_PREVIOUS_FILE",
        "AROMBA_WEBHOOK_SECRET_OVERLAP_SECS",
    ] {
        assert!(env.contains(s), "{s} is not in the relay's environment");
    }
    assert!(COMPOSE.contains("# rotation: - telegram_webhook_secret_previous"));
    assert!(COMPOSE.contains("# rotation: telegram_webhook_secret_previous:"));
}

#[test]
fn the_bot_token_files_reach_neither_git_nor_the_image_build() {
    let lines = |text: &str| -> Vec<String> {
        text.lines()
            .map(|l| {
                l.trim()
                    .trim_end_matches('/')
                    .trim_start_matches('/')
                    .to_string()
            })
            .collect()
    };
    let git = lines(GITIGNORE);
    let docker = lines(DOCKERIGNORE);
    for name in [".env", "secrets"] {
        assert!(git.iter().any(|l| l == name), ".gitignore lacks {name}");
        assert!(
            docker.iter().any(|l| l == name),
            ".dockerignore lacks {name}"
        );
    }
}
