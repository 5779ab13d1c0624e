//! What root types at a terminal: the PIN without echo, and a yes before
//! a change.

use std::process::ExitCode;

/// The PIN, typed at a terminal without echo (the prompt and the reading
/// go through the terminal, as `sudo` and `ssh` do), or one line of
/// standard input without its line break when that is not a terminal (a
/// pipe, in scripts and tests). An empty PIN is refused here: sent, it would
/// count as a wrong one.
pub fn read_secret_line(prompt: &str) -> Result<String, ExitCode> {
    read_hidden(prompt, "PIN")
}

/// A secret (`what`: "PIN", "value") typed without echo, or a line of
/// standard input when that is not a terminal; empty is refused.
pub fn read_hidden(prompt: &str, what: &str) -> Result<String, ExitCode> {
    use std::io::{BufRead, IsTerminal};
    let read = if std::io::stdin().is_terminal() {
        rpassword::prompt_password(prompt).map(Some)
    } else {
        let mut line = String::new();
        match std::io::stdin().lock().read_line(&mut line) {
            Ok(0) => Ok(None),
            Ok(_) => Ok(Some(line.trim_end_matches(['\n', '\r']).to_string())),
            Err(e) => Err(e),
        }
    };
    match read {
        Ok(None) => {
            eprintln!("aromba: no {what} on standard input");
            Err(ExitCode::from(2))
        }
        Ok(Some(pin)) if pin.is_empty() => {
            eprintln!("aromba: the {what} is empty; nothing was sent");
            Err(ExitCode::from(2))
        }
        Ok(Some(pin)) => Ok(pin),
        Err(e) => {
            eprintln!("aromba: cannot read the {what}: {e}");
            Err(ExitCode::from(2))
        }
    }
}

/// Whether the person typed `yes` to `question`; `yes` given on the
/// command line answers it. Without a terminal and without it, `verb` is
/// refused: a script says `--yes` or nothing happens.
pub fn confirmed(question: &str, yes: bool, verb: &str) -> Result<(), String> {
    use std::io::{BufRead, IsTerminal, Write};
    if yes {
        return Ok(());
    }
    if !std::io::stdin().is_terminal() {
        return Err(format!(
            "{verb} asks first; add --yes to do it without a question"
        ));
    }
    print!("{question} Type yes to go on: ");
    let _ = std::io::stdout().flush();
    let mut line = String::new();
    if std::io::stdin().lock().read_line(&mut line).is_err() || line.trim() != "yes" {
        return Err("nothing was changed".into());
    }
    Ok(())
}
