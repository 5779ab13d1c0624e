//! A release tarball, read whole in memory — so what is checked is what
//! is used — and refused whole unless it is exactly what its manifest
//! entry says: its size and SHA-256 first, then, gunzipped within a cap,
//! a tar archive of exactly one regular file named after its binary. A
//! directory, a link, a device, another file, a path with a separator, an
//! extended or long-name header: refused.

use crate::manifest::{Entry, MAX_TARBALL};
use crate::{ReleaseError, sha256_hex};
use std::io::Read;

/// A binary is at most this large unpacked.
pub const MAX_BINARY: u64 = 128 * 1024 * 1024;
const BLOCK: usize = 512;

fn bad(why: impl Into<String>) -> ReleaseError {
    ReleaseError::Tarball(why.into())
}

/// The binary in `gz`, the tarball `entry` names.
pub fn extract(entry: &Entry, gz: &[u8]) -> Result<Vec<u8>, ReleaseError> {
    let name = &entry.tarball;
    if gz.len() as u64 != entry.size || entry.size > MAX_TARBALL {
        // The size found is not said: the file may be one the download's
        // owner could not read.
        return Err(bad(format!(
            "{name} is not the size its manifest says ({} bytes)",
            entry.size
        )));
    }
    if sha256_hex(gz) != entry.sha256 {
        return Err(bad(format!("{name}'s SHA-256 is not its manifest's")));
    }
    let tar = gunzip(gz).map_err(|why| bad(format!("{name}: {why}")))?;
    one_file(&tar, entry.binary.file_name()).map_err(|why| bad(format!("{name}: {why}")))
}

/// The gzip stream's content, refused past the cap (a bomb) or with data
/// after its end.
fn gunzip(gz: &[u8]) -> Result<Vec<u8>, String> {
    let mut decoder = flate2::bufread::GzDecoder::new(gz);
    let mut out = Vec::new();
    let cap = MAX_BINARY + 64 * BLOCK as u64;
    (&mut decoder)
        .take(cap + 1)
        .read_to_end(&mut out)
        .map_err(|e| format!("not a gzip stream: {e}"))?;
    if out.len() as u64 > cap {
        return Err(format!("it unpacks to more than {cap} bytes"));
    }
    if !decoder.into_inner().is_empty() {
        return Err("bytes follow the gzip stream".into());
    }
    Ok(out)
}

/// An octal field of a tar header (NUL- or space-terminated).
fn octal(field: &[u8]) -> Result<u64, String> {
    let digits: Vec<u8> = field
        .iter()
        .copied()
        .skip_while(|b| *b == b' ')
        .take_while(|b| *b != 0 && *b != b' ')
        .collect();
    if digits.is_empty() || digits.len() > 12 || !digits.iter().all(|b| (b'0'..=b'7').contains(b)) {
        return Err("a header field is not octal".into());
    }
    let text =
        std::str::from_utf8(&digits).map_err(|_| "a header field is not octal".to_string())?;
    u64::from_str_radix(text, 8).map_err(|_| "a header field is out of range".into())
}

/// The one file `tar` holds, which must be a regular file named `want`.
fn one_file(tar: &[u8], want: &str) -> Result<Vec<u8>, String> {
    if tar.len() < BLOCK || !tar.len().is_multiple_of(BLOCK) {
        return Err("it is not a tar archive (not whole 512-byte blocks)".into());
    }
    let header = &tar[..BLOCK];
    // The checksum: every byte of the header, its own field read as spaces.
    let stored = octal(&header[148..156])?;
    let sum: u64 = header
        .iter()
        .enumerate()
        .map(|(i, b)| {
            if (148..156).contains(&i) {
                u64::from(b' ')
            } else {
                u64::from(*b)
            }
        })
        .sum();
    if stored != sum {
        return Err("its first header's checksum is wrong".into());
    }
    let kind = header[156];
    if kind != b'0' && kind != 0 {
        return Err(match kind {
            b'1' | b'2' => "it holds a link".into(),
            b'3' | b'4' | b'6' => "it holds a device or a pipe".into(),
            b'5' => "it holds a directory".into(),
            b'x' | b'g' | b'L' | b'K' => "it holds extended or long-name headers".into(),
            other => format!("it holds an entry of type {:?}", other as char),
        });
    }
    // ustar's prefix field would put the name in a directory.
    let ustar = &header[257..262] == b"ustar";
    if ustar && header[345..500].iter().any(|b| *b != 0) {
        return Err("its entry's name has a directory prefix".into());
    }
    let name_field = &header[..100];
    let end = name_field.iter().position(|b| *b == 0).unwrap_or(100);
    if name_field[end..].iter().any(|b| *b != 0) {
        return Err("its entry's name has bytes after its end".into());
    }
    let name = std::str::from_utf8(&name_field[..end])
        .map_err(|_| "its entry's name is not UTF-8".to_string())?;
    if name != want {
        return Err(format!("its entry is {name:?}, not {want:?} alone"));
    }
    let size = octal(&header[124..136])?;
    if size == 0 || size > MAX_BINARY {
        return Err(format!(
            "its binary's size {size} is not between 1 and {MAX_BINARY} bytes"
        ));
    }
    let size = size as usize;
    let data_end = BLOCK + size.div_ceil(BLOCK) * BLOCK;
    if tar.len() < data_end + 2 * BLOCK {
        return Err("it ends before its binary and the end-of-archive blocks".into());
    }
    // Nothing after it but zero blocks: a second entry is refused whole.
    if tar[BLOCK + size..].iter().any(|b| *b != 0) {
        return Err("it holds more than its one binary".into());
    }
    Ok(tar[BLOCK..BLOCK + size].to_vec())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::manifest::Binary;

    /// A tar header for `name`, of `kind`, `size` bytes, with its checksum.
    pub(crate) fn header(name: &str, kind: u8, size: usize) -> Vec<u8> {
        let mut h = vec![0u8; BLOCK];
        h[..name.len()].copy_from_slice(name.as_bytes());
        h[100..107].copy_from_slice(b"0000755");
        h[108..115].copy_from_slice(b"0000000");
        h[116..123].copy_from_slice(b"0000000");
        h[124..135].copy_from_slice(format!("{size:011o}").as_bytes());
        h[136..147].copy_from_slice(b"00000000000");
        h[156] = kind;
        h[257..263].copy_from_slice(b"ustar\0");
        h[263..265].copy_from_slice(b"00");
        h[148..156].copy_from_slice(b"        ");
        let sum: u32 = h.iter().map(|b| u32::from(*b)).sum();
        h[148..155].copy_from_slice(format!("{sum:06o}\0").as_bytes());
        h
    }

    fn archive(entries: &[(&str, u8, &[u8])]) -> Vec<u8> {
        let mut tar = Vec::new();
        for (name, kind, data) in entries {
            tar.extend(header(name, *kind, data.len()));
            tar.extend_from_slice(data);
            tar.resize(tar.len().div_ceil(BLOCK) * BLOCK, 0);
        }
        tar.extend(vec![0u8; 2 * BLOCK]);
        tar
    }

    fn gzip(bytes: &[u8]) -> Vec<u8> {
        use std::io::Write;
        let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
        e.write_all(bytes).unwrap();
        e.finish().unwrap()
    }

    fn entry_for(gz: &[u8]) -> Entry {
        Entry {
            binary: Binary::Worker,
            tarball: "aromba-1.0.0-x86_64.tar.gz".into(),
            sha256: sha256_hex(gz),
            size: gz.len() as u64,
        }
    }

    #[test]
    fn the_one_binary_is_extracted() {
        let gz = gzip(&archive(&[("aromba", b'0', b"\x7fELF binary")]));
        assert_eq!(
            extract(&entry_for(&gz), &gz).expect("the binary"),
            b"\x7fELF binary"
        );
    }

    #[test]
    fn a_tarball_that_differs_from_its_entry_is_refused_before_it_is_read() {
        let gz = gzip(&archive(&[("aromba", b'0', b"x")]));
        let mut e = entry_for(&gz);
        e.sha256 = "0".repeat(64);
        assert!(
            extract(&e, &gz)
                .unwrap_err()
                .to_string()
                .contains("SHA-256")
        );
        let mut e = entry_for(&gz);
        e.size += 1;
        assert!(extract(&e, &gz).unwrap_err().to_string().contains("bytes"));
    }

    #[test]
    fn anything_but_one_regular_file_named_after_the_binary_is_refused_whole() {
        let cases: Vec<(&str, Vec<u8>)> = vec![
            (
                "a second file",
                archive(&[("aromba", b'0', b"x"), ("extra", b'0', b"y")]),
            ),
            ("a directory", archive(&[("aromba", b'5', b"")])),
            ("a symlink", archive(&[("aromba", b'2', b"")])),
            ("a hard link", archive(&[("aromba", b'1', b"")])),
            ("a device", archive(&[("aromba", b'3', b"")])),
            (
                "a path with a separator",
                archive(&[("bin/aromba", b'0', b"x")]),
            ),
            ("a parent path", archive(&[("../aromba", b'0', b"x")])),
            ("another name", archive(&[("aromba-warden", b'0', b"x")])),
            (
                "a pax header",
                archive(&[
                    ("aromba", b'x', b"30 path=../../etc/shadow\n"),
                    ("aromba", b'0', b"x"),
                ]),
            ),
            (
                "a long name",
                archive(&[("././@LongLink", b'L', b"aromba\0"), ("aromba", b'0', b"x")]),
            ),
            ("an empty file", archive(&[("aromba", b'0', b"")])),
        ];
        for (what, tar) in cases {
            let gz = gzip(&tar);
            assert!(extract(&entry_for(&gz), &gz).is_err(), "{what} was taken");
        }
    }

    #[test]
    fn a_prefix_field_or_trailing_bytes_are_refused() {
        let mut tar = archive(&[("aromba", b'0', b"x")]);
        tar[345..349].copy_from_slice(b"/etc");
        // Re-sum: the checksum is right, the prefix still refused.
        tar[148..156].copy_from_slice(b"        ");
        let sum: u32 = tar[..BLOCK].iter().map(|b| u32::from(*b)).sum();
        tar[148..155].copy_from_slice(format!("{sum:06o}\0").as_bytes());
        let gz = gzip(&tar);
        assert!(
            extract(&entry_for(&gz), &gz)
                .unwrap_err()
                .to_string()
                .contains("prefix")
        );
        let mut gz = gzip(&archive(&[("aromba", b'0', b"x")]));
        gz.extend_from_slice(b"more");
        assert!(extract(&entry_for(&gz), &gz).is_err());
    }

    #[test]
    fn a_wrong_checksum_or_not_gzip_is_refused() {
        let mut tar = archive(&[("aromba", b'0', b"x")]);
        tar[0] = b'b';
        let gz = gzip(&tar);
        assert!(
            extract(&entry_for(&gz), &gz)
                .unwrap_err()
                .to_string()
                .contains("checksum")
        );
        let plain = archive(&[("aromba", b'0', b"x")]);
        assert!(
            extract(&entry_for(&plain), &plain)
                .unwrap_err()
                .to_string()
                .contains("gzip")
        );
    }

    #[test]
    fn a_bomb_is_refused_at_the_cap() {
        // A gzip of zeros larger than the cap, in a few hundred kilobytes.
        use std::io::Write;
        let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
        let zeros = vec![0u8; 1 << 20];
        for _ in 0..=(MAX_BINARY >> 20) + 1 {
            e.write_all(&zeros).unwrap();
        }
        let gz = e.finish().unwrap();
        assert!(
            extract(&entry_for(&gz), &gz)
                .unwrap_err()
                .to_string()
                .contains("more than")
        );
    }
}
