//! A violation drawn, as Porcupine draws a linearizability failure: its
//! window of the history, one lane per seat (the violation's first), each
//! operation a bar from its sending to its answer, coloured by outcome,
//! the lease's signed life beneath, the server's events as ticks, faults
//! as bands across all lanes and the violation's instant as a red line.
//!
//! [`text`] is for a terminal, [`html`] a self-contained page, [`write`]
//! puts both beside a failing test's output.

mod html;
mod picture;
mod text;

use std::path::{Path, PathBuf};

use crate::check::Violation;
use crate::history::History;

use picture::Picture;

/// The violation's window as text: a header, then a block per lane.
pub fn text(history: &History, violation: &Violation) -> String {
    text::render(&Picture::new(history, violation))
}

/// The violation's window as one HTML page with no external assets.
pub fn html(history: &History, violation: &Violation) -> String {
    let picture = Picture::new(history, violation);
    html::render(&picture, &text::render(&picture))
}

/// Write `<dir>/<name>.txt` and `<dir>/<name>.html` (making `dir`).
pub fn write(
    history: &History,
    violation: &Violation,
    dir: &Path,
    name: &str,
) -> std::io::Result<(PathBuf, PathBuf)> {
    std::fs::create_dir_all(dir)?;
    let picture = Picture::new(history, violation);
    let text = text::render(&picture);
    let txt = dir.join(format!("{name}.txt"));
    let page = dir.join(format!("{name}.html"));
    std::fs::write(&txt, &text)?;
    std::fs::write(&page, html::render(&picture, &text))?;
    Ok((txt, page))
}
