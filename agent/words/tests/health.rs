//! The health replies, asserted as the phone shows them, from real captures.

use std::path::Path;

use aromba_words::health::{self as render, BLOCK_WIDTH, Reply};

use aromba_health::{
    Alerts, FailedUnit, Filesystem, Snapshot, Thresholds, parse_apt_upgradable, parse_df_inodes,
    parse_df_space, parse_failed_units, parse_loadavg, parse_meminfo, parse_nproc,
    parse_reboot_required, parse_timedatectl_show,
};

fn fixture(rel: &str) -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../health/tests/fixtures")
        .join(rel);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// A snapshot of real captures: the Debian 12 machine with its extra
/// mounts, CentOS's failed unit, the reboot files and an unsynchronized
/// clock.
fn snapshot() -> Snapshot {
    Snapshot {
        at: 1_700_000_000,
        load: parse_loadavg(&fixture("debian-12/loadavg.txt")).ok(),
        cpus: parse_nproc(&fixture("debian-12/nproc.txt")).ok(),
        memory: parse_meminfo(&fixture("debian-12/meminfo.txt")).ok(),
        space: parse_df_space(&fixture("debian-12/df-space-mounts.txt")).ok(),
        inodes: parse_df_inodes(&fixture("debian-12/df-inodes-mounts.txt")).ok(),
        failed_units: parse_failed_units(&fixture(
            "centos-7/systemctl-list-units-state-failed.txt",
        ))
        .ok(),
        updates: parse_apt_upgradable(&fixture("debian-12/apt-list-upgradable.txt")).ok(),
        reboot: parse_reboot_required(
            Some(&fixture("unstated/reboot-required.txt")),
            Some(&fixture("unstated/reboot-required.pkgs.txt")),
        )
        .ok(),
        clock: parse_timedatectl_show(&fixture("unstated/timedatectl-show-unsynchronized.txt"))
            .ok(),
    }
}

fn assert_fits(reply: &Reply) {
    for line in reply.block.iter().flat_map(|b| b.lines()) {
        assert!(
            line.chars().count() <= BLOCK_WIDTH,
            "{line:?} is wider than {BLOCK_WIDTH}"
        );
    }
}

const STATUS: &str = "\
Load     1.58 1.93 1.65
CPUs     2
Memory   97% free of 26 GB
Swap     none
Disk     93% /srv/backup disk
Inodes   98% /srv/uploads
Services 1 failed
Updates  141, 93 security
Reboot   needed
Clock    NOT in sync, NTP off";

#[test]
fn status_shows_every_read_in_one_aligned_block() {
    let s = snapshot();
    // Every read parsed.
    assert!(s.load.is_some() && s.memory.is_some() && s.space.is_some() && s.clock.is_some());
    let reply = render::status(&s);
    assert!(
        reply
            .text
            .starts_with("Server status: needs a look. Disk /srv/backup disk is 93% full"),
        "{}",
        reply.text
    );
    assert_eq!(reply.block.as_deref(), Some(STATUS));
    assert_fits(&reply);
}

#[test]
fn status_leads_with_a_verdict_that_does_not_claim_what_it_could_not_read() {
    let reply = render::status(&Snapshot::empty(0));
    assert_eq!(
        reply.text,
        "Server status: nothing wrong in what I could read (the rows that say unknown I could not)."
    );
}

#[test]
fn status_says_unknown_for_a_failed_read_and_marks_an_estimate() {
    let reply = render::status(&Snapshot::empty(0));
    assert!(
        reply
            .block
            .iter()
            .flat_map(|b| b.lines())
            .all(|l| l.ends_with("unknown"))
    );
    let rhel5 = Snapshot {
        memory: parse_meminfo(&fixture("rhel-5/meminfo.txt")).ok(),
        ..Snapshot::empty(0)
    };
    let block = render::status(&rhel5).block.unwrap_or_default();
    assert!(
        block.contains("\nMemory   ~78% free of 263 MB\nSwap     0% used of 537 MB\n"),
        "{block}"
    );
}

#[test]
fn disk_lists_what_matters_with_df_percentages_and_si_sizes() {
    let reply = render::disk(
        &parse_df_space(&fixture("debian-12/df-space-mounts.txt")).unwrap_or_default(),
    );
    assert_eq!(reply.text, "Disk space, 3 filesystems:");
    assert_eq!(
        reply.block.as_deref(),
        Some(
            "\
Mount                Used   Free
/                     24%  76 GB
/srv/backup disk      93% 2.5 MB
/srv/uploads           1% 6.7 MB"
        )
    );
    assert_fits(&reply);
}

#[test]
fn disk_shortens_a_long_mount_point_in_the_middle() {
    let reply =
        render::disk(&parse_df_space(&fixture("ubuntu-16.04/df-space-k.txt")).unwrap_or_default());
    assert_eq!(reply.text, "Disk space, 7 filesystems:");
    assert_eq!(
        reply.block.as_deref(),
        Some(
            "\
Mount                Used   Free
/                     40%  12 GB
/boot                 92%  38 MB
/z                    32%  41 GB
/home                 10%  19 GB
/boot/efi             10% 472 MB
/exports/s…1wh2lm2c2   3% 105 GB
/mnt/test             40%  12 GB"
        )
    );
    assert_fits(&reply);
}

#[test]
fn disk_with_nothing_to_show_says_so() {
    let reply = render::disk(&[]);
    assert_eq!(
        (reply.text.as_str(), reply.block),
        ("No filesystems to show.", None)
    );
}

#[test]
fn services_lists_the_failed_units_or_says_all_run() {
    let units = parse_failed_units(&fixture("fedora-44/systemctl-list-units-failed.txt"))
        .unwrap_or_default();
    assert_eq!(
        render::services(&units),
        Reply {
            text: "1 service has failed:\n• systemd-remount-fs.service (Remount Root and Kernel File Systems)".to_owned(),
            block: None,
        }
    );
    assert_eq!(render::services(&[]).text, "All services running.");
    let many: Vec<FailedUnit> = (0..25)
        .map(|i| FailedUnit {
            name: format!("app{i:02}.service"),
            load: "loaded".into(),
            active: "failed".into(),
            sub: "failed".into(),
            description: String::new(),
        })
        .collect();
    let some = render::services(&many).text;
    assert!(
        some.ends_with("and 5 more (/services all lists them all)."),
        "{some}"
    );
    let all = render::services_all(&many).text;
    assert_eq!(all.lines().count(), 26);
    assert!(all.ends_with("• app24.service"), "{all}");
}

#[test]
fn updates_counts_security_first_ten_names_then_the_rest() {
    let ups =
        parse_apt_upgradable(&fixture("debian-12/apt-list-upgradable.txt")).unwrap_or_default();
    assert_eq!(
        render::updates(&ups).text,
        "\
141 updates pending, 93 of them security updates.
• apt (security)
• apt-transport-https (security)
• ca-certificates (security)
• jq (security)
• krb5-locales (security)
• libaom3 (security)
• libapt-pkg6.0 (security)
• libbrotli-dev (security)
• libbrotli1 (security)
• libcups2 (security)
and 131 more (/updates all lists them all)."
    );
    let all = render::updates_all(&ups).text;
    assert_eq!(all.lines().count(), 1 + ups.len());
    assert!(!all.contains("more"), "{all}");
    assert!(all.lines().skip(1).all(|l| l.starts_with("• ")), "{all}");
    let oracular =
        parse_apt_upgradable(&fixture("ubuntu-24.10/apt-list-upgradable.txt")).unwrap_or_default();
    assert_eq!(
        render::updates(&oracular).text,
        "\
4 updates pending, none of them a security update.
• grub-common
• grub-pc
• grub-pc-bin
• grub2-common"
    );
    assert_eq!(render::updates(&[]).text, "No updates pending.");
}

#[test]
fn the_digest_lists_open_alerts_reboot_reasons_and_security_updates() {
    let s = snapshot();
    let mut alerts = Alerts::new(Thresholds::default());
    alerts.observe(&s);
    let reply = render::digest(&s, &alerts);
    assert_eq!(
        reply.text,
        "\
Daily digest.
4 alerts open:
• disk space on /srv/backup disk
• inodes on /srv/uploads
• network.service failed
• a reboot is needed
The reboot is asked for by libssl1.0.0, linux-base, libc6.
Security updates: apt, apt-transport-https, ca-certificates, jq, krb5-locales, libaom3, libapt-pkg6.0, libbrotli-dev, libbrotli1, libcups2 and 83 more."
    );
    assert_eq!(reply.block.as_deref(), Some(STATUS));
}

#[test]
fn alert_messages_say_what_crossed_which_line() {
    let s = snapshot();
    let mut alerts = Alerts::new(Thresholds::default());
    let raised: Vec<String> = alerts.observe(&s).iter().map(render::event).collect();
    assert_eq!(
        raised,
        [
            "Disk /srv/backup disk is 93% full (alert at 90%).",
            "Disk /srv/uploads has used 98% of its inodes (alert at 90%): new files will soon fail.",
            "Service network.service has failed.",
            "A reboot is needed to finish installing updates.",
        ]
    );
    // The backup disk unmounted, the unit recovered, the reboot done.
    let after = Snapshot {
        at: s.at + 60,
        space: s.space.clone().map(|rows| {
            rows.into_iter()
                .filter(|f: &Filesystem| f.mount != "/srv/backup disk")
                .collect()
        }),
        failed_units: Some(vec![]),
        reboot: parse_reboot_required(None, None).ok(),
        ..Snapshot::empty(0)
    };
    let cleared: Vec<String> = alerts.observe(&after).iter().map(render::event).collect();
    assert_eq!(
        cleared,
        [
            "Disk /srv/backup disk is no longer mounted; its alert is closed.",
            "Service network.service is no longer failed.",
            "The reboot is done.",
        ]
    );
}

#[test]
fn every_block_fits_a_phone_whatever_the_mount_points() {
    let long = Filesystem {
        source: "/dev/sdb1".to_owned(),
        fstype: "ext4".to_owned(),
        size: u64::MAX,
        used: u64::MAX / 2,
        avail: u64::MAX / 2,
        mount: "/var/lib/postgresql/16/main/a very long tablespace name indeed".to_owned(),
    };
    let reply = render::disk(std::slice::from_ref(&long));
    assert_fits(&reply);
    assert_eq!(
        reply.block.as_deref().and_then(|b| b.lines().nth(1)),
        Some("/var/lib/p…me indeed  50% 9.3 EB")
    );
    let s = Snapshot {
        space: Some(vec![long]),
        ..snapshot()
    };
    assert_fits(&render::status(&s));
    assert_fits(&render::digest(&s, &Alerts::new(Thresholds::default())));
}
