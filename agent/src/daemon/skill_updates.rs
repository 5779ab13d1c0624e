//! Skills from the catalogue, as the Worker sees them: the release
//! folder's `skills/index.json`, signed with the release key
//! ([`crate::catalogue`]), read through the same gate as releases. Once a
//! day, after the release check, each installed skill whose catalogue
//! version is higher is downloaded into `skill-downloads/` and handed to
//! the Warden: an update asking for nothing more than the installed
//! version the Warden applies itself (the chat is told); one asking for
//! more is proposed in the chat, once a version (and no version at or
//! below one proposed is looked at again), the owner deciding in the app.
//! The assistant reads the catalogue and proposes a skill through here
//! too; nothing here installs anything.

use super::Daemon;
use super::schedule::Proposal;
use super::update::{UpdateSource, keys};
use crate::catalogue::{self, CatalogueError};
use crate::warden_client;
use aromba_release::Version;
use aromba_warden_proto::{Request, Response};
use aromba_words::updates as words;
use std::collections::BTreeMap;

/// The catalogue of `source`, its index verified with the release keys.
async fn catalogue_of(source: &UpdateSource) -> Result<catalogue::Index, CatalogueError> {
    let keys = keys().map_err(CatalogueError::Keys)?;
    catalogue::index(&source.gate, &source.url, source.roots.clone(), &keys).await
}

/// The update of each installed skill the catalogue holds a higher
/// version of: downloaded, and handed to the Warden.
pub(super) async fn check(
    daemon: &Daemon,
    source: &UpdateSource,
    proposed: &mut BTreeMap<String, String>,
) {
    let installed = match daemon.warden().skills().await {
        Ok((skills, _)) => skills,
        Err(e) => {
            tracing::warn!(error = ?e, "the installed skills could not be listed");
            return;
        }
    };
    // What was proposed and is installed since (or removed) is forgotten.
    proposed.retain(|name, version| {
        installed.iter().any(|s| {
            &s.name == name
                && Version::parse(&s.version)
                    .ok()
                    .zip(Version::parse(version).ok())
                    .is_some_and(|(have, proposed)| have < proposed)
        })
    });
    if installed.is_empty() {
        return;
    }
    let index = match catalogue_of(source).await {
        Ok(i) => i,
        Err(e) => {
            tracing::warn!(error = %e, "the skill catalogue could not be read");
            return;
        }
    };
    for skill in &installed {
        let Some(entry) = index.entry(&skill.name) else {
            continue;
        };
        let Ok(have) = Version::parse(&skill.version) else {
            continue;
        };
        let version = entry.version.to_string();
        // Not at or below the version proposed already: the owner was asked
        // about that one, and a mirror replaying an older index (signed
        // when it was current) would otherwise have a proposal made again
        // each day it alternates two of them (found by the attack round).
        let asked_already = proposed
            .get(&skill.name)
            .and_then(|v| Version::parse(v).ok())
            .is_some_and(|asked| entry.version <= asked);
        if entry.version <= have || asked_already {
            continue;
        }
        if let Err(e) = catalogue::download(
            &source.gate,
            &source.url,
            source.roots.clone(),
            entry,
            &daemon.paths.home,
        )
        .await
        {
            tracing::warn!(skill = %skill.name, error = %e, "a skill's update was not downloaded");
            continue;
        }
        let name = skill.name.clone();
        let answer = warden_client::ask(
            &daemon.worker_socket(),
            &Request::SkillUpdate { name: name.clone() },
        )
        .await;
        match answer {
            Ok(Response::Noted { .. }) => {
                tracing::info!(skill = %name, %version, "the Warden applied a skill's update");
                daemon
                    .say(words::skill_updated(&name, &version), vec![])
                    .await;
            }
            Ok(Response::Refused { reason, .. })
                if reason.starts_with(aromba_warden_proto::SKILL_WIDENS) =>
            {
                // It asks for more: the owner reads it whole and decides,
                // once for this version.
                super::schedule::propose(
                    daemon,
                    &Request::ProposeSkill { name: name.clone() },
                    &words::the_skill_update(&name),
                )
                .await;
                proposed.insert(name, version);
            }
            other => {
                tracing::warn!(skill = %name, %version, answer = ?other, "a skill's update was not applied");
            }
        }
    }
}

/// What the assistant's `skill_catalogue` reads: the catalogue's skills,
/// each with the version installed here; or why not, for the model.
pub async fn catalogue_listed(daemon: &Daemon) -> Result<Vec<catalogue::Listed>, String> {
    let Some(source) = &daemon.updates else {
        return Err(aromba_words::assistant::tool::NO_CATALOGUE.into());
    };
    let index = catalogue_of(source).await.map_err(|e| e.to_string())?;
    let installed: Vec<(String, String)> = match daemon.warden().skills().await {
        Ok((skills, _)) => skills.into_iter().map(|s| (s.name, s.version)).collect(),
        Err(e) => return Err(warden_said(e)),
    };
    Ok(catalogue::listed(&index, &installed))
}

fn warden_said(e: crate::warden_client::WardenError) -> String {
    use crate::warden_client::WardenError;
    match e {
        WardenError::Refused(reason) | WardenError::Failed(reason) => reason,
        WardenError::Unexpected(other) => {
            aromba_words::assistant::tool::odd_answer(&format!("{other:?}"))
        }
        WardenError::Unreachable(e) => aromba_words::chat::warden_not_asked(&e),
    }
}

/// Downloads skill `name` of the catalogue into the Worker's
/// `skill-downloads/` and asks the Warden to propose its install (what the
/// assistant's `propose_skill` does): its proposal, or why not, for the
/// model. Nothing is said in the chat here.
pub async fn skill_proposal(daemon: &Daemon, name: &str) -> Result<Proposal, String> {
    let Some(source) = &daemon.updates else {
        return Err(aromba_words::assistant::tool::NO_CATALOGUE.into());
    };
    let keys = keys().map_err(|e| CatalogueError::Keys(e).to_string())?;
    catalogue::fetch_skill(
        &source.gate,
        &source.url,
        source.roots.clone(),
        &keys,
        name,
        &daemon.paths.home,
    )
    .await
    .map_err(|e| e.to_string())?;
    let answer = warden_client::ask(
        &daemon.worker_socket(),
        &Request::ProposeSkill {
            name: name.to_string(),
        },
    )
    .await;
    let other = match Proposal::of(answer) {
        Ok(proposal) => return Ok(proposal),
        Err(other) => *other,
    };
    match other {
        Ok(Response::Refused { reason, .. }) => Err(reason),
        Ok(Response::Error { message }) => Err(message),
        Ok(other) => Err(aromba_words::assistant::tool::odd_answer(&format!(
            "{other:?}"
        ))),
        Err(e) => Err(aromba_words::chat::warden_not_asked(&e)),
    }
}
