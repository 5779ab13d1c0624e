//! The Worker's health checks, as pure parsing and logic (std only).
//!
//! Every minute the Worker asks the Warden for a few read-only commands and
//! hands their output here:
//!
//! - **parsers** turn each output into typed numbers, or a [`ParseError`]
//!   naming the read, the line and the column — never a panic, whatever the
//!   output (garbled, cut short, hostile, not UTF-8 after a lossy
//!   conversion). See [`parse_loadavg`], [`parse_nproc`], [`parse_meminfo`],
//!   [`parse_df`] (GNU and busybox, `-B1`, `-k` or `-i`),
//!   [`parse_failed_units`], [`parse_apt_upgradable`],
//!   [`parse_reboot_required`] and [`parse_timedatectl_show`];
//! - [`is_relevant`] decides which filesystems matter (no tmpfs, snaps,
//!   container layers or kernel trees);
//! - [`Alerts`] is a state machine fed one [`Snapshot`] a minute (time
//!   passed in, never read) that answers [`Event`]s — alerts raised and
//!   cleared, with hysteresis so a value at a line does not flap;
//! - the chat's words for all of it (`/status`, the digest, the alerts)
//!   are in `aromba-words`, the Worker's catalogue of messages.
//!
//! The commands, exactly as the Warden's policy allows them:
//! `cat /proc/loadavg`, `nproc`, `cat /proc/meminfo`, `df -P -B1 -T` (or
//! `df -P -k -T` where `-B1` is refused), `df -P -i -T`,
//! `systemctl list-units --failed --plain --no-legend --no-pager`,
//! `apt list --upgradable`, `cat /run/reboot-required`,
//! `cat /run/reboot-required.pkgs` and `timedatectl show`.
//!
//! # Example
//!
//! ```
//! use aromba_health::{Alerts, Event, Snapshot, Thresholds, parse_df_space};
//!
//! let df = "Filesystem     Type 1-blocks    Used Available Capacity Mounted on\n\
//!           /dev/vda1      ext4 1000000 950000     50000      95% /srv/my data\n";
//! let space = parse_df_space(df)?;
//!
//! let mut alerts = Alerts::new(Thresholds::default());
//! let snapshot = Snapshot { at: 1_700_000_000, space: Some(space.clone()), ..Snapshot::empty(0) };
//! let events = alerts.observe(&snapshot);
//! assert!(matches!(&events[..], [Event::Raised { subject, .. }] if subject == "/srv/my data"));
//! assert_eq!(space[0].avail, 50_000);
//! # Ok::<(), aromba_health::ParseError>(())
//! ```

#![forbid(unsafe_code)]

pub mod alerts;
pub mod apt;
pub mod df;
pub mod error;
pub mod fsfilter;
pub mod loadavg;
pub mod meminfo;
pub mod reboot;
pub mod scan;
pub mod systemctl;
mod text;
pub mod timedate;
pub mod units;

pub use alerts::{AlertKind, Alerts, Event, Measure, Snapshot, Thresholds};
pub use apt::{Upgrade, parse_apt_upgradable};
pub use df::{DfKind, DfTable, Filesystem, parse_df, parse_df_inodes, parse_df_space};
pub use error::{ErrorKind, ParseError, Source};
pub use fsfilter::{IGNORED_FSTYPES, IGNORED_MOUNT_PREFIXES, is_relevant};
pub use loadavg::{LoadAvg, parse_loadavg, parse_nproc};
pub use meminfo::{MemInfo, parse_meminfo};
pub use reboot::{RebootStatus, parse_reboot_required};
pub use systemctl::{FailedUnit, parse_failed_units};
pub use text::{MAX_LINE_BYTES, MAX_LINES};
pub use timedate::{ClockStatus, parse_timedatectl_show};
pub use units::{Load, Ratio, human_bytes};
