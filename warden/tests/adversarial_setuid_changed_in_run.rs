//! A setuid file the owner keeps in a touch is root for whoever runs it,
//! and the setuid rule only looked for privilege a file did not have
//! before the run. So a hostile chore could (1) rewrite that file's bytes
//! through a shared `mmap`, which, unlike `write`, leaves the setuid bit in
//! place: the file left the run setuid with the chore's content; and (2)
//! hard-link it into a directory deeper than the walk goes (past 256
//! levels), where the strip never looked: a setuid name left behind that no
//! package or owner knows of. The Warden now holds every privileged file of
//! the touches by descriptor from before the run, and after it strips the
//! privilege of each one the run changed in any way (its ctime moved),
//! wherever its names went. Each test runs the hostile chore of the owner's
//! through a real Warden and real bubblewrap. Needs root, bubblewrap and
//! the system C compiler (which building the tests needs anyway).

use aromba_testkit::warden as support;

use aromba_warden_proto::{Request, Response};
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use support::{Warden, owner_chore};

/// Runs `body` (in the touch) as a yellow chore of the owner's, after
/// `plant` put what it needs in the touch; the receipt.
fn run_hostile(
    name: &str,
    extra_header: &str,
    body: &str,
    plant: impl FnOnce(&Path),
) -> (Warden, String) {
    let script = format!("[ \"$1\" = --dry-run ] && {{ echo would; exit 0; }}\ncd TOUCHED\n{body}");
    let w = Warden::start(
        name,
        false,
        &[owner_chore("hostile", "yellow", extra_header, &script)],
    );
    plant(&w.touched);
    w.dry_run_shown("hostile");
    match w.control(&Request::ChoreRun {
        name: "hostile".into(),
        dry_run: false,
    }) {
        Response::Receipt {
            receipt,
            stdout,
            stderr,
            ..
        } => {
            let all = format!(
                "{receipt}\n{}\n{}",
                String::from_utf8_lossy(&stdout),
                String::from_utf8_lossy(&stderr)
            );
            (w, all)
        }
        other => panic!("the chore did not run: {other:?}"),
    }
}

/// A copy of `/bin/true`, setuid root, as an owner might keep a helper.
fn plant_setuid(path: &Path) {
    std::fs::copy("/bin/true", path).unwrap();
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o4755)).unwrap();
}

/// Every entry under `dir` whose mode has a setuid or setgid bit, walked
/// with `find` (no depth limit).
fn set_id_files(dir: &Path) -> String {
    let out = assert_cmd::Command::new("find")
        .arg(dir)
        .args(["-perm", "/6000", "-printf", "%d %m\\n"])
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// A directory outside `/tmp` (which the cage replaces), removed after.
struct Tools(PathBuf);

impl Drop for Tools {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A program that writes a file's first bytes through a shared `mmap`,
/// built with the system C compiler into a directory the chore reads.
fn mmap_writer(name: &str) -> (Tools, PathBuf) {
    let dir = PathBuf::from(format!(
        "/var/tmp/aromba-{name}-tools-{}",
        std::process::id()
    ));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let src = dir.join("mmapw.c");
    std::fs::write(
        &src,
        r#"#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
int main(int argc, char **argv) {
  int fd = open(argv[1], O_RDWR);
  struct stat st;
  if (fd < 0 || fstat(fd, &st) != 0) { perror("open"); return 1; }
  char *p = mmap(0, st.st_size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (p == MAP_FAILED) { perror("mmap"); return 1; }
  memcpy(p, argv[2], strlen(argv[2]));
  msync(p, st.st_size, MS_SYNC);
  printf("rewrote through mmap\n");
  return 0;
}
"#,
    )
    .unwrap();
    let bin = dir.join("mmapw");
    let out = assert_cmd::Command::new("cc")
        .arg("-o")
        .arg(&bin)
        .arg(&src)
        .output()
        .expect("the system C compiler (cc) is needed");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    (Tools(dir), bin)
}

#[test]
fn a_chore_that_rewrites_a_setuid_file_through_mmap_leaves_it_without_setuid() {
    let (tools, bin) = mmap_writer("adv-suid-mmap");
    let (w, receipt) = run_hostile(
        "adv-suid-mmap",
        &format!("# reads: {}\n", tools.0.display()),
        &format!(
            "{} helper CHORE-WAS-HERE && stat -c 'seen %a' helper",
            bin.display()
        ),
        |t| plant_setuid(&t.join("helper")),
    );
    // The write went through, and the kernel left the bit on: the attack is real.
    assert!(receipt.contains("rewrote through mmap"), "{receipt}");
    assert!(receipt.contains("seen 4755"), "{receipt}");
    let helper = w.touched.join("helper");
    assert!(
        std::fs::read(&helper)
            .unwrap()
            .starts_with(b"CHORE-WAS-HERE"),
        "{receipt}"
    );
    assert_eq!(
        std::fs::metadata(&helper).unwrap().mode() & 0o6000,
        0,
        "a setuid file with the chore's bytes left the run: {receipt}"
    );
    assert!(receipt.contains("helper gained setuid"), "{receipt}");
    assert!(w.journal().contains("files-outside-touches"), "{receipt}");
}

#[test]
fn a_chore_that_hard_links_a_setuid_file_past_the_walks_depth_leaves_no_setuid_name() {
    let (w, receipt) = run_hostile(
        "adv-suid-deep-link",
        "",
        // 300 levels: past the 256 the walk goes down.
        "p=deep; mkdir $p; i=0\n\
         while [ $i -lt 300 ]; do p=$p/d; mkdir $p; i=$((i+1)); done\n\
         ln helper $p/kept && echo linked deep",
        |t| plant_setuid(&t.join("helper")),
    );
    assert!(receipt.contains("linked deep"), "{receipt}");
    assert_eq!(
        std::fs::metadata(w.touched.join("helper")).unwrap().nlink(),
        2,
        "the deep link is there: {receipt}"
    );
    assert_eq!(
        set_id_files(&w.touched),
        "",
        "a setuid name was left where the walk did not look: {receipt}"
    );
    assert!(receipt.contains("helper gained setuid"), "{receipt}");
}
