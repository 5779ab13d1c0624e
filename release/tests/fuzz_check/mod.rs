//! The checks of the `release_manifest` and `release_tarball` fuzz targets,
//! shared with the corpus replay in `release/tests/fuzz_corpus.rs` (the
//! targets include this file by path).

use aromba_release::manifest::{Binary, Entry, FORMAT, MAX_TARBALL, Manifest, Target};
use aromba_release::tarball::{MAX_BINARY, extract};
use aromba_release::{Version, sha256_hex};
use std::io::Write;

/// The manifest as JSON, every field in it (what `scripts/release` writes).
pub fn render(m: &Manifest) -> Vec<u8> {
    let entry = |e: &Entry| {
        serde_json::json!({
            "binary": e.binary.file_name(),
            "tarball": e.tarball,
            "sha256": e.sha256,
            "size": e.size,
        })
    };
    serde_json::to_vec(&serde_json::json!({
        "format": FORMAT,
        "version": m.version.to_string(),
        "channel": m.channel,
        "arch": m.arch,
        "expires": m.expires,
        "binaries": [entry(&m.binaries[0]), entry(&m.binaries[1])],
    }))
    .unwrap_or_default()
}

/// A manifest's bytes: what parses renders back to JSON that parses to the
/// same manifest; its version prints and parses back the same; judging it
/// at any clock and against any installed version does not panic, and a
/// fresh manifest is one whose expiry is ahead of the clock.
pub fn manifest(data: &[u8]) -> Result<(), String> {
    if let Ok(text) = std::str::from_utf8(data)
        && let Ok(v) = Version::parse(text)
        && Version::parse(&v.to_string()).ok() != Some(v)
    {
        return Err(format!("{text:?} parses as {v:?}, which prints as {v}"));
    }
    let Ok(m) = Manifest::parse(data) else {
        return Ok(());
    };
    let rendered = render(&m);
    match Manifest::parse(&rendered) {
        Ok(again) if again == m => {}
        other => {
            return Err(format!(
                "{m:?} renders as {} and parses back as {other:?}",
                String::from_utf8_lossy(&rendered)
            ));
        }
    }
    if Version::parse(&m.version.to_string()).ok() != Some(m.version) {
        return Err(format!("{:?} does not print and parse back", m.version));
    }
    if m.binaries[0].binary != Binary::Worker || m.binaries[1].binary != Binary::Warden {
        return Err(format!("{m:?} has its binaries out of order"));
    }
    let target = Target {
        arch: m.arch.clone(),
        channel: m.channel.clone(),
    };
    for now in [
        0,
        1,
        m.expires.saturating_sub(1),
        m.expires,
        m.expires.saturating_add(1),
        u64::MAX,
    ] {
        let fresh = m.fresh(now).is_ok();
        if fresh && m.expires <= now {
            return Err(format!("{m:?} is fresh at {now}, on or after its expiry"));
        }
        let installed = [
            None,
            Some(m.version),
            Some(Version {
                major: 0,
                minor: 0,
                patch: 0,
            }),
        ];
        for i in installed {
            let admissible = m.admissible(&target, now, i, &[]).is_ok();
            if admissible && (!fresh || i.is_some_and(|i| m.version <= i)) {
                return Err(format!("{m:?} admissible at {now} over {i:?}"));
            }
        }
    }
    Ok(())
}

fn gzip(data: &[u8]) -> Vec<u8> {
    let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    let _ = e.write_all(data);
    e.finish().unwrap_or_default()
}

fn entry_for(binary: Binary, gz: &[u8]) -> Entry {
    Entry {
        binary,
        tarball: "aromba-x86_64.tar.gz".into(),
        sha256: sha256_hex(gz),
        size: gz.len() as u64,
    }
}

/// What `extract` took from `tar`, checked against the archive read
/// plainly: the first header names the binary, is a regular file, and
/// the binary is exactly the bytes after it, with only zeros after them.
fn taken_is_the_one_entry(binary: Binary, tar: &[u8], taken: &[u8]) -> Result<(), String> {
    let want = binary.file_name().as_bytes();
    let ok = tar.len() >= 512
        && tar[..want.len().min(100)] == *want
        && tar[want.len()..100].iter().all(|b| *b == 0)
        && matches!(tar[156], b'0' | 0)
        && !taken.is_empty()
        && taken.len() as u64 <= MAX_BINARY
        && tar.get(512..512 + taken.len()) == Some(taken)
        && tar[512 + taken.len()..].iter().all(|b| *b == 0);
    if ok {
        Ok(())
    } else {
        Err(format!(
            "extract took {} bytes from a tar that is not just them",
            taken.len()
        ))
    }
}

/// A tarball's bytes, two ways: as the tar inside a gzip stream the check
/// makes, and as a gzip stream as it came; each under an entry of the right
/// size and hash. What is taken is the archive's one regular file, named
/// after its binary, and nothing else; a size or a hash that is not the
/// entry's is refused. `Ok` says how many ways a binary was taken.
pub fn tarball(data: &[u8]) -> Result<usize, String> {
    let gz = gzip(data);
    let mut took = 0;
    for binary in Binary::ALL {
        if gz.len() as u64 <= MAX_TARBALL {
            let entry = entry_for(binary, &gz);
            if let Ok(taken) = extract(&entry, &gz) {
                taken_is_the_one_entry(binary, data, &taken)?;
                took += 1;
                let mut wrong = entry.clone();
                wrong.sha256 = sha256_hex(b"another tarball");
                if extract(&wrong, &gz).is_ok() {
                    return Err("a tarball whose hash is not its entry's was taken".into());
                }
                let mut wrong = entry;
                wrong.size += 1;
                if extract(&wrong, &gz).is_ok() {
                    return Err("a tarball whose size is not its entry's was taken".into());
                }
            }
        }
        if let Ok(taken) = extract(&entry_for(binary, data), data) {
            if taken.len() as u64 > MAX_BINARY {
                return Err("a gzip stream unpacked past the cap".into());
            }
            took += 1;
        }
    }
    Ok(took)
}
