//! The seccomp filter judges system calls by their x86_64 numbers; the same
//! process can enter the kernel through the i386 table (`int $0x80`, where
//! `chmod` is 15, not 90) or the x32 one (number | 0x40000000), which the
//! filter's own rules would not read right. The filter checks the
//! architecture first and kills anything but x86_64, and x32 numbers. This
//! proves it from a hostile `mine/` chore run through a real Warden and real
//! bubblewrap: a program built here with the system C compiler sets a
//! setuid mode through each entry; outside the cage the i386 one does
//! (which shows the test can fail), inside both are killed and the file
//! keeps its mode. Needs root, bubblewrap and the system C compiler.

use aromba_testkit::warden as support;

use aromba_warden_proto::{Request, Response};
use std::os::unix::fs::PermissionsExt;
use std::path::PathBuf;
use support::{Warden, owner_chore};

const SOURCE: &str = r#"#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <sys/syscall.h>
/* In the data segment of a binary that is not position-independent: an
   address the i386 entry's 32-bit registers can hold. */
static char path[4096];
int main(int argc, char **argv) {
  if (argc != 3) return 2;
  strncpy(path, argv[2], sizeof path - 1);
  long ret;
  if (!strcmp(argv[1], "i386")) {
    __asm__ volatile("int $0x80" : "=a"(ret)
                     : "a"(15), "b"((unsigned int)(unsigned long)path), "c"(04755)
                     : "memory");
  } else {
    ret = syscall(90 | 0x40000000, path, 04755);
  }
  printf("%s chmod returned %ld\n", argv[1], ret);
  return 0;
}
"#;

/// Removed however the test ends.
struct Scratch(PathBuf);

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn mode(p: &std::path::Path) -> u32 {
    std::fs::metadata(p).unwrap().permissions().mode() & 0o7777
}

#[test]
fn a_chore_that_sets_a_setuid_mode_through_the_i386_or_x32_entry_is_killed() {
    let tools = Scratch(PathBuf::from(format!(
        "/var/tmp/aromba-adv-32bit-tools-{}",
        std::process::id()
    )));
    let _ = std::fs::remove_dir_all(&tools.0);
    std::fs::create_dir_all(&tools.0).unwrap();
    let src = tools.0.join("chmod32.c");
    std::fs::write(&src, SOURCE).unwrap();
    let bin = tools.0.join("chmod32");
    let out = assert_cmd::Command::new("cc")
        .args(["-no-pie", "-O1", "-o"])
        .arg(&bin)
        .arg(&src)
        .output()
        .expect("the system C compiler (cc) is needed");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );

    // Outside the cage the i386 entry sets the bit: the program works.
    let probe = tools.0.join("probe");
    std::fs::copy("/bin/true", &probe).unwrap();
    let out = assert_cmd::Command::new(&bin)
        .arg("i386")
        .arg(&probe)
        .output()
        .unwrap();
    assert_eq!(
        mode(&probe),
        0o4755,
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );

    let script = format!(
        "[ \"$1\" = --dry-run ] && exit 0\ncd TOUCHED\ncp /bin/true a && cp /bin/true b\n\
         {b} i386 a; echo \"i386 exit $?\"\n{b} x32 b; echo \"x32 exit $?\"",
        b = bin.display()
    );
    let w = Warden::start(
        "adv-32bit",
        false,
        &[owner_chore(
            "hostile",
            "yellow",
            &format!("# reads: {}\n", tools.0.display()),
            &script,
        )],
    );
    w.dry_run_shown("hostile");
    let all = match w.control(&Request::ChoreRun {
        name: "hostile".into(),
        dry_run: false,
    }) {
        Response::Receipt {
            receipt,
            stdout,
            stderr,
            ..
        } => format!(
            "{receipt}\n{}\n{}",
            String::from_utf8_lossy(&stdout),
            String::from_utf8_lossy(&stderr)
        ),
        other => panic!("the chore did not run: {other:?}"),
    };
    // Killed by the filter (SIGSYS: the shell reports 128 + 31), never
    // returning to print.
    assert!(all.contains("i386 exit 159"), "{all}");
    assert!(all.contains("x32 exit 159"), "{all}");
    assert!(!all.contains("chmod returned"), "{all}");
    assert_eq!(mode(&w.touched.join("a")), 0o755, "{all}");
    assert_eq!(mode(&w.touched.join("b")), 0o755, "{all}");
}
