//! Terminal styling: ANSI colours only when stdout is a terminal and
//! `NO_COLOR` is unset.

use std::io::IsTerminal;
use std::sync::LazyLock;

static COLOR: LazyLock<bool> =
    LazyLock::new(|| std::io::stdout().is_terminal() && std::env::var_os("NO_COLOR").is_none());

fn paint(code: &str, text: &str) -> String {
    if *COLOR {
        format!("\x1b[{code}m{text}\x1b[0m")
    } else {
        text.to_owned()
    }
}

/// Bold.
pub fn bold(text: &str) -> String {
    paint("1", text)
}

/// Dimmed.
pub fn dim(text: &str) -> String {
    paint("2", text)
}

/// Green (current facts).
pub fn green(text: &str) -> String {
    paint("32", text)
}

/// Yellow (history).
pub fn yellow(text: &str) -> String {
    paint("33", text)
}

/// Cyan (headings).
pub fn cyan(text: &str) -> String {
    paint("36", text)
}
