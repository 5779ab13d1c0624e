//! Redaction of a stream in bounded memory, for the command-line filter.
//!
//! The input is redacted in windows of about a mebibyte. A window is written
//! out only up to a cut point `p`, a line start at least a margin before the
//! window's end, and the rest is kept for the next window. `p` is moved back
//! before every removal that reaches past it and every judgement that read a
//! byte before it (a name before its value, a BEGIN line before its body, a
//! YAML name before the lines of its value: the hit's anchor), and before
//! every certificate that spans it. So no secret is ever split between two
//! windows, and each window is judged with everything its rules look at.
//!
//! A construct longer than the largest window (8 MiB of one key's lines, or
//! a line with no break) is cut all the same: a removal that spans the cut
//! is marked once and its remaining bytes dropped from the next window; a
//! key's lines that go on past the cut are removed from the next window even
//! when only one of them is left; and a cut inside a line (after a blank)
//! keeps the 256 bytes before it as read-only context of the next window,
//! more than any rule looks back.

use crate::runs::Alphabet;
use crate::scan::{self, Hit, Triggers};
use crate::{Class, Counts};

/// Sizes of the windows (tests use small ones to cut at every offset).
#[derive(Clone, Copy, Debug)]
pub struct Limits {
    /// A window is redacted once this many bytes are buffered.
    pub window: usize,
    /// Bytes after the cut that every judgement before it may look at.
    pub margin: usize,
    /// The most that is buffered while a construct keeps the cut from
    /// moving forward.
    pub max_window: usize,
}

impl Default for Limits {
    fn default() -> Limits {
        Limits {
            window: 1 << 20,
            margin: 64 << 10,
            max_window: 8 << 20,
        }
    }
}

/// A stream being redacted: feed it with [`Stream::push`], end it with
/// [`Stream::finish`].
///
/// ```
/// let redactor = aromba_redact::Redactor::new();
/// let mut stream = aromba_redact::Stream::new(&redactor);
/// let mut out = Vec::new();
/// stream.push(b"DB_PASSWORD=hunter2hunt", &mut out);
/// stream.push(b"er2\nok\n", &mut out);
/// let counts = stream.finish(false, &mut out);
/// assert_eq!(out, b"DB_PASSWORD=[redacted:secret-assignment]\nok\n");
/// assert_eq!(counts.total(), 1);
/// ```
pub struct Stream<'r> {
    triggers: &'r Triggers,
    limits: Limits,
    buf: Vec<u8>,
    counts: Counts,
    /// The next window starts inside a key's lines.
    continues: bool,
    /// Bytes at the start of the buffer already written: context only.
    context: usize,
    /// The buffer's length at which to redact again after a window whose
    /// cut could not move: a line with no break would otherwise be
    /// redacted whole again at every push until the largest window, a
    /// square of its length.
    retry_at: usize,
}

impl<'r> Stream<'r> {
    pub fn new(redactor: &'r crate::Redactor) -> Stream<'r> {
        Stream::with_limits(redactor, Limits::default())
    }

    pub fn with_limits(redactor: &'r crate::Redactor, limits: Limits) -> Stream<'r> {
        let margin = limits.margin.max(1);
        let window = limits.window.max(margin + 1);
        Stream {
            triggers: redactor.triggers(),
            limits: Limits {
                window,
                margin,
                max_window: limits.max_window.max(window + margin),
            },
            buf: Vec::new(),
            counts: Counts::default(),
            continues: false,
            context: 0,
            retry_at: 0,
        }
    }

    /// Takes `data` and appends to `out` whatever can already be written.
    pub fn push(&mut self, data: &[u8], out: &mut Vec<u8>) {
        self.buf.extend_from_slice(data);
        while self.buf.len() >= (self.limits.window + self.limits.margin).max(self.retry_at) {
            if !self.window(out) {
                self.retry_at = (self.buf.len() + self.limits.window).min(self.limits.max_window);
                break;
            }
            self.retry_at = 0;
        }
    }

    /// Ends the stream: writes the rest to `out` and returns what was
    /// removed in all. `cut`: the input was cut at a byte cap, so its
    /// unfinished last line is replaced by one marker (as
    /// [`crate::Redactor::redact_cut`] does).
    pub fn finish(mut self, cut: bool, out: &mut Vec<u8>) -> Counts {
        let whole_lines = if cut {
            memchr::memrchr(b'\n', &self.buf[self.context..])
                .map_or(self.context, |i| self.context + i + 1)
        } else {
            self.buf.len()
        };
        let found = scan::find(self.triggers, &self.buf[..whole_lines], self.continues, cut);
        scan::write(
            &self.buf,
            &found.hits,
            self.context,
            whole_lines,
            out,
            &mut self.counts,
        );
        if whole_lines < self.buf.len() {
            scan::push_marker(out, Class::CutLine);
            self.counts.add(Class::CutLine);
        }
        self.counts
    }

    /// Redacts one window and writes it up to its cut. Returns false when
    /// the cut cannot move forward yet (more input is needed first).
    fn window(&mut self, out: &mut Vec<u8>) -> bool {
        let len = self.buf.len();
        let from = self.context;
        let limit = len - self.limits.margin;
        if limit <= from {
            return false;
        }
        let found = scan::find(self.triggers, &self.buf, self.continues, false);
        let line_cut =
            memchr::memrchr(b'\n', &self.buf[from..limit]).map_or(from, |i| from + i + 1);
        // Settle the cut, always at a line start: the next window must see
        // whole lines (a key's lines are judged with their prefix).
        let mut cut = line_cut.min(open_tail(&self.buf, from));
        loop {
            let settled = settle(cut, from, &found.hits, &found.public);
            let line_start =
                memchr::memrchr(b'\n', &self.buf[from..settled]).map_or(from, |i| from + i + 1);
            if line_start == cut {
                break;
            }
            cut = line_start;
        }
        if cut > from {
            self.emit(&found.hits, cut, out);
            self.continues = false;
            self.buf.drain(..cut);
            self.context = 0;
            return true;
        }
        if len < self.limits.max_window {
            return false;
        }
        // One construct fills the largest window: cut it all the same, at
        // a line if there is one, else after a blank. A removal the cut goes
        // through is marked whole now and the rest of it dropped; a key's
        // lines that go on past it are removed in the next window even when
        // only one of them is left; and the bytes before an in-line cut stay
        // as read-only context, so the next window's rules see what they
        // look back at.
        let in_line = line_cut == from;
        let cut = if in_line {
            in_line_cut(&self.buf[from..limit], &found.hits, from)
        } else {
            line_cut
        };
        self.emit(&found.hits, cut, out);
        let mut skip_to = cut;
        self.continues = false;
        if let Some(hit) = found
            .hits
            .iter()
            .find(|h| h.found.start < cut && h.found.end > cut && h.found.end > from)
        {
            let start = hit.found.start.max(from);
            out.truncate(out.len() - (cut - start));
            scan::push_marker(out, hit.found.class);
            self.counts.add(hit.found.class);
            skip_to = hit.found.end;
            self.continues = hit.found.class == Class::PrivateKey;
        }
        let keep = if in_line { CONTEXT.min(skip_to) } else { 0 };
        self.buf.drain(..skip_to - keep);
        self.context = keep;
        true
    }

    fn emit(&mut self, hits: &[Hit], cut: usize, out: &mut Vec<u8>) {
        scan::write(&self.buf, hits, self.context, cut, out, &mut self.counts);
    }
}

/// Where to cut a line longer than the largest window, in `region` (which
/// starts at `from`): after its last blank, else after its last byte that
/// ends every run a token rule reads (a key refused here because its run
/// goes on must see where it ends), else at the region's end; and then
/// before a removal that the cut would go through, unless it started
/// before `from` (the next window judges it whole, with the bytes before
/// it as context).
fn in_line_cut(region: &[u8], hits: &[Hit], from: usize) -> usize {
    let mut cut = memchr::memrchr2(b' ', b'\t', region)
        .or_else(|| region.iter().rposition(|&b| ends_every_run(b)))
        .map_or(from + region.len(), |i| from + i + 1)
        .max(from + 1);
    if let Some(hit) = hits
        .iter()
        .find(|h| h.found.start < cut && h.found.end > cut && h.found.start > from)
    {
        cut = hit.found.start;
    }
    cut
}

/// A byte outside every token alphabet.
fn ends_every_run(b: u8) -> bool {
    !Alphabet::ALL.iter().any(|alphabet| alphabet.contains(b))
}

/// The start of the line before the run of blank and comment lines that
/// ends the buffer (its unfinished last line counted in the run, whatever it
/// holds), never before `floor`. A YAML key there reads past that run
/// for its value (`password:`, blank lines, then the value, up to 256 lines
/// of any length), so the key and every line of the run are judged again
/// with the next window, which sees where the run ends.
fn open_tail(buf: &[u8], floor: usize) -> usize {
    // The unfinished last line: what it will hold is not known yet.
    let Some(mut end) = memchr::memrchr(b'\n', &buf[floor..]).map(|i| floor + i) else {
        return floor;
    };
    loop {
        let start = memchr::memrchr(b'\n', &buf[floor..end]).map_or(floor, |i| floor + i + 1);
        let line = &buf[start..end];
        let text = line
            .iter()
            .position(|&b| !matches!(b, b' ' | b'\t' | b'\r'))
            .map(|i| &line[i..]);
        match text {
            Some(text) if text[0] != b'#' => return start,
            _ if start == floor => return floor,
            _ => end = start - 1,
        }
    }
}

/// Bytes before an in-line cut kept for the next window to look back at:
/// more than any rule reads before its trigger (a name, a scheme, a bot id).
const CONTEXT: usize = 256;

/// Moves `cut` back before every hit that reaches past it and was judged on
/// bytes before it, and before every public block that spans it; never
/// before `floor` (bytes already written).
fn settle(mut cut: usize, floor: usize, hits: &[Hit], public: &[(usize, usize)]) -> usize {
    loop {
        let before = cut;
        for h in hits {
            if h.found.end > cut && h.anchor < cut {
                cut = h.anchor.max(floor);
            }
        }
        for &(start, end) in public {
            if start < cut && end > cut {
                cut = start.max(floor);
            }
        }
        if cut == before {
            return cut;
        }
    }
}
