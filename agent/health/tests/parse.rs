//! Table tests over every captured output in `tests/fixtures/` (see
//! `SOURCES.md` there for where each came from).

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use aromba_health::{
    ClockStatus, DfKind, ErrorKind, Filesystem, Load, LoadAvg, MemInfo, RebootStatus, Source,
    human_bytes, is_relevant, parse_apt_upgradable, parse_df, parse_failed_units, parse_loadavg,
    parse_meminfo, parse_nproc, parse_reboot_required, parse_timedatectl_show, scan,
};

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures")
}

fn fixture(rel: &str) -> String {
    let path = fixtures().join(rel);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

const KIB: u64 = 1024;

/// The relevant mount points of a df table, in order.
fn relevant(rows: &[Filesystem]) -> Vec<&str> {
    rows.iter()
        .filter(|f| is_relevant(f))
        .map(|f| f.mount.as_str())
        .collect()
}

fn row<'a>(rows: &'a [Filesystem], mount: &str) -> &'a Filesystem {
    rows.iter()
        .find(|f| f.mount == mount)
        .unwrap_or_else(|| panic!("no row for {mount}"))
}

/// Every row of a GNU df table shows the used percentage our ratio gives:
/// `df` rounds up, and so do we.
fn capacity_matches_gnu_df(text: &str) {
    let table = parse_df(text).expect("parses");
    for (line, fs) in text.lines().skip(1).zip(&table.filesystems) {
        let printed = line.split_whitespace().nth(5).expect("capacity column");
        let ours = fs
            .used_ratio()
            .map_or_else(|| "-".to_owned(), |r| format!("{}%", r.percent_ceil()));
        assert_eq!(ours, printed, "{line}");
    }
}

fn df_space(rel: &str, block_size: u64, rows: usize) -> Vec<Filesystem> {
    let t = parse_df(&fixture(rel)).unwrap_or_else(|e| panic!("{rel}: {e}"));
    assert_eq!(t.kind, DfKind::Space, "{rel}");
    assert_eq!(t.block_size, block_size, "{rel}");
    assert_eq!(t.filesystems.len(), rows, "{rel}");
    t.filesystems
}

fn df_inodes(rel: &str, rows: usize) -> Vec<Filesystem> {
    let t = parse_df(&fixture(rel)).unwrap_or_else(|e| panic!("{rel}: {e}"));
    assert_eq!(t.kind, DfKind::Inodes, "{rel}");
    assert_eq!(t.block_size, 1, "{rel}");
    assert_eq!(t.filesystems.len(), rows, "{rel}");
    t.filesystems
}

fn load(h: u32) -> Load {
    Load::from_hundredths(h)
}

type Check = fn(&str, &str);

/// Each fixture and what its parser must make of it.
const TABLE: &[(&str, Check)] = &[
    // The first scan's reads (`aromba_health::scan`). Busybox has no `ss`,
    // and its `ps` takes no `-o` list: there these reads fail and the scan
    // finds nothing in them.
    ("debian-12/scan-ss-tlnpH.txt", |_, t| {
        let listeners = scan::parse_listeners(t);
        assert_eq!(listeners.len(), 2);
        let pg = listeners
            .iter()
            .find(|l| l.port == 5432)
            .expect("PostgreSQL");
        assert!(pg.loopback);
        assert_eq!(pg.processes[0].0, "postgres");
        let other = listeners
            .iter()
            .find(|l| l.port == 2024)
            .expect("the other");
        assert!(!other.loopback && other.processes.is_empty());
        assert_eq!(scan::public_web(&listeners, &[]), None);
    }),
    ("debian-12/scan-ps.txt", |_, t| {
        let processes = scan::parse_processes(t);
        assert_eq!(processes.len(), t.lines().count());
        assert!(processes.iter().any(|p| p.name == "postgres"));
        let listeners = scan::parse_listeners(&fixture("debian-12/scan-ss-tlnpH.txt"));
        assert!(scan::old_apps(&listeners, &processes).is_empty());
    }),
    ("debian-12/scan-proc-net-dev.txt", |_, t| {
        let counters = |l: &str| -> u64 {
            let f: Vec<u64> = l
                .split(':')
                .nth(1)
                .expect("counters")
                .split_whitespace()
                .map(|n| n.parse().expect("a number"))
                .collect();
            f[0] + f[8]
        };
        let all: u64 = t.lines().skip(2).map(counters).sum();
        let lo = t
            .lines()
            .find(|l| l.trim_start().starts_with("lo:"))
            .map(counters)
            .expect("loopback");
        assert_eq!(scan::parse_net_dev(t), Some(all - lo));
    }),
    ("debian-12/scan-du-postgresql.txt", |_, t| {
        assert_eq!(
            scan::Database::postgres_bases(&scan::parse_du(t)),
            vec!["/var/lib/postgresql/15/main/base".to_string()]
        );
    }),
    ("debian-12/scan-du-postgres-base.txt", |_, t| {
        let pg = scan::DATABASES
            .iter()
            .find(|d| d.dir == "postgresql")
            .expect("PostgreSQL");
        let base = "/var/lib/postgresql/15/main/base";
        let listing = scan::parse_du(t);
        let found = pg
            .with_data(base, &listing)
            .expect("the test suite's databases");
        assert!(found.describe().contains("PostgreSQL"), "{found:?}");
        // Without the databases a user made (numbered from 16384): empty.
        let templates: Vec<(u64, String)> = listing
            .into_iter()
            .filter(|(_, p)| {
                p.rsplit('/')
                    .next()
                    .and_then(|n| n.parse::<u64>().ok())
                    .is_none_or(|n| n < 16_384)
            })
            .collect();
        assert_eq!(pg.with_data(base, &templates), None);
    }),
    ("debian-12/loadavg.txt", |_, t| {
        assert_eq!(
            parse_loadavg(t),
            Ok(LoadAvg {
                one: load(158),
                five: load(193),
                fifteen: load(165)
            })
        );
    }),
    ("debian-12/nproc.txt", |_, t| {
        assert_eq!(parse_nproc(t).map(|n| n.get()), Ok(2))
    }),
    ("debian-12-busybox/nproc.txt", |_, t| {
        assert_eq!(parse_nproc(t).map(|n| n.get()), Ok(2))
    }),
    ("debian-12/meminfo.txt", |_, t| {
        let m = parse_meminfo(t);
        assert_eq!(
            m,
            Ok(MemInfo {
                total: 24_683_568 * KIB,
                available: 24_049_644 * KIB,
                available_estimated: false,
                swap_total: 0,
                swap_free: 0,
            })
        );
        assert_eq!(m.map(|m| m.swap_used_ratio()), Ok(None));
    }),
    ("linux-4.4/meminfo.txt", |_, t| {
        let m = parse_meminfo(t).expect("parses");
        assert_eq!((m.total, m.available), (65_856_916 * KIB, 39_985_356 * KIB));
        assert!(!m.available_estimated);
        assert_eq!(m.available_ratio().percent_floor(), 60);
    }),
    ("rhel-5/meminfo.txt", |_, t| {
        // No MemAvailable before Linux 3.14: MemFree + Buffers + Cached.
        assert_eq!(
            parse_meminfo(t),
            Ok(MemInfo {
                total: 255_908 * KIB,
                available: (69_936 + 15_812 + 115_124) * KIB,
                available_estimated: true,
                swap_total: 524_280 * KIB,
                swap_free: 524_280 * KIB,
            })
        );
    }),
    ("unstated/meminfo-swap-in-use.txt", |_, t| {
        let m = parse_meminfo(t).expect("parses");
        assert_eq!(m.swap_used(), 1024 * KIB);
        assert_eq!(m.swap_used_ratio().map(|r| r.percent_ceil()), Some(1));
    }),
    ("debian-12/df-space.txt", |_, t| {
        let rows = df_space("debian-12/df-space.txt", 1, 5);
        assert_eq!(relevant(&rows), ["/"]);
        let root = row(&rows, "/");
        assert_eq!(
            (
                root.source.as_str(),
                root.fstype.as_str(),
                root.size,
                root.used,
                root.avail
            ),
            (
                "/dev/vda",
                "ext4",
                270_553_174_016,
                22_468_497_408,
                75_104_251_904
            )
        );
        capacity_matches_gnu_df(t);
    }),
    ("debian-12/df-space-k.txt", |_, t| {
        let rows = df_space("debian-12/df-space-k.txt", 1024, 5);
        assert_eq!(row(&rows, "/").size, 264_212_084 * KIB);
        capacity_matches_gnu_df(t);
    }),
    ("debian-12/df-inodes.txt", |_, t| {
        let rows = df_inodes("debian-12/df-inodes.txt", 5);
        let root = row(&rows, "/");
        assert_eq!(
            (root.size, root.used, root.avail),
            (16_777_216, 474_049, 16_303_167)
        );
        capacity_matches_gnu_df(t);
    }),
    ("debian-12/df-space-mounts.txt", |_, t| {
        let rows = df_space("debian-12/df-space-mounts.txt", 1, 8);
        assert_eq!(relevant(&rows), ["/", "/srv/backup disk", "/srv/uploads"]);
        let backup = row(&rows, "/srv/backup disk");
        assert_eq!(
            (backup.source.as_str(), backup.used, backup.avail),
            ("/dev/loop0", 28_889_088, 2_498_560)
        );
        assert_eq!(backup.used_ratio().map(|r| r.percent_ceil()), Some(93));
        capacity_matches_gnu_df(t);
    }),
    ("debian-12/df-space-k-mounts.txt", |_, t| {
        let rows = df_space("debian-12/df-space-k-mounts.txt", 1024, 8);
        assert_eq!(row(&rows, "/srv/backup disk").size, 33_519 * KIB);
        capacity_matches_gnu_df(t);
    }),
    ("debian-12/df-inodes-mounts.txt", |_, t| {
        let rows = df_inodes("debian-12/df-inodes-mounts.txt", 8);
        assert_eq!(relevant(&rows), ["/", "/srv/backup disk", "/srv/uploads"]);
        assert_eq!(
            row(&rows, "/srv/uploads")
                .used_ratio()
                .map(|r| r.percent_ceil()),
            Some(98)
        );
        // A filesystem without inodes: no ratio, no 100 %, no division by zero.
        let cache = row(&rows, "/srv/cache");
        assert_eq!((cache.size, cache.used_ratio()), (0, None));
        capacity_matches_gnu_df(t);
    }),
    ("debian-12/df-si-mounts.txt", |_, t| {
        // Human sizes carry no unit a parser can trust: refused.
        assert_eq!(
            parse_df(t).map_err(|e| (e.line, e.kind)),
            Err((1, ErrorKind::UnknownHeader))
        );
        // They are what human_bytes prints for the same moment's bytes.
        let bytes = parse_df(&fixture("debian-12/df-space-mounts.txt")).expect("parses");
        for line in t.lines().skip(1) {
            let w: Vec<&str> = line.split_whitespace().collect();
            let mount = w[6..].join(" ");
            if mount == "/" {
                continue; // written to by other work between the two captures
            }
            let fs = row(&bytes.filesystems, &mount);
            for (si, ours) in [(w[2], fs.size), (w[3], fs.used), (w[4], fs.avail)] {
                assert_eq!(spelled(si), human_bytes(ours), "{line}");
            }
        }
    }),
    ("debian-12-busybox/df-space.txt", |_, _| {
        // busybox lists /dev/shm twice; one row per mount point remains.
        let rows = df_space("debian-12-busybox/df-space.txt", 1024, 5);
        assert_eq!(relevant(&rows), ["/"]);
        assert_eq!(row(&rows, "/").used, 21_941_920 * KIB);
        assert_eq!(row(&rows, "/run/credentials/demo").source, "tmpfs");
    }),
    ("debian-12-busybox/df-space-k.txt", |_, _| {
        df_space("debian-12-busybox/df-space-k.txt", 1024, 5);
    }),
    ("debian-12-busybox/df-space-b1.txt", |_, _| {
        let rows = df_space("debian-12-busybox/df-space-b1.txt", 1, 5);
        assert_eq!(row(&rows, "/").used, 22_468_530_176);
    }),
    ("debian-12-busybox/df-inodes.txt", |_, _| {
        let rows = df_inodes("debian-12-busybox/df-inodes.txt", 5);
        assert_eq!(row(&rows, "/").used, 474_054);
    }),
    ("debian-12-busybox/df-space-mounts.txt", |_, _| {
        let rows = df_space("debian-12-busybox/df-space-mounts.txt", 1024, 8);
        assert_eq!(relevant(&rows), ["/", "/srv/backup disk", "/srv/uploads"]);
        assert_eq!(row(&rows, "/srv/backup disk").avail, 2440 * KIB);
    }),
    ("debian-12-busybox/df-space-b1-mounts.txt", |_, _| {
        let rows = df_space("debian-12-busybox/df-space-b1-mounts.txt", 1, 8);
        // The same filesystem as GNU's capture: the same bytes.
        let gnu = parse_df(&fixture("debian-12/df-space-mounts.txt")).expect("parses");
        assert_eq!(
            row(&rows, "/srv/backup disk"),
            row(&gnu.filesystems, "/srv/backup disk")
        );
    }),
    ("debian-12-busybox/df-inodes-mounts.txt", |_, _| {
        let rows = df_inodes("debian-12-busybox/df-inodes-mounts.txt", 8);
        assert_eq!(row(&rows, "/srv/cache").used_ratio(), None);
        assert_eq!(
            row(&rows, "/srv/uploads")
                .used_ratio()
                .map(|r| r.percent_ceil()),
            Some(98)
        );
    }),
    ("ubuntu-16.04/df-space-k.txt", |_, t| {
        let rows = df_space("ubuntu-16.04/df-space-k.txt", 1024, 14);
        assert_eq!(
            relevant(&rows),
            [
                "/",
                "/boot",
                "/z",
                "/home",
                "/boot/efi",
                "/exports/serviced_volumes_v2/bgxogiyx1b2gc94i1wh2lm2c2",
                "/mnt/test"
            ]
        );
        let boot = row(&rows, "/boot");
        assert_eq!(boot.used_ratio().map(|r| r.percent_ceil()), Some(92));
        assert_eq!(
            row(&rows, "/mnt/test").source,
            "192.168.2.2:/exports/serviced_volumes_v2"
        );
        capacity_matches_gnu_df(t);
    }),
    ("debian-12/apt-list-upgradable.txt", |_, t| {
        let u = parse_apt_upgradable(t).expect("parses");
        assert_eq!(u.len(), 141);
        assert_eq!(u.iter().filter(|u| u.is_security()).count(), 93);
        assert_eq!(
            (
                u[0].package.as_str(),
                u[0].new_version.as_str(),
                u[0].current_version.as_str(),
                u[0].is_security()
            ),
            ("appstream", "0.16.1-2+b1", "0.16.1-2", false)
        );
        let krb = u
            .iter()
            .find(|u| u.package == "krb5-locales")
            .expect("listed");
        assert_eq!(krb.suites, ["oldstable", "oldstable-security"]);
        assert!(krb.is_security());
    }),
    ("ubuntu-24.10/apt-list-upgradable.txt", |_, t| {
        let u = parse_apt_upgradable(t).expect("parses");
        assert_eq!(
            u.iter().map(|u| u.package.as_str()).collect::<Vec<_>>(),
            ["grub-common", "grub-pc-bin", "grub-pc", "grub2-common"]
        );
        assert!(
            u.iter()
                .all(|u| !u.is_security() && u.suites == ["oracular-updates"])
        );
    }),
    ("ubuntu-26.04/apt-list-upgradable.txt", |_, t| {
        // Captured at a terminal, which cut line 13: refused, with its number.
        assert_eq!(
            parse_apt_upgradable(t).map_err(|e| (e.source, e.line, e.kind)),
            Err((Source::Apt, 13, ErrorKind::Invalid("upgradable from")))
        );
        // The other 23 lines read, 19 of them security updates.
        let whole: String = t
            .lines()
            .filter(|l| !l.ends_with('>'))
            .map(|l| format!("{l}\n"))
            .collect();
        let u = parse_apt_upgradable(&whole).expect("parses");
        assert_eq!(
            (u.len(), u.iter().filter(|u| u.is_security()).count()),
            (23, 19)
        );
        assert_eq!(u[10].current_version, "1:4.1.2-1build1");
    }),
    ("fedora-44/systemctl-list-units-failed.txt", |_, t| {
        unit(
            t,
            "systemd-remount-fs.service",
            "Remount Root and Kernel File Systems",
        );
    }),
    ("centos-7/systemctl-list-units-state-failed.txt", |_, t| {
        unit(t, "network.service", "LSB: Bring up/down networking");
    }),
    ("fedora-23-or-opensuse/systemctl-failed.txt", |_, t| {
        unit(t, "apache2.service", "The Apache Webserver");
    }),
    (
        "fedora-coreos/systemctl-list-units-state-failed-no-legend-older.txt",
        |_, t| {
            unit(t, "fail-test-unit.service", "Failing unit");
        },
    ),
    (
        "fedora-coreos/systemctl-list-units-state-failed-no-legend-newer.txt",
        |_, t| {
            unit(t, "fail-test-unit.service", "Failing unit");
            assert_eq!(
                parse_failed_units(t),
                parse_failed_units(&fixture(
                    "fedora-coreos/systemctl-list-units-state-failed-no-legend-older.txt"
                ))
            );
        },
    ),
    ("unstated/reboot-required.txt", |_, t| {
        assert_eq!(
            parse_reboot_required(Some(t), None),
            Ok(RebootStatus {
                required: true,
                message: Some("*** System restart required ***".to_owned()),
                packages: vec![],
            })
        );
    }),
    ("unstated/reboot-required.pkgs.txt", |_, t| {
        let flag = fixture("unstated/reboot-required.txt");
        let r = parse_reboot_required(Some(&flag), Some(t)).expect("parses");
        // linux-base is listed four times; each package is kept once.
        assert_eq!(r.packages, ["libssl1.0.0", "linux-base", "libc6"]);
        // Without the flag file no reboot is required, whatever the list says.
        assert_eq!(
            parse_reboot_required(None, Some(t)).map(|r| r.required),
            Ok(false)
        );
    }),
    ("unstated/timedatectl-show-unsynchronized.txt", |_, t| {
        assert_eq!(
            parse_timedatectl_show(t),
            Ok(ClockStatus {
                timezone: Some("Australia/Brisbane".to_owned()),
                ntp_enabled: Some(false),
                can_ntp: Some(true),
                local_rtc: Some(false),
                synchronized: false,
            })
        );
    }),
    ("unstated/timedatectl-show-old-systemd.txt", |_, t| {
        assert_eq!(
            parse_timedatectl_show(t).map_err(|e| (e.line, e.kind)),
            Err((1, ErrorKind::Unsupported))
        );
    }),
];

fn unit(text: &str, name: &str, description: &str) {
    let units = parse_failed_units(text).expect("parses");
    assert_eq!(units.len(), 1);
    assert_eq!(
        (
            units[0].name.as_str(),
            units[0].load.as_str(),
            units[0].active.as_str(),
            units[0].sub.as_str(),
            units[0].description.as_str()
        ),
        (name, "loaded", "failed", "failed", description)
    );
}

/// `df --si` spells `2.5M`; we spell `2.5 MB`.
fn spelled(si: &str) -> String {
    match si.chars().last() {
        Some(c) if c.is_ascii_alphabetic() => {
            let unit = match c {
                'k' => "kB",
                'M' => "MB",
                'G' => "GB",
                'T' => "TB",
                'P' => "PB",
                _ => "EB",
            };
            format!("{} {unit}", &si[..si.len() - 1])
        }
        _ => format!("{si} B"),
    }
}

#[test]
fn every_fixture_parses_as_the_table_says() {
    for (rel, check) in TABLE {
        check(rel, &fixture(rel));
    }
}

#[test]
fn every_fixture_is_in_the_table() {
    fn walk(dir: &Path, root: &Path, out: &mut BTreeSet<String>) {
        for entry in std::fs::read_dir(dir).expect("fixtures directory") {
            let path = entry.expect("entry").path();
            if path.is_dir() {
                walk(&path, root, out);
            } else if path.extension().is_some_and(|e| e == "txt") {
                let rel = path.strip_prefix(root).expect("under root");
                out.insert(rel.to_string_lossy().into_owned());
            }
        }
    }
    let mut on_disk = BTreeSet::new();
    walk(&fixtures(), &fixtures(), &mut on_disk);
    let tested: BTreeSet<String> = TABLE.iter().map(|(rel, _)| (*rel).to_owned()).collect();
    assert_eq!(
        on_disk, tested,
        "a fixture without a table entry, or an entry without its file"
    );
}

#[test]
fn every_fixture_is_named_in_sources() {
    let sources = fixture("SOURCES.md");
    for (rel, _) in TABLE {
        let name = Path::new(rel)
            .file_name()
            .and_then(|n| n.to_str())
            .expect("file name");
        let dir = Path::new(rel)
            .parent()
            .and_then(|d| d.to_str())
            .expect("directory");
        assert!(
            sources.contains(rel)
                || (sources.contains(dir) && sources.contains(name.trim_end_matches(".txt"))),
            "SOURCES.md does not say where {rel} came from"
        );
    }
}
