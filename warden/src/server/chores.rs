//! The chore requests: listing, the schedule's runs, dry runs and their
//! being shown, chore actions, and what a run needs of the Warden (its
//! snapshot, the quarantine's listing). A run itself, phase by phase, is
//! `chore_run.rs`; proposals and approvals are in `owner.rs`.

#![forbid(unsafe_code)]

use super::event::{Event, Outcome, Peer};
use super::intent::intend;
use super::{Shared, journal, unjournaled};
use crate::chores::header::Color;
use crate::chores::run::Chore;
use crate::chores::snapshot;
use crate::exec::{self, Bounds};
use crate::ladder::Step;
use crate::policy::{self, Table};
use crate::system::PeerCred;
use aromba_warden_proto::Response;

pub(super) fn runs_dir(shared: &Shared) -> std::path::PathBuf {
    shared.options.layout.state_dir.join("runs")
}

/// What a dry run's record starts with: the SHA-256 of the script that ran
/// (then the receipt). A real run counts on a dry run of its own script
/// only: an edited chore, a skill's update or a release's new script needs
/// a dry run shown again.
pub(super) fn dry_run_record(script: &str, receipt: &str) -> String {
    format!(
        "script_sha256={}\n{receipt}",
        crate::journal::sha256_hex(script.as_bytes())
    )
}

/// Whether a dry run of exactly `c`'s script was shown.
pub(super) fn dry_run_seen(shared: &Shared, c: &Chore) -> bool {
    let seen = runs_dir(shared).join(format!("{}.dry-run-seen", c.header.name));
    let want = format!(
        "script_sha256={}",
        crate::journal::sha256_hex(c.script.as_bytes())
    );
    std::fs::read_to_string(seen).is_ok_and(|s| s.lines().next() == Some(want.as_str()))
}

/// The publishers whose skills this server trusts.
pub(super) fn skill_trust(shared: &Shared) -> crate::skills::Trust<'_> {
    crate::skills::Trust {
        layout: &shared.options.layout,
        release_keys: shared.options.release_keys.as_deref(),
        written: shared
            .baseline
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .as_ref()
            .map(|b| b.state.clone()),
    }
}

/// Every chore as it stands here: in prod mode every one is red.
fn chores_here(shared: &Shared) -> Vec<Chore> {
    let layout = &shared.options.layout;
    let (mut chores, _refused) = crate::chores::catalog::all(layout, &skill_trust(shared));
    if crate::chores::quarantine::prod_mode_file(layout).exists() {
        for c in &mut chores {
            c.header.color = Color::Red;
        }
    }
    chores
}

pub(super) fn find_chore(shared: &Shared, name: &str) -> Option<Chore> {
    chores_here(shared)
        .into_iter()
        .find(|c| c.header.name == name)
}

/// At Freeze and above no chore or action runs.
pub(super) fn frozen(shared: &Shared) -> bool {
    shared.step() >= Step::Freeze
}

/// Keeps `receipt` as `chore`'s last run, and, for a real run, as its last
/// real run too: a dry run, which the Worker may ask at will, then does not
/// hide the receipt of a real run (its undo id) that the chat never got, a
/// run the Warden closed when it started again (found by the attack round).
pub(super) fn keep_last(runs: &std::path::Path, chore: &str, real: bool, receipt: &str) {
    let _ = std::fs::write(runs.join(format!("{chore}.last")), receipt.as_bytes());
    if real {
        let _ = std::fs::write(runs.join(format!("{chore}.last-real")), receipt.as_bytes());
    }
}

/// What `aromba chores` and the Trust page show of `chore`'s runs: its last
/// run, and its last real run after it when the last was a dry run.
fn last_receipt(runs: &std::path::Path, chore: &str) -> String {
    let read = |suffix: &str| {
        std::fs::read_to_string(runs.join(format!("{chore}.{suffix}")))
            .map(|s| s.trim().to_string())
            .ok()
    };
    match (read("last"), read("last-real")) {
        (None, _) => "never run".into(),
        (Some(last), Some(real))
            if last != real && last.starts_with(&format!("{chore}: dry run")) =>
        {
            format!("{last}; last real run: {real}")
        }
        (Some(last), _) => last,
    }
}

pub(super) fn chores_list(shared: &Shared) -> Response {
    let chores = chores_here(shared);
    let runs = runs_dir(shared);
    Response::Chores {
        chores: chores
            .iter()
            .map(|c| aromba_warden_proto::ChoreInfo {
                name: c.header.name.clone(),
                color: c.header.color.name().into(),
                schedule: c.header.schedule.to_string(),
                origin: c.origin.short(),
                last_receipt: last_receipt(&runs, &c.header.name),
                dry_run_seen: dry_run_seen(shared, c),
                cap_unconfirmed: super::owner::above_default(c)
                    && !super::owner::cap_confirmed(shared, c),
            })
            .collect(),
    }
}

/// Time-sync units: the only restart a green chore may ask for.
const TIME_SYNC_UNITS: &[&str] = &[
    "systemd-timesyncd.service",
    "chrony.service",
    "chronyd.service",
    "ntp.service",
    "ntpsec.service",
];

fn green_may_request(action: &[String]) -> bool {
    match action {
        [cmd, a, b] if cmd == "timedatectl" => a == "set-ntp" && b == "true",
        [cmd, a, unit] if cmd == "systemctl" => {
            a == "restart" && TIME_SYNC_UNITS.contains(&unit.as_str())
        }
        _ => false,
    }
}

/// Runs one chore action outside the cage, after a clean real run: judged
/// by the policy, journaled before it runs (not run when the line cannot
/// be written), its outcome journaled after.
pub(super) fn chore_action(shared: &Shared, chore: &str, green: bool, action: &[String]) -> String {
    let shown = action.join(" ");
    let Some((cmd, args)) = action.split_first() else {
        return format!("{shown}: empty");
    };
    let verdict = if green && !green_may_request(action) {
        Err("a green chore may request only time sync's two actions".to_string())
    } else {
        policy::check(Table::ChoreAction, cmd, args, &policy::Requester::Warden)
            .map_err(|r| r.reason)
    };
    // Nothing runs: the refusal is the whole story.
    let refused = |reason: String| {
        let line = Event::ChoreActionRefused {
            chore,
            action: &shown,
            reason: &reason,
        };
        journal(shared, line);
        format!("{shown}: refused ({reason})")
    };
    let allowed = match verdict {
        Err(reason) => return refused(reason),
        Ok(allowed) => allowed,
    };
    let rule = allowed.rule;
    let mut run_args = allowed.args.clone();
    if rule.cmd == "systemctl" {
        // The policy saw only the name given; systemd acts on the unit it
        // resolves to (an alias, an instance). That unit is judged, under
        // every name it has, and is what the restart names.
        match judge_unit(rule, &run_args) {
            Ok(id) => {
                if let Some(last) = run_args.last_mut() {
                    *last = id;
                }
            }
            Err(reason) => return refused(reason),
        }
    }
    if let Some((first, rest)) = run_args.split_first() {
        // The policy's own additions go right after the subcommand.
        let mut with = vec![first.clone()];
        with.extend(rule.warden_adds.iter().map(|s| s.to_string()));
        with.extend(rest.iter().cloned());
        run_args = with;
    }
    let act = Event::ChoreAction {
        chore,
        action: &shown,
        run_args: &run_args,
    };
    let Ok(intent) = intend(shared, act) else {
        return format!("{shown}: not run (the journal cannot be written)");
    };
    let env = exec::rule_env(rule);
    let bounds = Bounds::for_rule(rule);
    let result = exec::pick_binary(rule.cmd, rule.bins)
        .and_then(|bin| exec::run_program(&bin, &run_args, &env, &bounds));
    let (ran, line) = match result {
        Ok(o) => (
            Ok(o.exit_code),
            format!(
                "{shown}: exit {}",
                o.exit_code.map_or("killed".into(), |c| c.to_string())
            ),
        ),
        Err(e) => (Err(e.to_string()), format!("{shown}: failed ({e})")),
    };
    let ran = ran.as_ref().copied().map_err(String::as_str);
    intent.outcome(
        shared,
        Outcome::ChoreAction {
            action: &shown,
            ran,
        },
    );
    line
}

/// The unit a `systemctl restart NAME` acts on, resolved by systemd itself
/// (`systemctl show --property=Id,Names,LoadState -- NAME`, run by the
/// Warden, no shell), refused when it cannot be resolved, is not a loaded
/// service, or when its Id or any of its names matches `never_restart`.
/// Returns the unit's Id.
fn judge_unit(rule: &'static policy::Rule, args: &[String]) -> Result<String, String> {
    let [verb, name] = args else {
        return Err("systemctl: expected one verb and one unit".into());
    };
    if verb != "restart" {
        return Err(format!("systemctl: {verb} is not a restart"));
    }
    let bin = exec::pick_binary(rule.cmd, rule.bins)
        .map_err(|e| format!("cannot resolve {name}: {e}"))?;
    let show: Vec<String> = ["show", "--property=Id,Names,LoadState", "--", name.as_str()]
        .iter()
        .map(|s| s.to_string())
        .collect();
    let o = exec::run_program(&bin, &show, &[], &Bounds::for_rule(rule))
        .map_err(|e| format!("cannot resolve {name}: {e}"))?;
    if o.exit_code != Some(0) || o.cut {
        return Err(format!(
            "cannot resolve {name}: systemctl show failed: {}",
            o.stderr.lossy().trim()
        ));
    }
    let unit =
        resolve_unit(&o.stdout.lossy()).map_err(|e| format!("cannot resolve {name}: {e}"))?;
    if let Some(hit) = unit.names.iter().find(|n| policy::never_restart_matches(n)) {
        return Err(format!(
            "systemctl: {name} is {}, and its name {hit} matches never_restart",
            unit.id
        ));
    }
    Ok(unit.id)
}

/// A unit as `systemctl show --property=Id,Names,LoadState` describes it.
#[derive(Debug, PartialEq, Eq)]
struct ResolvedUnit {
    id: String,
    /// Every name of the unit, its Id first.
    names: Vec<String>,
}

/// Why `systemctl show` output names no unit the Warden restarts.
#[derive(Debug, PartialEq, Eq)]
enum UnitUnresolved {
    UnexpectedLine(String),
    UnexpectedProperty(String),
    Twice(String),
    Missing,
    NotLoaded { id: String, load: String },
    NotAService(String),
    NotAmongItsNames(String),
}

impl std::fmt::Display for UnitUnresolved {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            UnitUnresolved::UnexpectedLine(line) => write!(f, "unexpected line {line:?}"),
            UnitUnresolved::UnexpectedProperty(key) => write!(f, "unexpected property {key:?}"),
            UnitUnresolved::Twice(key) => write!(f, "{key} given twice"),
            UnitUnresolved::Missing => {
                f.write_str("systemctl show left out Id, Names or LoadState")
            }
            UnitUnresolved::NotLoaded { id, load } => {
                write!(f, "{id} is {load}, not a loaded unit")
            }
            UnitUnresolved::NotAService(id) => write!(f, "{id:?} is not a service unit"),
            UnitUnresolved::NotAmongItsNames(id) => write!(f, "{id} is not among its own names"),
        }
    }
}

/// Parses `systemctl show --property=Id,Names,LoadState` output, strictly:
/// exactly those three properties once each, a loaded service unit whose
/// Id is among its names. Anything else is an error, never a guess.
fn resolve_unit(show: &str) -> Result<ResolvedUnit, UnitUnresolved> {
    let (mut id, mut names, mut load) = (None, None, None);
    for line in show.lines().filter(|l| !l.is_empty()) {
        let Some((key, value)) = line.split_once('=') else {
            return Err(UnitUnresolved::UnexpectedLine(line.to_string()));
        };
        let slot = match key {
            "Id" => &mut id,
            "Names" => &mut names,
            "LoadState" => &mut load,
            _ => return Err(UnitUnresolved::UnexpectedProperty(key.to_string())),
        };
        if slot.replace(value).is_some() {
            return Err(UnitUnresolved::Twice(key.to_string()));
        }
    }
    let (Some(id), Some(names), Some(load)) = (id, names, load) else {
        return Err(UnitUnresolved::Missing);
    };
    if load != "loaded" {
        return Err(UnitUnresolved::NotLoaded {
            id: id.to_string(),
            load: load.to_string(),
        });
    }
    if id.is_empty() || !id.ends_with(".service") {
        return Err(UnitUnresolved::NotAService(id.to_string()));
    }
    let mut all = vec![id.to_string()];
    for n in names.split_whitespace() {
        if !all.iter().any(|a| a == n) {
            all.push(n.to_string());
        }
    }
    if !names.split_whitespace().any(|n| n == id) {
        return Err(UnitUnresolved::NotAmongItsNames(id.to_string()));
    }
    Ok(ResolvedUnit {
        id: id.to_string(),
        names: all,
    })
}

#[cfg(test)]
mod unit_tests {
    use super::*;

    // Shapes of `systemctl show --property=Id,Names,LoadState -- NAME` on
    // systemd 252 (Debian 12): the properties come in systemd's own order.

    #[test]
    fn an_alias_resolves_to_its_unit_and_every_name_is_judged() {
        let out = "Id=systemd-logind.service\nNames=systemd-logind.service dbus-org.freedesktop.login1.service\nLoadState=loaded\n";
        let u = resolve_unit(out).unwrap();
        assert_eq!(u.id, "systemd-logind.service");
        assert!(
            u.names
                .contains(&"dbus-org.freedesktop.login1.service".to_string())
        );
        assert!(u.names.iter().any(|n| policy::never_restart_matches(n)));
    }

    #[test]
    fn an_instance_resolves_to_itself_and_matches_its_template() {
        let out = "Id=getty@tty1.service\nNames=getty@tty1.service\nLoadState=loaded\n";
        let u = resolve_unit(out).unwrap();
        assert_eq!(u.names, vec!["getty@tty1.service".to_string()]);
        let out = "Id=systemd-journald@audit.service\nNames=systemd-journald@audit.service\nLoadState=loaded\n";
        let u = resolve_unit(out).unwrap();
        assert!(u.names.iter().any(|n| policy::never_restart_matches(n)));
    }

    #[test]
    fn an_ordinary_service_passes_with_its_aliases() {
        let out = "Id=ssh.service\nNames=ssh.service sshd.service\nLoadState=loaded\n";
        let u = resolve_unit(out).unwrap();
        assert_eq!(u.id, "ssh.service");
        assert!(!u.names.iter().any(|n| policy::never_restart_matches(n)));
    }

    #[test]
    fn an_unknown_unit_is_not_resolved() {
        let out = "Id=nosuch.service\nNames=nosuch.service\nLoadState=not-found\n";
        let e = resolve_unit(out).unwrap_err();
        assert!(
            matches!(&e, UnitUnresolved::NotLoaded { load, .. } if load == "not-found"),
            "{e:?}"
        );
        assert_eq!(
            e.to_string(),
            "nosuch.service is not-found, not a loaded unit"
        );
    }

    #[test]
    fn odd_output_is_never_guessed_at() {
        for out in [
            "",
            "Id=a.service\nNames=a.service\n",
            "Id=a.service\nId=b.service\nNames=a.service\nLoadState=loaded\n",
            "Id=a.service\nNames=b.service\nLoadState=loaded\n",
            "Id=a.socket\nNames=a.socket\nLoadState=loaded\n",
            "Id=a.service\nNames=a.service\nLoadState=loaded\nUser=root\n",
            "Id=\nNames=\nLoadState=loaded\n",
            "garbage\n",
        ] {
            assert!(resolve_unit(out).is_err(), "{out:?}");
        }
    }
}

/// Who asked for a chore run, which is what stands for its approval.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) enum RunSource {
    /// `aromba chore run` in a root terminal: the owner's approval, and the
    /// owner saw any dry run there.
    RootTerminal,
    /// The Worker: dry runs only.
    Worker,
    /// A relay-signed tap the Warden verified, on this action id.
    Approved { action_id: String },
    /// A green chore's schedule, asked by the Worker (`run_due`).
    Schedule,
}

/// The least time between two scheduled runs of a chore, by its schedule:
/// a Worker that asks again and again gets no more runs than the schedule
/// gives (with room for a clock moved or a late start).
fn least_between(schedule: &crate::chores::header::Schedule) -> Option<u64> {
    use crate::chores::header::Schedule;
    const HOUR: u64 = 3600;
    match schedule {
        Schedule::Manual => None,
        Schedule::Daily { .. } => Some(20 * HOUR),
        Schedule::Weekly { .. } => Some(6 * 24 * HOUR),
        Schedule::Monthly { .. } => Some(27 * 24 * HOUR),
    }
}

/// `run_due`: the Worker says a green chore's schedule has come. The
/// Warden runs it only when it is green and scheduled, and not sooner
/// after its last scheduled run than the schedule allows; everything
/// `run_chore` checks (the ladder, the dry run seen, the phase, the cage)
/// still holds. The time is recorded before the run, so a run that fails
/// is not retried at once either.
pub(super) fn run_due(shared: &Shared, peer: &PeerCred, chore: &str) -> Response {
    // Refusals are journaled like every other: a Worker asking for what the
    // schedule does not give leaves a line.
    let refuse = |reason: String| {
        let line = Event::RunDueRefused {
            peer: Peer::worker(peer),
            chore,
            reason: &reason,
        };
        let journal_seq = journal(shared, line);
        Response::Refused {
            reason,
            journal_seq,
        }
    };
    let Some(c) = find_chore(shared, chore) else {
        return refuse(format!("there is no chore named {chore:?}"));
    };
    let name = c.header.name.clone();
    if c.header.color != Color::Green {
        return refuse(format!(
            "{name} is {}: it runs on a tap the Warden verifies, not on the schedule alone (propose it)",
            c.header.color.name()
        ));
    }
    let Some(least) = least_between(&c.header.schedule) else {
        return refuse(format!(
            "{name} has no schedule: it runs when asked from a root terminal"
        ));
    };
    let runs = runs_dir(shared);
    let stamp = runs.join(format!("{name}.scheduled"));
    // Read and recorded as one step (found by the attack round: requests
    // sent at once all found the chore due, and raced on the record).
    let one_at_a_time = shared
        .schedule_check
        .lock()
        .unwrap_or_else(|p| p.into_inner());
    let now = shared.options.clock.now();
    let last = std::fs::read_to_string(&stamp)
        .ok()
        .and_then(|s| s.trim().parse::<u64>().ok());
    if let Some(last) = last
        && now.saturating_sub(last) < least
        && last <= now
    {
        return refuse(format!(
            "{name} ran on its schedule {} minutes ago; it is not due again yet",
            now.saturating_sub(last) / 60
        ));
    }
    if !dry_run_seen(shared, &c) {
        return refuse(format!(
            "{name}'s first real run needs a dry run shown in the chat first"
        ));
    }
    if let Err(e) = std::fs::create_dir_all(&runs)
        .and_then(|()| crate::atomic_file::replace(&stamp, format!("{now}\n").as_bytes(), 0o600))
    {
        return refuse(format!("cannot record the scheduled run: {e}"));
    }
    drop(one_at_a_time);
    super::chore_run::run_chore(shared, c, false, RunSource::Schedule)
}

pub(super) fn dry_run_shown(shared: &Shared, peer: &PeerCred, chore: &str) -> Response {
    if find_chore(shared, chore).is_none() {
        return Response::Refused {
            reason: format!("there is no chore named {chore:?}"),
            journal_seq: None,
        };
    }
    let runs = runs_dir(shared);
    let ran = runs.join(format!("{chore}.dry-ran"));
    let shown = |recorded| Event::DryRunShown {
        peer: Peer::worker(peer),
        chore,
        recorded,
    };
    if !ran.exists() {
        let seq = journal(shared, shown(false));
        return Response::Refused {
            reason: format!("no dry run of {chore:?} was made to show"),
            journal_seq: seq,
        };
    }
    // Journaled first: what a real run will count on is never recorded
    // without its line.
    let Some(journal_seq) = journal(shared, shown(true)) else {
        return unjournaled();
    };
    let _ = std::fs::rename(&ran, runs.join(format!("{chore}.dry-run-seen")));
    Response::Noted { journal_seq }
}

/// Snapshots what a red run of `chore` may change, in the Warden's state
/// (where no cage and not the Worker can see it). It may use the space an
/// unprivileged writer has, less what `snapshot_keep_free` keeps (by
/// default a gigabyte or a tenth of the filesystem, whichever is more), so
/// a snapshot never fills the disk the server's services write to. The caller holds the right to change files
/// (`Shared::one_change_at_a_time`), so no other snapshot counts on the
/// same space. Refused for a chore whose damage cap is above what the seal
/// lists (`SealLimits::max_listed`): a run within its cap is always sealed
/// whole.
pub(super) fn take_snapshot(
    shared: &Shared,
    chore: &Chore,
    id: &str,
    now: u64,
) -> Result<snapshot::Snapshot, String> {
    let store = shared.options.layout.snapshots_dir();
    std::fs::create_dir_all(&store).map_err(|e| format!("cannot make the snapshot store: {e}"))?;
    let (avail, total) = crate::system::space(&store)
        .map_err(|e| format!("cannot see the snapshot store's free space: {e}"))?;
    let room = shared.options.snapshot_keep_free.room(avail, total);
    // Within its cap a run must be one the seal can list whole, so undo
    // can take back all it made.
    let listed = u64::try_from(shared.options.seal_limits.max_listed).unwrap_or(u64::MAX);
    if chore.header.max_files > listed {
        return Err(format!(
            "a red run's damage cap may be at most {listed} files, what its seal can list for undo; {} declares {}",
            chore.header.name, chore.header.max_files
        ));
    }
    snapshot::take(
        &store,
        id,
        &chore.header.name,
        &snapshot_roots(shared, chore),
        &snapshot_exclusions(shared),
        now,
        room,
    )
    .map_err(|e| format!("a red run snapshots what it may change first, and that failed: {e}"))
}

/// What a red run's snapshot covers: the chore's touches but the
/// quarantine. The quarantine is excluded from every snapshot (nothing in
/// it is recorded or restored, and prod mode never purges it), so as a root
/// it was refused and `apt-clean` and `old-logs` could not run in prod
/// mode. Left out, undo still puts back all such a run took away: what it
/// moved into the quarantine came from its other touches, which are
/// snapshotted whole, so undo restores it from the snapshot's own copy and
/// the quarantined copy stays where it is. (A touch inside the quarantine
/// is refused by the run's rules.)
pub(super) fn snapshot_roots(shared: &Shared, chore: &Chore) -> Vec<std::path::PathBuf> {
    let quarantine = &shared.options.layout.quarantine_dir;
    chore
        .header
        .touches
        .iter()
        .filter(|t| *t != quarantine)
        .cloned()
        .collect()
}

/// Every path under the quarantine (not the quarantine itself, whose
/// ctime moves with each folder added) by inode and ctime, which no process
/// can set back: a path missing after a run or with another pair was
/// removed, replaced or changed. Links are not followed. `None` when it
/// cannot be listed whole or holds more than 200 000 paths.
pub(super) fn quarantine_held(
    dir: &std::path::Path,
) -> Option<std::collections::BTreeMap<std::path::PathBuf, (u64, i64, i64)>> {
    use std::os::unix::fs::MetadataExt;
    let mut out = std::collections::BTreeMap::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).ok()? {
            let p = e.ok()?.path();
            let meta = std::fs::symlink_metadata(&p).ok()?;
            if meta.is_dir() {
                stack.push(p.clone());
            }
            out.insert(p, (meta.ino(), meta.ctime(), meta.ctime_nsec()));
            if out.len() > 200_000 {
                return None;
            }
        }
    }
    Some(out)
}

/// What a snapshot never records or restores: the cage's hidden secret
/// paths, the Warden's and the Worker's own directories, the quarantine.
fn snapshot_exclusions(shared: &Shared) -> Vec<std::path::PathBuf> {
    let layout = &shared.options.layout;
    let mut out: Vec<std::path::PathBuf> = crate::cage::secret_paths(layout)
        .into_iter()
        .map(|h| match h {
            crate::cage::Hidden::Dir(p) | crate::cage::Hidden::File(p) => p,
        })
        .collect();
    out.extend([
        layout.state_dir.clone(),
        layout.journal_dir.clone(),
        layout.config_dir.clone(),
        layout.run_dir.clone(),
        layout.worker_config_dir.clone(),
        layout.quarantine_dir.clone(),
    ]);
    out.sort();
    out.dedup();
    out
}

/// Runs one of the policy's reads for the Warden's own use (filling in a
/// chore action's placeholder) and returns its output, redacted.
fn own_read(cmd: &str, args: &[&str]) -> Result<String, String> {
    let args: Vec<String> = args.iter().map(|s| s.to_string()).collect();
    let allowed = policy::check(Table::Allow, cmd, &args, &policy::Requester::Warden)
        .map_err(|r| r.reason)?;
    let bin = exec::pick_binary(allowed.rule.cmd, allowed.rule.bins).map_err(|e| e.to_string())?;
    let bounds = Bounds::for_rule(allowed.rule);
    // Exec hands out only redacted output: what the placeholders parse, and
    // an error that ends up in a receipt, never held a raw byte.
    let o = exec::run_program(&bin, &allowed.args, &[], &bounds).map_err(|e| e.to_string())?;
    if o.exit_code != Some(0) || o.cut {
        return Err(format!("{cmd} failed: {}", o.stderr.lossy().trim()));
    }
    Ok(o.stdout.lossy().into_owned())
}

fn security_upgrades() -> Result<Vec<String>, String> {
    own_read("apt", &["list", "--upgradable"])
        .map(|out| crate::chores::placeholders::security_upgrades(&out))
}

fn failed_services() -> Result<Vec<String>, String> {
    own_read(
        "systemctl",
        &[
            "list-units",
            "--state=failed",
            "--type=service",
            "--plain",
            "--no-legend",
        ],
    )
    .map(|out| crate::chores::placeholders::failed_services(&out))
}

/// A chore action with its placeholder filled in: none, one or several
/// concrete actions.
pub(super) fn expand_action(action: &[String]) -> Result<Vec<Vec<String>>, String> {
    let Some((last, head)) = action.split_last() else {
        return Ok(Vec::new());
    };
    let with = |items: Vec<String>, per: usize| -> Vec<Vec<String>> {
        items
            .chunks(per.max(1))
            .map(|c| head.iter().cloned().chain(c.iter().cloned()).collect())
            .collect()
    };
    match last.as_str() {
        // The policy allows apt-get 24 arguments after its name: the fixed
        // ones of the action, and as many packages as fit.
        "@security-upgrades" => Ok(with(
            security_upgrades()?,
            25usize.saturating_sub(head.len()),
        )),
        "@failed-services" => Ok(with(failed_services()?, 1)),
        _ => Ok(vec![action.to_vec()]),
    }
}

pub(super) fn chore_run(shared: &Shared, name: &str, dry_run: bool, source: RunSource) -> Response {
    let Some(chore) = find_chore(shared, name) else {
        return Response::Refused {
            reason: format!("there is no chore named {name:?}; `aromba chores` lists them"),
            journal_seq: None,
        };
    };
    super::chore_run::run_chore(shared, chore, dry_run, source)
}
