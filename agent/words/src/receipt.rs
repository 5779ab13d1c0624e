//! A run's receipt in the chat's words. The Warden writes one technical
//! line per run (`tidy: real run, exit 0, 4 files changed (12289 bytes);
//! changed: 0 added, 3 removed, 0 changed; 48 B freed; undo id … (for 7
//! days)`), which its journal and `aromba chores` keep as they are; the
//! chat leads with what happened in plain words and one set of numbers
//! (the snapshot's, when there is one), sizes as people read them, the
//! technical line's rest after it, and the undo id behind the Undo button
//! rather than in the text. A line it cannot read is shown as written.

/// What a receipt line says, as far as it can be read.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Receipt<'a> {
    pub chore: &'a str,
    pub dry: bool,
    /// `exit 0`, `exit 3`, `killed`.
    pub exit: &'a str,
    /// Changes the runner counted while it ran, and the bytes they wrote.
    pub counted: u64,
    pub bytes: u64,
    /// The snapshot's count: added, removed, changed.
    pub changed: Option<(u64, u64, u64)>,
    /// `48 B freed`, `1.2 MB added`.
    pub space: Option<&'a str>,
    pub undo_id: Option<&'a str>,
    /// Everything else the line says, in its own words.
    pub notes: Vec<&'a str>,
}

/// Reads a receipt line; `None` when it is not one the Warden writes.
pub fn parse(line: &str) -> Option<Receipt<'_>> {
    let mut segments = line.split("; ");
    let head = segments.next()?;
    let (chore, rest) = head.split_once(": ")?;
    let mut parts = rest.splitn(3, ", ");
    let dry = match parts.next()? {
        "dry run" => true,
        "real run" => false,
        _ => return None,
    };
    let exit = parts.next()?;
    let counts = parts.next()?;
    let (counted, bytes) = counts.split_once(" files changed (")?;
    let bytes = bytes.strip_suffix(" bytes)")?;
    let mut r = Receipt {
        chore,
        dry,
        exit,
        counted: counted.parse().ok()?,
        bytes: bytes.parse().ok()?,
        ..Receipt::default()
    };
    for segment in segments {
        if let Some(changed) = segment.strip_prefix("changed: ") {
            r.changed = three_counts(changed);
            if r.changed.is_none() {
                r.notes.push(segment);
            }
        } else if let Some(id) = segment.strip_prefix("undo id ") {
            r.undo_id = id.split_whitespace().next();
        } else if r.space.is_none()
            && (segment.ends_with(" freed") || segment.ends_with(" added"))
            && segment.contains("B ")
            && segment.starts_with(|c: char| c.is_ascii_digit())
        {
            r.space = Some(segment);
        } else {
            r.notes.push(segment);
        }
    }
    Some(r)
}

/// `3 added, 1 removed, 2 changed` → (3, 1, 2).
fn three_counts(text: &str) -> Option<(u64, u64, u64)> {
    let mut n = text.split(", ").map(|part| {
        let (count, _) = part.split_once(' ')?;
        count.parse::<u64>().ok()
    });
    let counts = (n.next()??, n.next()??, n.next()??);
    n.next().is_none().then_some(counts)
}

/// `n` files in words: `1 file`, `3 files`.
fn files(n: u64) -> String {
    if n == 1 {
        "1 file".into()
    } else {
        format!("{n} files")
    }
}

/// Bytes as people read them: `512 B`, `12 KB`, `1.2 MB`, `3.4 GB`.
pub fn human(bytes: u64) -> String {
    const UNITS: [&str; 4] = ["KB", "MB", "GB", "TB"];
    if bytes < 1024 {
        return format!("{bytes} B");
    }
    let mut value = bytes as f64 / 1024.0;
    let mut unit = 0;
    while value >= 1024.0 && unit + 1 < UNITS.len() {
        value /= 1024.0;
        unit += 1;
    }
    if value < 10.0 {
        format!("{value:.1} {}", UNITS[unit])
    } else {
        format!("{value:.0} {}", UNITS[unit])
    }
}

/// What the run did, in words: `removed 3 files (48 B freed)`.
/// A run that touched nothing.
const CHANGED_NONE: &str = "changed no files";

fn what_it_did(r: &Receipt<'_>) -> String {
    let did = match r.changed {
        Some((added, removed, changed)) => {
            let parts: Vec<String> = [("removed", removed), ("added", added), ("changed", changed)]
                .iter()
                .filter(|(_, n)| *n > 0)
                .map(|(verb, n)| format!("{verb} {}", files(*n)))
                .collect();
            if parts.is_empty() {
                CHANGED_NONE.to_string()
            } else {
                parts.join(", ")
            }
        }
        None if r.counted == 0 => CHANGED_NONE.to_string(),
        None => format!("changed {} ({})", files(r.counted), human(r.bytes)),
    };
    match r.space {
        Some(space) => format!("{did} ({space})"),
        None => did,
    }
}

/// The chat's words for a real run's receipt, after `verdict` ("Done.",
/// "It did not go well."); the line as written when it cannot be read.
pub fn plain(verdict: &str, line: &str) -> String {
    let Some(r) = parse(line) else {
        return format!("{verdict} {line}");
    };
    let mut text = format!("{verdict} {} {}.", r.chore, what_it_did(&r));
    if r.undo_id.is_some() {
        text.push_str(" Undo puts it back as it was, for 7 days: the button below.");
    }
    text.push_str(&details(&r));
    text
}

/// The technical rest: how it ended, what the runner counted, the notes.
fn details(r: &Receipt<'_>) -> String {
    let mut details = vec![r.exit.to_string()];
    if r.changed.is_some() && r.counted > 0 {
        details.push(format!(
            "{} counted while it ran ({} written)",
            if r.counted == 1 {
                "1 change".to_string()
            } else {
                format!("{} changes", r.counted)
            },
            human(r.bytes)
        ));
    }
    details.extend(r.notes.iter().map(|n| n.to_string()));
    format!("\nDetails: {}.", details.join("; "))
}

/// The chat's words for a dry run under its heading (which says nothing
/// changed): what it would do, or why the dry run failed. Its receipt
/// line ("0 files changed (0 bytes)") only said what the heading says.
pub fn dry_run(line: &str, would: &str) -> String {
    let would = if would.is_empty() {
        "(It printed nothing about what it would do.)".to_string()
    } else {
        would.to_string()
    };
    match parse(line) {
        Some(r) if r.dry && r.exit == "exit 0" && r.notes.is_empty() => would,
        Some(r) if r.dry => format!(
            "The dry run did not go well, so the chore will not run until it does.{}\n{would}",
            details(&r)
        ),
        _ => format!("{line}\n{would}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const RED: &str = "tidy-cache: real run, exit 0, 4 files changed (12289 bytes); changed: 0 added, 3 removed, 0 changed; 48 B freed; undo id 0123456789abcdef0123456789abcdef (for 7 days)";

    #[test]
    fn a_red_receipt_leads_with_what_it_did_in_one_set_of_numbers() {
        let text = plain("Done.", RED);
        assert_eq!(
            text,
            "Done. tidy-cache removed 3 files (48 B freed). Undo puts it back as it was, for 7 days: the button below.\nDetails: exit 0; 4 changes counted while it ran (12 KB written)."
        );
        assert!(
            !text.contains("0123456789abcdef"),
            "the id is behind the button"
        );
    }

    #[test]
    fn a_run_without_a_snapshot_says_what_the_runner_counted() {
        assert_eq!(
            plain(
                "Done.",
                "apt-clean: real run, exit 0, 2 files changed (2097152 bytes)"
            ),
            "Done. apt-clean changed 2 files (2.0 MB).\nDetails: exit 0."
        );
        assert_eq!(
            plain(
                "Done.",
                "time-sync: real run, exit 0, 0 files changed (0 bytes)"
            ),
            "Done. time-sync changed no files.\nDetails: exit 0."
        );
    }

    #[test]
    fn what_the_warden_added_to_a_receipt_stays_in_its_words() {
        let text = plain(
            "It did not go well.",
            "wipe: real run, killed, 1002 files changed (1002 bytes); killed at the damage cap",
        );
        assert!(
            text.starts_with("It did not go well. wipe changed 1002 files (1002 B)."),
            "{text}"
        );
        assert!(
            text.ends_with("Details: killed; killed at the damage cap."),
            "{text}"
        );
    }

    #[test]
    fn a_line_it_cannot_read_is_shown_as_written() {
        assert_eq!(plain("Done.", "something new"), "Done. something new");
        assert_eq!(dry_run("odd", "x"), "odd\nx");
    }

    #[test]
    fn a_dry_run_says_nothing_changed_and_what_it_would_do() {
        assert_eq!(
            dry_run(
                "tidy-cache: dry run, exit 0, 0 files changed (0 bytes)",
                "would remove a.tmp"
            ),
            "would remove a.tmp"
        );
        let failed = dry_run("x: dry run, exit 3, 0 files changed (0 bytes)", "");
        assert!(
            failed.starts_with("The dry run did not go well"),
            "{failed}"
        );
        assert!(failed.contains("Details: exit 3."), "{failed}");
    }

    #[test]
    fn sizes_read_as_people_read_them() {
        assert_eq!(human(48), "48 B");
        assert_eq!(human(12_289), "12 KB");
        assert_eq!(human(1_258_291), "1.2 MB");
        assert_eq!(human(5 << 30), "5.0 GB");
    }
}
