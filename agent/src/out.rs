//! The command-line verbs' standard output. A reader that goes away early
//! (`aromba status | head -2`) ends the verb quietly with success, as
//! other command-line tools do; `println!` panicked on the broken pipe.

use std::io::Write;

/// Writes one line to standard output; a closed pipe ends the process
/// with success, another failure with one sentence on standard error.
pub fn line(args: std::fmt::Arguments<'_>) {
    let mut out = std::io::stdout().lock();
    let written = out
        .write_fmt(args)
        .and_then(|()| out.write_all(b"\n"))
        .and_then(|()| out.flush());
    match written {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => std::process::exit(0),
        Err(e) => {
            eprintln!("aromba: cannot write to standard output: {e}");
            std::process::exit(1);
        }
    }
}

/// `println!` for the verbs: see [`line`].
#[macro_export]
macro_rules! out {
    () => {
        $crate::out::line(format_args!(""))
    };
    ($($arg:tt)*) => {
        $crate::out::line(format_args!($($arg)*))
    };
}
