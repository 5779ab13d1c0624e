//! `df -P -B1 -T` (space), `df -P -k -T` (space, where `-B1` is refused) and
//! `df -P -i -T` (inodes), from GNU coreutils or busybox.
//!
//! The unit of the numbers comes from the header (`1-blocks`, `1024-blocks`,
//! `1K-blocks`, `Inodes`), never from the flags the caller believes it
//! passed. Columns are read from the left; the mount point is the rest of
//! the line, so it may contain spaces. A source (device) with spaces is
//! read too: the columns are found as four numbers and a percentage
//! followed by an absolute path, leftmost first.

use std::collections::HashSet;

use crate::error::{ErrorKind, ParseError, Source};
use crate::text::{Replacement, checked_lines, number, words};
use crate::units::Ratio;

/// No real server mounts more; a longer table is refused.
pub const MAX_FILESYSTEMS: usize = 4096;

/// What the numbers count.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DfKind {
    /// Bytes (the table's blocks times its block size).
    Space,
    /// Inodes.
    Inodes,
}

/// One row of `df`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Filesystem {
    /// The device or source (`/dev/sda1`, `tmpfs`, `server:/export`).
    pub source: String,
    /// The filesystem type (`ext4`, `tmpfs`, …).
    pub fstype: String,
    /// Total bytes (space) or inodes.
    pub size: u64,
    pub used: u64,
    /// Available to unprivileged users (space excludes the root reserve).
    pub avail: u64,
    /// The mount point, an absolute path, possibly with spaces.
    pub mount: String,
}

impl Filesystem {
    /// The share in use as `df` computes it, `used / (used + avail)`:
    /// the root reserve counts as unavailable. `None` when both are zero
    /// (a filesystem that reports no inodes, such as btrfs).
    pub fn used_ratio(&self) -> Option<Ratio> {
        Ratio::new(self.used, self.used.saturating_add(self.avail))
    }
}

/// A parsed table: what it counts and its rows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DfTable {
    pub kind: DfKind,
    /// Bytes per block of the numbers as printed (1 for inode tables).
    pub block_size: u64,
    /// The rows, one per mount point: when a mount point is listed twice
    /// (busybox lists a mount point mounted over), the last row wins, as
    /// that is the filesystem mounted on top.
    pub filesystems: Vec<Filesystem>,
}

/// Parses any of the three tables.
pub fn parse_df(text: &str) -> Result<DfTable, ParseError> {
    const S: Source = Source::Df;
    let lines = checked_lines(S, text, Replacement::Allowed)?;
    let Some(&(header_line, header)) = lines.first() else {
        return Err(ParseError::whole(S, ErrorKind::Empty));
    };
    let (kind, block_size) =
        header_kind(header).ok_or(ParseError::at(S, header_line, ErrorKind::UnknownHeader))?;
    let mut rows = Vec::new();
    for &(n, line) in &lines[1..] {
        if rows.len() == MAX_FILESYSTEMS {
            return Err(ParseError::whole(
                S,
                ErrorKind::TooManyEntries {
                    limit: MAX_FILESYSTEMS,
                },
            ));
        }
        rows.push(row(n, line, block_size)?);
    }
    // The last row of a mount point wins, in the order of the rows kept.
    let mut seen = HashSet::new();
    let mut kept: Vec<Filesystem> = rows
        .into_iter()
        .rev()
        .filter(|fs| seen.insert(fs.mount.clone()))
        .collect();
    kept.reverse();
    Ok(DfTable {
        kind,
        block_size,
        filesystems: kept,
    })
}

/// `df -P -B1 -T` or `df -P -k -T`: refuses an inode table.
pub fn parse_df_space(text: &str) -> Result<Vec<Filesystem>, ParseError> {
    let table = parse_df(text)?;
    match table.kind {
        DfKind::Space => Ok(table.filesystems),
        DfKind::Inodes => Err(ParseError::at(Source::Df, 1, ErrorKind::UnknownHeader)),
    }
}

/// `df -P -i -T`: refuses a space table.
pub fn parse_df_inodes(text: &str) -> Result<Vec<Filesystem>, ParseError> {
    let table = parse_df(text)?;
    match table.kind {
        DfKind::Inodes => Ok(table.filesystems),
        DfKind::Space => Err(ParseError::at(Source::Df, 1, ErrorKind::UnknownHeader)),
    }
}

/// `Filesystem Type <size> <used> <avail> <capacity> Mounted on`, as GNU
/// and busybox print it with `-T` (with or without `-P`).
fn header_kind(header: &str) -> Option<(DfKind, u64)> {
    let w: Vec<&str> = words(header).into_iter().map(|(_, _, t)| t).collect();
    let [first, ty, size, used, avail, capacity, mounted, on] = w.as_slice() else {
        return None;
    };
    if *first != "Filesystem" || *ty != "Type" || *mounted != "Mounted" || *on != "on" {
        return None;
    }
    let (kind, block_size) = match *size {
        "Inodes" => (DfKind::Inodes, 1),
        "1K-blocks" | "1k-blocks" => (DfKind::Space, 1024),
        other => {
            let digits = other.strip_suffix("-blocks")?;
            if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
                return None;
            }
            let n: u64 = digits.parse().ok()?;
            (DfKind::Space, (n > 0).then_some(n)?)
        }
    };
    let used_ok = match kind {
        DfKind::Space => *used == "Used",
        DfKind::Inodes => matches!(*used, "IUsed" | "Used"),
    };
    let avail_ok = match kind {
        DfKind::Space => matches!(*avail, "Available" | "Avail"),
        DfKind::Inodes => matches!(*avail, "IFree" | "Available" | "Free"),
    };
    let capacity_ok = matches!(*capacity, "Capacity" | "Use%" | "IUse%");
    (used_ok && avail_ok && capacity_ok).then_some((kind, block_size))
}

/// `-` (GNU, when the size is zero) or 0–100 followed by `%`.
fn is_capacity(word: &str) -> bool {
    word == "-"
        || word
            .strip_suffix('%')
            .is_some_and(|d| !d.is_empty() && d.len() <= 3 && d.bytes().all(|b| b.is_ascii_digit()))
}

fn is_digits(word: &str) -> bool {
    !word.is_empty() && word.bytes().all(|b| b.is_ascii_digit())
}

fn row(n: usize, line: &str, block_size: u64) -> Result<Filesystem, ParseError> {
    const S: Source = Source::Df;
    let w = words(line);
    let names = [
        "Filesystem",
        "Type",
        "size",
        "Used",
        "Available",
        "Capacity",
    ];
    if w.len() < 7 {
        let missing = names.get(w.len()).copied().unwrap_or("Mounted on");
        return Err(ParseError::at(S, n, ErrorKind::MissingColumn(missing)));
    }
    // The capacity column: the first (from the left, at its usual place or
    // further right when the source has spaces) preceded by three numbers
    // and followed by an absolute path.
    let at = (5..w.len() - 1).find(|&i| {
        is_capacity(w[i].2)
            && w[i - 3..i].iter().all(|&(_, _, t)| is_digits(t))
            && w[i + 1].2.starts_with('/')
    });
    let Some(i) = at else {
        return Err(classify(n, &w));
    };
    let source = line[..w[i - 4].0].trim_matches(' ');
    let fstype = w[i - 4].2;
    let mount = &line[w[i + 1].0..];
    let bytes = |column: &'static str, text: &str| -> Result<u64, ParseError> {
        number(S, n, column, text)?
            .checked_mul(block_size)
            .ok_or(ParseError::at(S, n, ErrorKind::Overflow(column)))
    };
    Ok(Filesystem {
        source: source.to_owned(),
        fstype: fstype.to_owned(),
        size: bytes("size", w[i - 3].2)?,
        used: bytes("Used", w[i - 2].2)?,
        avail: bytes("Available", w[i - 1].2)?,
        mount: mount.to_owned(),
    })
}

/// Names the first column that is wrong, for a line that has no row shape.
fn classify(n: usize, w: &[(usize, usize, &str)]) -> ParseError {
    const S: Source = Source::Df;
    let kind = if !is_digits(w[2].2) {
        ErrorKind::NotANumber("size")
    } else if !is_digits(w[3].2) {
        ErrorKind::NotANumber("Used")
    } else if !is_digits(w[4].2) {
        ErrorKind::NotANumber("Available")
    } else if !is_capacity(w[5].2) {
        ErrorKind::Invalid("Capacity")
    } else {
        ErrorKind::Invalid("Mounted on")
    };
    ParseError::at(S, n, kind)
}

#[cfg(test)]
mod tests {
    use super::*;

    const HEADER: &str =
        "Filesystem     Type     1-blocks        Used   Available Capacity Mounted on\n";

    #[test]
    fn a_mount_point_with_spaces_is_the_rest_of_the_line() {
        let text = format!("{HEADER}/dev/loop0 ext4 100 93 7 93% /srv/backup disk\n");
        let t = parse_df(&text).map(|t| t.filesystems);
        assert_eq!(
            t.map(|f| f[0].mount.clone()),
            Ok("/srv/backup disk".to_owned())
        );
    }

    #[test]
    fn a_source_with_spaces_is_read() {
        let text = format!("{HEADER}//nas/My Share cifs 100 50 50 50% /mnt/my share\n");
        let t = parse_df(&text).map(|t| t.filesystems);
        assert_eq!(
            t.map(|f| (f[0].source.clone(), f[0].fstype.clone(), f[0].mount.clone())),
            Ok((
                "//nas/My Share".to_owned(),
                "cifs".to_owned(),
                "/mnt/my share".to_owned()
            ))
        );
    }

    #[test]
    fn zero_inodes_are_no_ratio() {
        let text = "Filesystem Type Inodes IUsed IFree IUse% Mounted on\n\
                    aromba-cache tmpfs 0 0 0 - /srv/cache\n";
        let t = parse_df(text);
        assert_eq!(t.map(|t| t.filesystems[0].used_ratio()), Ok(None));
    }

    #[test]
    fn the_block_size_comes_from_the_header() {
        for (size, block) in [
            ("1-blocks", 1),
            ("1024-blocks", 1024),
            ("1K-blocks", 1024),
            ("512-blocks", 512),
        ] {
            let text = format!(
                "Filesystem Type {size} Used Available Capacity Mounted on\n/dev/a ext4 10 5 5 50% /\n"
            );
            let t = parse_df(&text);
            assert_eq!(
                t.map(|t| (t.block_size, t.filesystems[0].size)),
                Ok((block, 10 * block)),
                "{size}"
            );
        }
    }

    #[test]
    fn a_header_without_a_unit_is_refused() {
        // `df -h` prints sizes no parser can trust.
        let text =
            "Filesystem Type Size Used Avail Use% Mounted on\n/dev/a ext4 76G 23G 52G 31% /\n";
        assert_eq!(
            parse_df(text).map_err(|e| (e.line, e.kind)),
            Err((1, ErrorKind::UnknownHeader))
        );
        // Nor without the type column, which the filter needs.
        let text =
            "Filesystem 1024-blocks Used Available Capacity Mounted on\n/dev/a 10 5 5 50% /\n";
        assert_eq!(
            parse_df(text).map_err(|e| e.kind),
            Err(ErrorKind::UnknownHeader)
        );
        assert_eq!(
            parse_df("Filesystem Type 0-blocks Used Available Capacity Mounted on\n")
                .map_err(|e| e.kind),
            Err(ErrorKind::UnknownHeader)
        );
    }

    #[test]
    fn a_number_overflowing_after_the_block_size_is_refused() {
        let text = "Filesystem Type 1024-blocks Used Available Capacity Mounted on\n\
                    /dev/a ext4 18014398509481984 0 0 0% /\n";
        assert_eq!(
            parse_df(text).map_err(|e| (e.line, e.kind)),
            Err((2, ErrorKind::Overflow("size")))
        );
        let text = format!("{HEADER}/dev/a ext4 1 99999999999999999999 0 0% /\n");
        assert_eq!(
            parse_df(&text).map_err(|e| e.kind),
            Err(ErrorKind::Overflow("Used"))
        );
    }

    #[test]
    fn a_truncated_row_names_its_line_and_column() {
        let text = format!("{HEADER}/dev/a ext4 100 50 50 50% /\n/dev/b ext4 2705\n");
        assert_eq!(
            parse_df(&text).map_err(|e| (e.line, e.kind)),
            Err((3, ErrorKind::MissingColumn("Used")))
        );
        let text = format!("{HEADER}/dev/b ext4 2705 10 x 5% /\n");
        assert_eq!(
            parse_df(&text).map_err(|e| e.kind),
            Err(ErrorKind::NotANumber("Available"))
        );
        let text = format!("{HEADER}/dev/b ext4 2705 10 10 5% relative\n");
        assert_eq!(
            parse_df(&text).map_err(|e| e.kind),
            Err(ErrorKind::Invalid("Mounted on"))
        );
    }

    #[test]
    fn a_repeated_mount_point_keeps_its_last_row() {
        let text = format!(
            "{HEADER}tmpfs tmpfs 10 1 9 10% /dev/shm\n/dev/a ext4 10 5 5 50% /\ntmpfs tmpfs 20 2 18 10% /dev/shm\n"
        );
        let t = parse_df(&text).map(|t| {
            t.filesystems
                .iter()
                .map(|f| (f.mount.clone(), f.size))
                .collect::<Vec<_>>()
        });
        assert_eq!(
            t,
            Ok(vec![("/".to_owned(), 10), ("/dev/shm".to_owned(), 20)])
        );
    }

    #[test]
    fn empty_output_is_an_error_and_a_header_alone_is_no_filesystems() {
        assert_eq!(parse_df("").map_err(|e| e.kind), Err(ErrorKind::Empty));
        assert_eq!(parse_df(HEADER).map(|t| t.filesystems.len()), Ok(0));
    }
}
