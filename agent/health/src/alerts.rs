//! Alerts with hysteresis: a pure state machine fed one [`Snapshot`] a
//! minute, answering with the alerts raised and cleared.
//!
//! Each kind raises at one line and clears at another, so a value hovering
//! at a line raises once and clears once:
//!
//! | kind | raise | clear |
//! | --- | --- | --- |
//! | disk space, per mount | used ≥ 90 % | used < 85 % |
//! | inodes, per mount | used ≥ 90 % | used < 85 % |
//! | memory | available < 10 % | available > 15 % |
//! | swap | used > 80 % | used < 75 % |
//! | load | 1-minute load per CPU > 2.00 for 5 readings | < 1.50 for 5 readings |
//! | a failed unit, per unit | it is listed | it is no longer listed |
//! | reboot required | the flag file exists | it no longer does |
//! | clock not synchronized | for 10 readings | at the first synchronized reading |
//!
//! Readings: the Worker reads once a minute, so "for 5 minutes" is five
//! readings in a row. A reading more than [`Thresholds::max_gap_secs`]
//! after the previous one (the Worker was stopped, a read failed, the
//! clock stepped back) starts the count again.
//!
//! A read that failed is `None` in the snapshot and changes nothing: a
//! failing `df` neither raises nor clears disk alerts. A mount point absent
//! from a successful `df` clears its alert (value [`Measure::Gone`]).
//! Only filesystems [`is_relevant`] are considered.
//!
//! The state is bounded: at most [`Thresholds::max_subjects`] raised
//! alerts per family (disk space, inodes, failed units). Past that, a new
//! subject raises nothing (each such reading is counted in
//! [`Alerts::untracked`]) until a raised one clears and frees a place.
//! Clears are handled before raises, so a place freed by a reading serves
//! that same reading.
//! The machine reads no clock: time is the snapshot's `at`.

use std::collections::{BTreeMap, HashSet};
use std::num::NonZeroU32;

use crate::apt::Upgrade;
use crate::df::Filesystem;
use crate::fsfilter::is_relevant;
use crate::loadavg::LoadAvg;
use crate::meminfo::MemInfo;
use crate::reboot::RebootStatus;
use crate::systemctl::FailedUnit;
use crate::timedate::ClockStatus;
use crate::units::{Load, Ratio};

/// Where each alert raises and clears. Percentages are whole percents.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Thresholds {
    /// Raise when a filesystem's used share is at least this.
    pub disk_raise_pct: u8,
    /// Clear when it is below this.
    pub disk_clear_pct: u8,
    pub inodes_raise_pct: u8,
    pub inodes_clear_pct: u8,
    /// Raise when available memory is below this share.
    pub memory_available_raise_pct: u8,
    /// Clear when it is above this.
    pub memory_available_clear_pct: u8,
    /// Raise when swap in use is above this share.
    pub swap_used_raise_pct: u8,
    /// Clear when it is below this.
    pub swap_used_clear_pct: u8,
    /// Raise when the 1-minute load per CPU is above this…
    pub load_raise_per_cpu: Load,
    /// …for this many readings in a row.
    pub load_raise_readings: u32,
    /// Clear when it is below this…
    pub load_clear_per_cpu: Load,
    /// …for this many readings in a row.
    pub load_clear_readings: u32,
    /// Raise when the clock has been unsynchronized this many readings.
    pub clock_raise_readings: u32,
    /// Readings further apart than this are not "in a row".
    pub max_gap_secs: u64,
    /// Raised alerts kept per family (disk space, inodes, failed units).
    pub max_subjects: usize,
}

impl Default for Thresholds {
    fn default() -> Self {
        Thresholds {
            disk_raise_pct: 90,
            disk_clear_pct: 85,
            inodes_raise_pct: 90,
            inodes_clear_pct: 85,
            memory_available_raise_pct: 10,
            memory_available_clear_pct: 15,
            swap_used_raise_pct: 80,
            swap_used_clear_pct: 75,
            load_raise_per_cpu: Load::from_hundredths(200),
            load_raise_readings: 5,
            load_clear_per_cpu: Load::from_hundredths(150),
            load_clear_readings: 5,
            clock_raise_readings: 10,
            max_gap_secs: 120,
            max_subjects: 256,
        }
    }
}

/// What the Worker read at one minute. `None`: that read failed or was not
/// made; it changes no alert.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Snapshot {
    /// Seconds, from any fixed origin (the Worker passes the Unix time).
    pub at: u64,
    pub load: Option<LoadAvg>,
    pub cpus: Option<NonZeroU32>,
    pub memory: Option<MemInfo>,
    /// `df -P -B1 -T` (all rows; the machine applies [`is_relevant`]).
    pub space: Option<Vec<Filesystem>>,
    /// `df -P -i -T`.
    pub inodes: Option<Vec<Filesystem>>,
    pub failed_units: Option<Vec<FailedUnit>>,
    /// Not alerted on; carried for `/status` and the digest.
    pub updates: Option<Vec<Upgrade>>,
    pub reboot: Option<RebootStatus>,
    pub clock: Option<ClockStatus>,
}

impl Snapshot {
    /// A snapshot at `at` in which every read failed.
    pub fn empty(at: u64) -> Snapshot {
        Snapshot {
            at,
            ..Snapshot::default()
        }
    }
}

/// What an alert is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum AlertKind {
    /// Subject: the mount point.
    DiskSpace,
    /// Subject: the mount point.
    Inodes,
    /// Subject: `memory`.
    Memory,
    /// Subject: `swap`.
    Swap,
    /// Subject: `load`.
    Load,
    /// Subject: the unit's name.
    FailedUnit,
    /// Subject: `reboot`.
    RebootRequired,
    /// Subject: `clock`.
    ClockUnsynchronized,
}

/// A value or threshold of an alert.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Measure {
    /// A share: used (disk, inodes, swap) or available (memory).
    Percent(Ratio),
    /// The 1-minute load divided by the CPUs.
    LoadPerCpu(Load),
    /// Readings (minutes) a condition has lasted.
    Readings(u32),
    /// The condition holds (a unit failed, a reboot is needed, the clock
    /// is not synchronized).
    Present,
    /// The condition no longer holds.
    Absent,
    /// The subject is no longer there (a mount point no longer mounted,
    /// swap turned off).
    Gone,
}

/// An alert raised or cleared.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Event {
    Raised {
        kind: AlertKind,
        subject: String,
        value: Measure,
        threshold: Measure,
    },
    Cleared {
        kind: AlertKind,
        subject: String,
        value: Measure,
        threshold: Measure,
    },
}

impl Event {
    pub fn kind(&self) -> AlertKind {
        match self {
            Event::Raised { kind, .. } | Event::Cleared { kind, .. } => *kind,
        }
    }

    pub fn subject(&self) -> &str {
        match self {
            Event::Raised { subject, .. } | Event::Cleared { subject, .. } => subject,
        }
    }
}

/// Consecutive readings for which a condition held.
#[derive(Debug, Clone, Copy, Default)]
struct Streak {
    count: u32,
}

/// The alert state. Create with [`Alerts::new`]; call [`Alerts::observe`]
/// with each snapshot.
#[derive(Debug, Clone)]
pub struct Alerts {
    t: Thresholds,
    disk: BTreeMap<String, Ratio>,
    inodes: BTreeMap<String, Ratio>,
    units: BTreeMap<String, ()>,
    memory: Option<Ratio>,
    swap: Option<Ratio>,
    load_raised: bool,
    load_high: Streak,
    load_low: Streak,
    load_last_at: Option<u64>,
    reboot: bool,
    clock_raised: bool,
    clock_unsynced: Streak,
    clock_last_at: Option<u64>,
    untracked: u64,
}

impl Alerts {
    pub fn new(thresholds: Thresholds) -> Alerts {
        Alerts {
            t: thresholds,
            disk: BTreeMap::new(),
            inodes: BTreeMap::new(),
            units: BTreeMap::new(),
            memory: None,
            swap: None,
            load_raised: false,
            load_high: Streak::default(),
            load_low: Streak::default(),
            load_last_at: None,
            reboot: false,
            clock_raised: false,
            clock_unsynced: Streak::default(),
            clock_last_at: None,
            untracked: 0,
        }
    }

    pub fn thresholds(&self) -> &Thresholds {
        &self.t
    }

    /// Raises a subject would have had, had the family not been full.
    pub fn untracked(&self) -> u64 {
        self.untracked
    }

    /// The alerts raised now, by kind then subject.
    pub fn active(&self) -> Vec<(AlertKind, String)> {
        let mut out = Vec::new();
        out.extend(self.disk.keys().map(|m| (AlertKind::DiskSpace, m.clone())));
        out.extend(self.inodes.keys().map(|m| (AlertKind::Inodes, m.clone())));
        if self.memory.is_some() {
            out.push((AlertKind::Memory, "memory".to_owned()));
        }
        if self.swap.is_some() {
            out.push((AlertKind::Swap, "swap".to_owned()));
        }
        if self.load_raised {
            out.push((AlertKind::Load, "load".to_owned()));
        }
        out.extend(
            self.units
                .keys()
                .map(|u| (AlertKind::FailedUnit, u.clone())),
        );
        if self.reboot {
            out.push((AlertKind::RebootRequired, "reboot".to_owned()));
        }
        if self.clock_raised {
            out.push((AlertKind::ClockUnsynchronized, "clock".to_owned()));
        }
        out
    }

    /// Takes one snapshot and answers the alerts it raises and clears.
    pub fn observe(&mut self, s: &Snapshot) -> Vec<Event> {
        let mut events = Vec::new();
        if let Some(space) = &s.space {
            let (raise, clear) = (self.t.disk_raise_pct, self.t.disk_clear_pct);
            let cap = self.t.max_subjects;
            per_mount(
                &mut self.disk,
                &mut self.untracked,
                AlertKind::DiskSpace,
                space,
                (raise, clear, cap),
                &mut events,
            );
        }
        if let Some(inodes) = &s.inodes {
            let (raise, clear) = (self.t.inodes_raise_pct, self.t.inodes_clear_pct);
            let cap = self.t.max_subjects;
            per_mount(
                &mut self.inodes,
                &mut self.untracked,
                AlertKind::Inodes,
                inodes,
                (raise, clear, cap),
                &mut events,
            );
        }
        if let Some(memory) = &s.memory {
            self.observe_memory(memory, &mut events);
            self.observe_swap(memory, &mut events);
        }
        if let (Some(load), Some(cpus)) = (&s.load, s.cpus) {
            self.observe_load(s.at, load, cpus, &mut events);
        }
        if let Some(units) = &s.failed_units {
            self.observe_units(units, &mut events);
        }
        if let Some(reboot) = &s.reboot {
            self.observe_reboot(reboot, &mut events);
        }
        if let Some(clock) = &s.clock {
            self.observe_clock(s.at, clock, &mut events);
        }
        events
    }

    fn observe_memory(&mut self, m: &MemInfo, events: &mut Vec<Event>) {
        let available = m.available_ratio();
        let (raise, clear) = (
            self.t.memory_available_raise_pct,
            self.t.memory_available_clear_pct,
        );
        match self.memory {
            None if available.below(raise) => {
                self.memory = Some(available);
                events.push(Event::Raised {
                    kind: AlertKind::Memory,
                    subject: "memory".to_owned(),
                    value: Measure::Percent(available),
                    threshold: Measure::Percent(Ratio::percent(raise)),
                });
            }
            Some(_) if available.above(clear) => {
                self.memory = None;
                events.push(Event::Cleared {
                    kind: AlertKind::Memory,
                    subject: "memory".to_owned(),
                    value: Measure::Percent(available),
                    threshold: Measure::Percent(Ratio::percent(clear)),
                });
            }
            Some(_) => self.memory = Some(available),
            None => {}
        }
    }

    fn observe_swap(&mut self, m: &MemInfo, events: &mut Vec<Event>) {
        let (raise, clear) = (self.t.swap_used_raise_pct, self.t.swap_used_clear_pct);
        let used = m.swap_used_ratio();
        match (self.swap, used) {
            (None, Some(used)) if used.above(raise) => {
                self.swap = Some(used);
                events.push(Event::Raised {
                    kind: AlertKind::Swap,
                    subject: "swap".to_owned(),
                    value: Measure::Percent(used),
                    threshold: Measure::Percent(Ratio::percent(raise)),
                });
            }
            (Some(_), Some(used)) if used.below(clear) => {
                self.swap = None;
                events.push(Event::Cleared {
                    kind: AlertKind::Swap,
                    subject: "swap".to_owned(),
                    value: Measure::Percent(used),
                    threshold: Measure::Percent(Ratio::percent(clear)),
                });
            }
            (Some(_), Some(used)) => self.swap = Some(used),
            (Some(_), None) => {
                // Swap was turned off: nothing is left to be full.
                self.swap = None;
                events.push(Event::Cleared {
                    kind: AlertKind::Swap,
                    subject: "swap".to_owned(),
                    value: Measure::Gone,
                    threshold: Measure::Percent(Ratio::percent(clear)),
                });
            }
            (None, _) => {}
        }
    }

    fn observe_load(&mut self, at: u64, load: &LoadAvg, cpus: NonZeroU32, events: &mut Vec<Event>) {
        let in_a_row = follows(self.load_last_at, at, self.t.max_gap_secs);
        self.load_last_at = Some(at);
        let one = u64::from(load.one.hundredths());
        let n = u64::from(cpus.get());
        let high = one > u64::from(self.t.load_raise_per_cpu.hundredths()) * n;
        let low = one < u64::from(self.t.load_clear_per_cpu.hundredths()) * n;
        step(&mut self.load_high, high, in_a_row);
        step(&mut self.load_low, low, in_a_row);
        let per_cpu = Measure::LoadPerCpu(load.one.per_cpu(cpus));
        if !self.load_raised && self.load_high.count >= self.t.load_raise_readings {
            self.load_raised = true;
            events.push(Event::Raised {
                kind: AlertKind::Load,
                subject: "load".to_owned(),
                value: per_cpu,
                threshold: Measure::LoadPerCpu(self.t.load_raise_per_cpu),
            });
        } else if self.load_raised && self.load_low.count >= self.t.load_clear_readings {
            self.load_raised = false;
            events.push(Event::Cleared {
                kind: AlertKind::Load,
                subject: "load".to_owned(),
                value: per_cpu,
                threshold: Measure::LoadPerCpu(self.t.load_clear_per_cpu),
            });
        }
    }

    fn observe_units(&mut self, units: &[FailedUnit], events: &mut Vec<Event>) {
        // Recoveries first, so the places they free serve this reading.
        let listed: HashSet<&str> = units.iter().map(|u| u.name.as_str()).collect();
        let gone: Vec<String> = self
            .units
            .keys()
            .filter(|name| !listed.contains(name.as_str()))
            .cloned()
            .collect();
        for name in gone {
            self.units.remove(&name);
            events.push(Event::Cleared {
                kind: AlertKind::FailedUnit,
                subject: name,
                value: Measure::Absent,
                threshold: Measure::Present,
            });
        }
        for unit in units {
            if self.units.contains_key(&unit.name) {
                continue;
            }
            if self.units.len() >= self.t.max_subjects {
                self.untracked = self.untracked.saturating_add(1);
                continue;
            }
            self.units.insert(unit.name.clone(), ());
            events.push(Event::Raised {
                kind: AlertKind::FailedUnit,
                subject: unit.name.clone(),
                value: Measure::Present,
                threshold: Measure::Present,
            });
        }
    }

    fn observe_reboot(&mut self, reboot: &RebootStatus, events: &mut Vec<Event>) {
        if reboot.required == self.reboot {
            return;
        }
        self.reboot = reboot.required;
        let subject = "reboot".to_owned();
        let (kind, threshold) = (AlertKind::RebootRequired, Measure::Present);
        events.push(if reboot.required {
            Event::Raised {
                kind,
                subject,
                value: Measure::Present,
                threshold,
            }
        } else {
            Event::Cleared {
                kind,
                subject,
                value: Measure::Absent,
                threshold,
            }
        });
    }

    fn observe_clock(&mut self, at: u64, clock: &ClockStatus, events: &mut Vec<Event>) {
        let in_a_row = follows(self.clock_last_at, at, self.t.max_gap_secs);
        self.clock_last_at = Some(at);
        step(&mut self.clock_unsynced, !clock.synchronized, in_a_row);
        let subject = "clock".to_owned();
        let kind = AlertKind::ClockUnsynchronized;
        let threshold = Measure::Readings(self.t.clock_raise_readings);
        if !self.clock_raised && self.clock_unsynced.count >= self.t.clock_raise_readings {
            self.clock_raised = true;
            events.push(Event::Raised {
                kind,
                subject,
                value: Measure::Readings(self.clock_unsynced.count),
                threshold,
            });
        } else if self.clock_raised && clock.synchronized {
            self.clock_raised = false;
            events.push(Event::Cleared {
                kind,
                subject,
                value: Measure::Absent,
                threshold,
            });
        }
    }
}

/// Whether a reading at `at` follows the one at `last` closely enough to
/// count as the next in a row.
fn follows(last: Option<u64>, at: u64, max_gap: u64) -> bool {
    last.is_some_and(|last| at > last && at - last <= max_gap)
}

fn step(streak: &mut Streak, holds: bool, in_a_row: bool) {
    streak.count = match (holds, in_a_row) {
        (false, _) => 0,
        (true, true) => streak.count.saturating_add(1),
        (true, false) => 1,
    };
}

/// Disk space or inodes: each relevant mount point on its own.
fn per_mount(
    raised: &mut BTreeMap<String, Ratio>,
    untracked: &mut u64,
    kind: AlertKind,
    rows: &[Filesystem],
    (raise, clear, cap): (u8, u8, usize),
    events: &mut Vec<Event>,
) {
    let readings: Vec<(&str, Ratio)> = rows
        .iter()
        .filter(|fs| is_relevant(fs))
        .filter_map(|fs| fs.used_ratio().map(|r| (fs.mount.as_str(), r)))
        .collect();
    // Clears first (a mount back under the line, or gone), so the places
    // they free serve this reading's raises.
    let present: HashSet<&str> = readings.iter().map(|(m, _)| *m).collect();
    let gone: Vec<String> = raised
        .keys()
        .filter(|m| !present.contains(m.as_str()))
        .cloned()
        .collect();
    for mount in gone {
        raised.remove(&mount);
        events.push(Event::Cleared {
            kind,
            subject: mount,
            value: Measure::Gone,
            threshold: Measure::Percent(Ratio::percent(clear)),
        });
    }
    for &(mount, used) in &readings {
        if let Some(last) = raised.get_mut(mount) {
            if used.below(clear) {
                raised.remove(mount);
                events.push(Event::Cleared {
                    kind,
                    subject: mount.to_owned(),
                    value: Measure::Percent(used),
                    threshold: Measure::Percent(Ratio::percent(clear)),
                });
            } else {
                *last = used;
            }
        }
    }
    for &(mount, used) in &readings {
        if raised.contains_key(mount) || !used.at_least(raise) {
            continue;
        }
        if raised.len() >= cap {
            *untracked = untracked.saturating_add(1);
            continue;
        }
        raised.insert(mount.to_owned(), used);
        events.push(Event::Raised {
            kind,
            subject: mount.to_owned(),
            value: Measure::Percent(used),
            threshold: Measure::Percent(Ratio::percent(raise)),
        });
    }
}
