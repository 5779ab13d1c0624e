//! Malformed input: every parser, fed output cut short, numbers past u64,
//! bytes that were not UTF-8 (what a lossy conversion leaves: U+FFFD), and
//! nothing at all, answers a typed error naming the line — and no input,
//! however mangled, makes one panic.

use std::path::Path;

use aromba_health::{
    ErrorKind, MAX_LINE_BYTES, ParseError, Source, parse_apt_upgradable, parse_df,
    parse_failed_units, parse_loadavg, parse_meminfo, parse_nproc, parse_reboot_required,
    parse_timedatectl_show,
};

fn fixture(rel: &str) -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(rel);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn err<T: std::fmt::Debug>(r: Result<T, ParseError>) -> (Source, usize, ErrorKind) {
    let e = r.expect_err("must be refused");
    (e.source, e.line, e.kind)
}

const DF_HEADER: &str =
    "Filesystem     Type     1-blocks        Used   Available Capacity Mounted on\n";

#[test]
fn truncated_lines_are_refused_at_their_line() {
    assert_eq!(
        err(parse_loadavg("0.52 0.58")),
        (Source::LoadAvg, 1, ErrorKind::MissingColumn("15 min"))
    );
    assert_eq!(
        err(parse_meminfo("MemTotal:       24683568 kB\nMemFree:")),
        (Source::MemInfo, 2, ErrorKind::MissingColumn("value"))
    );
    assert_eq!(
        err(parse_df(&format!(
            "{DF_HEADER}/dev/vda ext4 270553174016 2246849"
        ))),
        (Source::Df, 2, ErrorKind::MissingColumn("Available"))
    );
    assert_eq!(
        err(parse_df("Filesystem     Type     1-blocks")),
        (Source::Df, 1, ErrorKind::UnknownHeader)
    );
    assert_eq!(
        err(parse_failed_units(
            "nginx.service loaded failed failed web\nphp8.2-fpm.service load"
        )),
        (Source::Systemctl, 2, ErrorKind::MissingColumn("ACTIVE"))
    );
    assert_eq!(
        err(parse_apt_upgradable(
            "Listing...\nbash/oldstable 5.2.15-2+b13 amd64 [upgradable from: 5.2.15-2+b8]\napt/oldstable-security 2.6.2 amd64 [upgradable"
        )),
        (Source::Apt, 3, ErrorKind::MissingColumn("from:"))
    );
    assert_eq!(
        err(parse_timedatectl_show("Timezone=Etc/UTC\nNTPSynchron")),
        (Source::Timedatectl, 2, ErrorKind::UnexpectedLine)
    );
    assert_eq!(
        err(parse_reboot_required(
            Some("*** System restart required ***\n"),
            Some("linux-base\nl")
        )),
        (Source::RebootRequiredPkgs, 2, ErrorKind::Invalid("package"))
    );
}

#[test]
fn numbers_past_u64_are_refused() {
    let huge = "18446744073709551616"; // u64::MAX + 1
    assert_eq!(
        err(parse_loadavg(&format!("{huge}.00 1.00 1.00 1/1 1"))),
        (Source::LoadAvg, 1, ErrorKind::Overflow("1 min"))
    );
    assert_eq!(
        err(parse_loadavg(&format!("1.00 1.00 1.00 1/{huge} 1"))),
        (Source::LoadAvg, 1, ErrorKind::Overflow("tasks"))
    );
    assert_eq!(
        err(parse_nproc(huge)),
        (Source::Nproc, 1, ErrorKind::Overflow("cpus"))
    );
    assert_eq!(
        err(parse_meminfo(&format!("MemTotal: {huge} kB\n"))),
        (Source::MemInfo, 1, ErrorKind::Overflow("MemTotal"))
    );
    // A number that fits, but not once counted in bytes.
    assert_eq!(
        err(parse_df(&format!(
            "Filesystem Type 1024-blocks Used Available Capacity Mounted on\n/dev/a ext4 {} 0 0 0% /\n",
            u64::MAX / 1000
        ))),
        (Source::Df, 2, ErrorKind::Overflow("size"))
    );
    assert_eq!(
        err(parse_df(&format!(
            "{DF_HEADER}/dev/a ext4 1 1 {huge} 1% /\n"
        ))),
        (Source::Df, 2, ErrorKind::Overflow("Available"))
    );
    // The sum of used and available is never computed to overflow.
    let max = u64::MAX;
    let t = parse_df(&format!("{DF_HEADER}/dev/a ext4 {max} {max} {max} 50% /\n")).expect("fits");
    assert_eq!(
        t.filesystems[0].used_ratio().map(|r| r.percent_ceil()),
        Some(100)
    );
}

#[test]
fn replaced_bytes_are_refused_where_only_ascii_belongs() {
    const R: &str = "\u{FFFD}";
    assert_eq!(
        err(parse_loadavg(&format!("0.5{R} 0.58 0.59 1/257 12345"))),
        (Source::LoadAvg, 1, ErrorKind::ReplacementCharacter)
    );
    assert_eq!(
        err(parse_nproc(&format!("2{R}"))),
        (Source::Nproc, 1, ErrorKind::ReplacementCharacter)
    );
    assert_eq!(
        err(parse_meminfo(&format!("MemTotal: 1 kB\nMem{R}ree: 1 kB\n"))),
        (Source::MemInfo, 2, ErrorKind::ReplacementCharacter)
    );
    assert_eq!(
        err(parse_apt_upgradable(&format!(
            "bash{R}/stable 1 amd64 [upgradable from: 0]"
        ))),
        (Source::Apt, 1, ErrorKind::ReplacementCharacter)
    );
    assert_eq!(
        err(parse_timedatectl_show(&format!(
            "Timezone=Europe/Z{R}rich\nNTPSynchronized=yes"
        ))),
        (Source::Timedatectl, 1, ErrorKind::ReplacementCharacter)
    );
    assert_eq!(
        err(parse_reboot_required(
            Some(""),
            Some(&format!("libc6\nlinux-{R}\n"))
        )),
        (
            Source::RebootRequiredPkgs,
            2,
            ErrorKind::ReplacementCharacter
        )
    );
    // A unit name is ASCII (systemd escapes the rest); in a number it is
    // no number.
    assert_eq!(
        err(parse_failed_units(&format!(
            "caf{R}.service loaded failed failed x"
        ))),
        (Source::Systemctl, 1, ErrorKind::Invalid("UNIT"))
    );
    assert_eq!(
        err(parse_df(&format!(
            "{DF_HEADER}/dev/a ext4 1{R}0 5 5 50% /\n"
        ))),
        (Source::Df, 2, ErrorKind::NotANumber("size"))
    );
}

#[test]
fn replaced_bytes_are_kept_in_free_text() {
    // A mount point or a description may hold bytes that are not UTF-8;
    // the row is kept, with the replacement character shown.
    let t = parse_df(&format!(
        "{DF_HEADER}/dev/a ext4 10 5 5 50% /srv/caf\u{FFFD}\n"
    ))
    .expect("kept");
    assert_eq!(t.filesystems[0].mount, "/srv/caf\u{FFFD}");
    let u = parse_failed_units("a.service loaded failed failed Caf\u{FFFD}\n").expect("kept");
    assert_eq!(u[0].description, "Caf\u{FFFD}");
}

#[test]
fn empty_output_is_an_error_where_the_command_always_prints() {
    assert_eq!(
        err(parse_loadavg("")),
        (Source::LoadAvg, 0, ErrorKind::Empty)
    );
    assert_eq!(err(parse_nproc("")), (Source::Nproc, 0, ErrorKind::Empty));
    assert_eq!(
        err(parse_meminfo("")),
        (Source::MemInfo, 0, ErrorKind::Empty)
    );
    assert_eq!(
        err(parse_meminfo("\n\n")),
        (Source::MemInfo, 0, ErrorKind::Empty)
    );
    assert_eq!(err(parse_df("")), (Source::Df, 0, ErrorKind::Empty));
    assert_eq!(
        err(parse_timedatectl_show("")),
        (Source::Timedatectl, 0, ErrorKind::Empty)
    );
}

#[test]
fn empty_output_is_nothing_where_the_command_may_print_nothing() {
    assert_eq!(parse_failed_units(""), Ok(vec![]));
    assert_eq!(parse_apt_upgradable(""), Ok(vec![]));
    assert_eq!(
        parse_reboot_required(Some(""), Some("")).map(|r| r.packages),
        Ok(vec![])
    );
}

#[test]
fn control_characters_and_long_lines_are_refused() {
    assert_eq!(
        err(parse_df(&format!(
            "{DF_HEADER}/dev/a ext4 10 5 5 50% /srv/\x1b[2Jx\n"
        ))),
        (Source::Df, 2, ErrorKind::ControlCharacter)
    );
    assert_eq!(
        err(parse_failed_units("a.service loaded failed failed x\r\n")),
        (Source::Systemctl, 1, ErrorKind::ControlCharacter)
    );
    assert_eq!(
        err(parse_meminfo("MemTotal:\t1 kB\n")),
        (Source::MemInfo, 1, ErrorKind::ControlCharacter)
    );
    let long = format!(
        "{DF_HEADER}/dev/a ext4 10 5 5 50% /{}\n",
        "a".repeat(MAX_LINE_BYTES)
    );
    assert_eq!(
        err(parse_df(&long)),
        (
            Source::Df,
            2,
            ErrorKind::LineTooLong {
                limit: MAX_LINE_BYTES
            }
        )
    );
}

#[test]
fn tables_past_their_cap_are_refused() {
    let mut df = DF_HEADER.to_owned();
    for i in 0..=aromba_health::df::MAX_FILESYSTEMS {
        df.push_str(&format!("/dev/a ext4 10 5 5 50% /m{i}\n"));
    }
    assert_eq!(
        err(parse_df(&df)),
        (
            Source::Df,
            0,
            ErrorKind::TooManyEntries {
                limit: aromba_health::df::MAX_FILESYSTEMS
            }
        )
    );
    let mut units = String::new();
    for i in 0..=aromba_health::systemctl::MAX_UNITS {
        units.push_str(&format!("u{i}.service loaded failed failed x\n"));
    }
    assert_eq!(
        err(parse_failed_units(&units)),
        (
            Source::Systemctl,
            0,
            ErrorKind::TooManyEntries {
                limit: aromba_health::systemctl::MAX_UNITS
            }
        )
    );
}

/// Every parser on `text`; whatever each answers, none may panic.
fn all_parsers(text: &str) {
    let _ = parse_loadavg(text);
    let _ = parse_nproc(text);
    let _ = parse_meminfo(text);
    let _ = parse_df(text);
    let _ = parse_failed_units(text);
    let _ = parse_apt_upgradable(text);
    let _ = parse_reboot_required(Some(text), Some(text));
    let _ = parse_timedatectl_show(text);
}

#[test]
fn no_mangling_of_a_real_output_makes_a_parser_panic() {
    let files = [
        "debian-12/loadavg.txt",
        "debian-12/meminfo.txt",
        "rhel-5/meminfo.txt",
        "debian-12/df-space-mounts.txt",
        "debian-12/df-inodes-mounts.txt",
        "debian-12-busybox/df-space-mounts.txt",
        "ubuntu-16.04/df-space-k.txt",
        "debian-12/apt-list-upgradable.txt",
        "ubuntu-26.04/apt-list-upgradable.txt",
        "fedora-44/systemctl-list-units-failed.txt",
        "centos-7/systemctl-list-units-state-failed.txt",
        "unstated/timedatectl-show-unsynchronized.txt",
        "unstated/reboot-required.pkgs.txt",
    ];
    let inserts = [
        "",
        "\u{FFFD}",
        "\0",
        "\n",
        "99999999999999999999999",
        "%",
        "●",
    ];
    for rel in files {
        let text = fixture(rel);
        let cuts: Vec<usize> = text.char_indices().map(|(i, _)| i).collect();
        // Cut at about 120 places per file (every character of a small one).
        let stride = (cuts.len() / 120).max(1);
        for &at in cuts.iter().step_by(stride) {
            all_parsers(&text[..at]);
            for insert in inserts {
                let next = text[at..].chars().next().map_or(0, char::len_utf8);
                let mangled = format!("{}{insert}{}", &text[..at], &text[at + next..]);
                all_parsers(&mangled);
            }
        }
    }
}
