//! The skill catalogue from the Worker's side: `skills/index.json` in the
//! release folder, signed with the (test) release key, served over HTTP on
//! loopback as a release is (`testkit::release::serve`).
//!
//! First the Worker's own refusals, through `aromba::catalogue` as the
//! daemon calls it: an index another key signed is refused before any
//! bundle is asked for; a bundle whose size or SHA-256 is not the index's
//! is refused and nothing of it is left where the Warden reads. Then with
//! a real Warden: a good bundle is downloaded whole into
//! `skill-downloads/` and the Warden proposes it for the app, installing
//! nothing. End to end (a paired server, the real daemon): the assistant's
//! `propose_skill` puts the Warden's proposal in the chat and installs
//! nothing; the daily check applies an update that asks for nothing more
//! and says so, and proposes one that asks for more.

use aromba::catalogue::{self, CatalogueError};
use aromba::config::BaseUrl;
use aromba_relay_proto::client::Direct;
use aromba_release::Keys;
use aromba_testkit::release::{OTHER_KEY, RELEASE_KEY, RELEASE_PUB, key_line, serve};
use aromba_testkit::skills::{
    Publisher, catalogue_bundle, catalogue_entry, chore, manifest, publish_catalogue,
};
use aromba_testkit::updates::scratch;
use aromba_warden_proto::{Request, Response};
use serde_json::json;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

/// A bundle as the catalogue holds it: its version and bytes.
struct Bundle {
    version: String,
    bytes: Vec<u8>,
}

/// The catalogue's own skill `name`, as a release packs it.
fn shipped(name: &str) -> Bundle {
    of(catalogue_bundle(name))
}

fn of(bytes: Vec<u8>) -> Bundle {
    let entry = catalogue_entry(&bytes);
    Bundle {
        version: entry["version"].as_str().expect("a version").into(),
        bytes,
    }
}

/// Publishes `bundles` as the catalogue of the release folder
/// `dir/stable/`, as `scripts/release` writes it, its index signed with
/// `key`.
fn publish(dir: &Path, bundles: &[Bundle], key: &str) {
    let bytes: Vec<Vec<u8>> = bundles.iter().map(|b| b.bytes.clone()).collect();
    publish_catalogue(&dir.join("stable"), &bytes, key);
}

fn folder(url: &str) -> BaseUrl {
    BaseUrl::parse(&format!("{url}/stable")).expect("the release folder")
}

fn release_keys() -> Keys {
    Keys::from_base64(&[&key_line(RELEASE_PUB)]).expect("the test key")
}

/// What `home/skill-downloads/` holds (nothing when it is missing).
fn downloads(home: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(home.join(catalogue::DOWNLOADS))
        .map(|d| {
            d.flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    names.sort();
    names
}

/// The Worker's home in a scratch folder.
fn home_in(dir: &Path) -> PathBuf {
    let home = dir.join("home");
    std::fs::create_dir_all(&home).expect("home");
    home
}

#[tokio::test]
async fn an_index_signed_with_another_key_is_refused_and_no_bundle_is_asked_for() {
    let files = scratch("catalogue-other-key");
    publish(&files.0, &[shipped("nginx")], OTHER_KEY);
    let served = serve(files.0.clone());
    let home = home_in(&files.0);
    let fetched = catalogue::fetch_skill(
        &Direct,
        &folder(&served.url),
        None,
        &release_keys(),
        "nginx",
        &home,
    )
    .await;
    assert!(
        matches!(fetched, Err(CatalogueError::Signature(_))),
        "{fetched:?}"
    );
    assert_eq!(
        *served.asked.lock().expect("the log"),
        [
            "/stable/skills/index.json",
            "/stable/skills/index.json.minisig"
        ]
    );
    assert!(!home.join(catalogue::DOWNLOADS).exists());
}

#[tokio::test]
async fn a_bundle_whose_sha256_is_not_the_index_s_is_refused_and_not_left_in_skill_downloads() {
    let files = scratch("catalogue-sha256");
    let nginx = shipped("nginx");
    let file = files
        .0
        .join(format!("stable/skills/nginx-{}.skill", nginx.version));
    let mut changed = nginx.bytes.clone();
    publish(&files.0, &[nginx], RELEASE_KEY);
    // The same size, one byte of the manifest's description changed.
    let at = changed
        .windows(9)
        .position(|w| w == b"Summarise")
        .expect("the description");
    changed[at] = b'X';
    std::fs::write(&file, &changed).expect("the changed bundle");
    let served = serve(files.0.clone());
    let home = home_in(&files.0);
    let fetched = catalogue::fetch_skill(
        &Direct,
        &folder(&served.url),
        None,
        &release_keys(),
        "nginx",
        &home,
    )
    .await;
    assert!(
        matches!(&fetched, Err(CatalogueError::BundleHash(n)) if n == "nginx"),
        "{fetched:?}"
    );
    assert!(downloads(&home).is_empty(), "{:?}", downloads(&home));
}

#[tokio::test]
async fn a_bundle_longer_or_shorter_than_the_index_says_is_refused_and_not_kept() {
    let files = scratch("catalogue-size");
    let nginx = shipped("nginx");
    let file = files
        .0
        .join(format!("stable/skills/nginx-{}.skill", nginx.version));
    let bytes = nginx.bytes.clone();
    publish(&files.0, &[nginx], RELEASE_KEY);
    let served = serve(files.0.clone());
    let home = home_in(&files.0);
    let (url, keys) = (folder(&served.url), release_keys());
    let fetch = || catalogue::fetch_skill(&Direct, &url, None, &keys, "nginx", &home);
    // Longer: not read past the index's size.
    let mut longer = bytes.clone();
    longer.extend_from_slice(b"    ");
    std::fs::write(&file, &longer).expect("a longer bundle");
    let fetched = fetch().await;
    assert!(
        matches!(&fetched, Err(CatalogueError::Fetch(e)) if e.to_string().contains("more than")),
        "{fetched:?}"
    );
    // Shorter: cut on the way.
    std::fs::write(&file, &bytes[..bytes.len() - 1]).expect("a shorter bundle");
    let fetched = fetch().await;
    assert!(
        matches!(fetched, Err(CatalogueError::BundleSize { .. })),
        "{fetched:?}"
    );
    assert!(downloads(&home).is_empty(), "{:?}", downloads(&home));
}

#[tokio::test]
async fn a_skill_the_index_does_not_list_is_refused_and_nothing_is_downloaded() {
    let files = scratch("catalogue-unlisted");
    publish(&files.0, &[shipped("nginx")], RELEASE_KEY);
    let served = serve(files.0.clone());
    let home = home_in(&files.0);
    let fetched = catalogue::fetch_skill(
        &Direct,
        &folder(&served.url),
        None,
        &release_keys(),
        "certs",
        &home,
    )
    .await;
    assert!(
        matches!(&fetched, Err(CatalogueError::NoSuchSkill(n)) if n == "certs"),
        "{fetched:?}"
    );
    assert_eq!(served.asked.lock().expect("the log").len(), 2);
    assert!(downloads(&home).is_empty());
}

#[tokio::test]
async fn skill_downloads_as_a_link_is_refused_and_nothing_is_written_through_it() {
    let files = scratch("catalogue-link");
    publish(&files.0, &[shipped("nginx")], RELEASE_KEY);
    let served = serve(files.0.clone());
    let home = home_in(&files.0);
    let elsewhere = files.0.join("elsewhere");
    std::fs::create_dir_all(&elsewhere).expect("elsewhere");
    std::os::unix::fs::symlink(&elsewhere, home.join(catalogue::DOWNLOADS)).expect("a link");
    let fetched = catalogue::fetch_skill(
        &Direct,
        &folder(&served.url),
        None,
        &release_keys(),
        "nginx",
        &home,
    )
    .await;
    assert!(
        matches!(fetched, Err(CatalogueError::NotAFolder(_))),
        "{fetched:?}"
    );
    assert_eq!(std::fs::read_dir(&elsewhere).expect("elsewhere").count(), 0);
}

/// A real Warden (the test's uid as its Worker) trusting the test release
/// key: the catalogue's bundle downloaded into its Worker's home is
/// proposed for the app, and nothing is installed by the proposal.
#[test]
fn a_good_bundle_is_downloaded_whole_and_the_warden_proposes_it_installing_nothing() {
    let w = aromba_testkit::warden::Warden::start_with("catalogue-propose", true, &[], |o| {
        o.release_keys = Some(vec![key_line(RELEASE_PUB)]);
    });
    let files = scratch("catalogue-propose");
    let nginx = shipped("nginx");
    let bytes = nginx.bytes.clone();
    publish(&files.0, &[nginx], RELEASE_KEY);
    let served = serve(files.0.clone());
    let home = w.layout().worker_home;
    std::fs::create_dir_all(&home).expect("the Worker's home");
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime");
    let entry = runtime
        .block_on(catalogue::fetch_skill(
            &Direct,
            &folder(&served.url),
            None,
            &release_keys(),
            "nginx",
            &home,
        ))
        .expect("downloaded");
    assert_eq!(entry.name, "nginx");
    let path = catalogue::download_path(&home, "nginx");
    assert_eq!(std::fs::read(&path).expect("the download"), bytes);
    let mode = |p: &Path| {
        std::fs::symlink_metadata(p)
            .expect("metadata")
            .permissions()
            .mode()
            & 0o777
    };
    assert_eq!(mode(&path), 0o600);
    assert_eq!(mode(&home.join(catalogue::DOWNLOADS)), 0o700);
    assert_eq!(downloads(&home), ["nginx.skill"]);

    let answer = w.ask(&Request::ProposeSkill {
        name: "nginx".into(),
    });
    match &answer {
        Response::Proposed {
            text, buttons, app, ..
        } => {
            assert!(app.is_some(), "approved in the app: {answer:?}");
            assert!(text.contains("nginx"), "{text}");
            assert!(buttons.iter().any(|b| b.data == "approve"), "{answer:?}");
        }
        other => panic!("not proposed: {other:?}"),
    }
    match w.ask(&Request::Skills) {
        Response::Skills { skills, .. } => {
            assert!(skills.is_empty(), "installed by a proposal: {skills:?}")
        }
        other => panic!("{other:?}"),
    }
}

// ---------------------------------------------------------------------
// End to end: the paired server, the real daemon.
// ---------------------------------------------------------------------

mod end_to_end {
    use super::*;
    use aromba_testkit::model_fake::{Canned, Script, call, say, tool_results, with_model_setup};
    use aromba_testkit::paired::{CHAT, Paired, Setup, paired_with};
    use sqlx::PgPool;
    use std::sync::Arc;
    use std::time::Duration;

    /// The Approve button's label when the app approves.
    const APPROVE_IN_APP: &str = "Approve (opens the app)";

    /// A pairing with the release folder `url/stable` (its host listed in
    /// `network.toml`), the daemon checking with the test key, and a
    /// Warden trusting it for releases and skills of `aromba`'s.
    fn setup(url: &str) -> Setup {
        aromba_testkit::updates::setup(url)
    }

    /// A skill `demo` of `aromba`'s at `version`, writing one folder and
    /// reading `reads` (none, or more for an update that asks for more).
    fn demo(version: &str, reads: &[&str], body: &str) -> Vec<u8> {
        let writes = PathBuf::from(format!("/var/tmp/aromba-demo-skill-{}", std::process::id()));
        let mut m = manifest("demo", version, "aromba", &writes, &["demo-tidy"]);
        m["reads"] = json!(reads);
        let script = chore("demo-tidy", "green", &writes, "", body);
        Publisher::release().bundle(m, &[("chores/demo-tidy.sh", &script)])
    }

    /// The first message after `after` with the app's Approve button,
    /// waited for past the daily check's first look.
    async fn proposal_in_the_chat(p: &Paired, after: usize) -> aromba_botfake::state::Sent {
        for _ in 0..1200 {
            if let Some(m) = p
                .bot
                .fake
                .sent_to(CHAT)
                .into_iter()
                .skip(after)
                .find(|m| m.buttons.iter().flatten().any(|(l, _)| l == APPROVE_IN_APP))
            {
                return m;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        panic!(
            "no proposal approved in the app came: {:?}",
            p.bot
                .fake
                .sent_to(CHAT)
                .iter()
                .map(|m| m.text.clone())
                .collect::<Vec<_>>()
        );
    }

    #[sqlx::test(migrations = false)]
    async fn the_assistant_proposes_a_catalogue_skill_and_the_chat_shows_the_wardens_proposal(
        db: PgPool,
    ) {
        let files = scratch("catalogue-assistant");
        publish(&files.0, &[shipped("nginx")], RELEASE_KEY);
        let served = serve(files.0.clone());
        let script: Script = Arc::new(|_, request, _| {
            let answered = request["messages"]
                .as_array()
                .is_some_and(|m| m.iter().any(|m| m["role"] == "tool"));
            if answered {
                Canned::ok(say("I proposed the nginx skill."))
            } else {
                Canned::ok(call(
                    "propose_skill",
                    json!({"name": "nginx", "why": "nginx's errors are hard to read by hand"}),
                ))
            }
        });
        let (p, model) = with_model_setup(
            db,
            "catalogue-assistant",
            setup(&served.url),
            script,
            |_| {},
        )
        .await;
        let before = p.bot.fake.sent_to(CHAT).len();
        p.ask("can you help me watch nginx?", |t| t.contains("tokens in"))
            .await;
        let reason = p
            .next(before, |t| {
                t.contains("The assistant proposes the skill nginx.")
            })
            .await;
        assert!(
            reason.text.contains("hard to read by hand"),
            "{}",
            reason.text
        );
        let proposal = proposal_in_the_chat(&p, before).await;
        assert!(proposal.text.contains("nginx"), "{}", proposal.text);
        // Downloaded where the Warden reads it; nothing installed.
        assert!(
            p.warden
                .root
                .join("home/skill-downloads/nginx.skill")
                .exists()
        );
        assert!(p.warden.skills_installed().is_empty());
        let results = tool_results(&model.asked());
        assert!(
            results
                .iter()
                .any(|r| r.contains("\nproposed: the owner will see the skill's whole manifest")),
            "{results:?}"
        );
        let asked = served.asked.lock().expect("the log").clone();
        assert!(
            asked.contains(&"/stable/skills/nginx-1.0.0.skill".to_string()),
            "{asked:?}"
        );
    }

    /// What the chat says with `want` in it, waited for past the daily
    /// check's first look (`next` waits a minute).
    async fn said_after_the_first_look(p: &Paired, want: &str) -> aromba_botfake::state::Sent {
        p.next(0, |t| t.contains(want)).await
    }

    #[sqlx::test(migrations = false)]
    async fn the_daily_check_applies_a_skill_update_asking_nothing_more_and_says_so(db: PgPool) {
        let files = scratch("catalogue-update");
        let newer = of(demo("1.1.0", &[], "echo tidied, again"));
        publish(&files.0, &[newer], RELEASE_KEY);
        let served = serve(files.0.clone());
        let p = paired_with(db, "catalogue-update", setup(&served.url), |w| {
            w.install_skill(&demo("1.0.0", &[], "echo tidied"));
        })
        .await;
        let told = said_after_the_first_look(&p, "Updated the skill demo").await;
        assert_eq!(
            told.text,
            "Updated the skill demo to 1.1.0: it asks for nothing more than before."
        );
        assert_eq!(
            p.warden.skills_installed(),
            [("demo".to_string(), "1.1.0".to_string())]
        );
        // Nothing was proposed for it.
        assert!(
            p.bot.fake.sent_to(CHAT).iter().all(|m| !m
                .buttons
                .iter()
                .flatten()
                .any(|(l, _)| l == APPROVE_IN_APP))
        );
    }

    #[sqlx::test(migrations = false)]
    async fn the_daily_check_proposes_a_skill_update_asking_for_more_and_remembers_it(db: PgPool) {
        let files = scratch("catalogue-widens");
        let newer = of(demo("1.1.0", &["/var/log"], "echo tidied, reading logs"));
        publish(&files.0, &[newer], RELEASE_KEY);
        let served = serve(files.0.clone());
        let p = paired_with(db, "catalogue-widens", setup(&served.url), |w| {
            w.install_skill(&demo("1.0.0", &[], "echo tidied"));
        })
        .await;
        let proposal = proposal_in_the_chat(&p, 0).await;
        assert!(proposal.text.contains("demo"), "{}", proposal.text);
        assert_eq!(
            p.warden.skills_installed(),
            [("demo".to_string(), "1.0.0".to_string())]
        );
        // Kept, so the next day's check does not propose it again.
        let kept = aromba_testkit::relay::bot::eventually("the check's record", || {
            std::fs::read_to_string(p.warden.root.join("home/update-check.json"))
                .ok()
                .and_then(|t| serde_json::from_str::<serde_json::Value>(&t).ok())
                .filter(|v| v["skills_proposed"] != json!({}))
        })
        .await;
        assert_eq!(kept["skills_proposed"], json!({"demo": "1.1.0"}));
    }
}
