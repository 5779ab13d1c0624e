//! Where runs of a token alphabet end, remembered over one pass.
//!
//! A token rule reads its body as a run of bytes of one alphabet, up to its
//! longest body. Every candidate inside one long run would read the same
//! bytes again: a mebibyte of `-eyJ` has a quarter of a million candidates
//! and a JWT header may be 8 KiB. [`Runs`] keeps, per alphabet, two stretches
//! known to be of that alphabet (and whether the byte after each is not), so
//! a pass reads each run about once, whether its candidates come in order
//! (the scan) or backwards (judging refused candidates again).
//!
//! Positions are offsets into one input; the slices a pass hands in are
//! all prefixes of it (cut at a key block or at a removal).

/// The alphabets of token bodies.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Alphabet {
    /// `[A-Za-z0-9_-]`
    Token,
    /// `[A-Za-z0-9]`
    Alnum,
    /// `[A-Za-z0-9_]`
    AlnumUnderscore,
    /// `[A-Z0-9]`
    UpperOrDigit,
    /// `[A-Za-z0-9.-]`
    AlnumDashDot,
    /// `[A-Za-z0-9-]`
    AlnumDash,
    /// `[A-Za-z0-9_/-]`
    TokenSlash,
    /// `[A-Za-z0-9_.-]`
    TokenDot,
}

const ALPHABETS: usize = 8;

impl Alphabet {
    pub(crate) const ALL: [Alphabet; ALPHABETS] = [
        Alphabet::Token,
        Alphabet::Alnum,
        Alphabet::AlnumUnderscore,
        Alphabet::UpperOrDigit,
        Alphabet::AlnumDashDot,
        Alphabet::AlnumDash,
        Alphabet::TokenSlash,
        Alphabet::TokenDot,
    ];

    pub(crate) fn contains(self, b: u8) -> bool {
        let alnum = b.is_ascii_alphanumeric();
        match self {
            Alphabet::Token => alnum || b == b'_' || b == b'-',
            Alphabet::Alnum => alnum,
            Alphabet::AlnumUnderscore => alnum || b == b'_',
            Alphabet::UpperOrDigit => b.is_ascii_uppercase() || b.is_ascii_digit(),
            Alphabet::AlnumDashDot => alnum || b == b'-' || b == b'.',
            Alphabet::AlnumDash => alnum || b == b'-',
            Alphabet::TokenSlash => alnum || b == b'_' || b == b'-' || b == b'/',
            Alphabet::TokenDot => alnum || b == b'_' || b == b'-' || b == b'.',
        }
    }
}

/// `input[from..to]` is all of one alphabet; `ended`: `input[to]` is not.
#[derive(Clone, Copy, Debug, Default)]
struct Known {
    from: usize,
    to: usize,
    ended: bool,
}

/// Stretches remembered per alphabet: a JWT candidate reads two runs of one
/// alphabet (its header and its payload), and with one slot a line of JWT
/// headers before one long payload read both again for every candidate.
const SLOTS: usize = 2;

/// The remembered runs of one pass over one input.
#[derive(Debug, Default)]
pub(crate) struct Runs {
    known: [[Known; SLOTS]; ALPHABETS],
    /// The slot of each alphabet used last; a new stretch replaces the other.
    recent: [usize; ALPHABETS],
}

impl Known {
    fn holds(&self, start: usize) -> bool {
        self.from <= start && start <= self.to && self.to > self.from
    }

    /// The run from a start this stretch holds, as `Runs::end` returns it,
    /// reading only past what is known.
    fn end_from(&mut self, hay: &[u8], bound: usize, alphabet: Alphabet) -> usize {
        if self.to >= hay.len() {
            // Known from a longer prefix: the run reaches this one's end.
            return bound;
        }
        if self.ended || self.to >= bound {
            return self.to.min(bound);
        }
        let stop = scan(hay, self.to, bound, alphabet);
        self.to = stop;
        self.ended = stop < bound;
        stop
    }
}

fn scan(hay: &[u8], from: usize, upto: usize, alphabet: Alphabet) -> usize {
    let mut i = from;
    while i < upto && alphabet.contains(hay[i]) {
        i += 1;
    }
    i
}

impl Runs {
    /// The end of the run of `alphabet` that starts at `start` in `hay`,
    /// or `bound` if the run reaches it (`start <= bound <= hay.len()`):
    /// what `run_end(&hay[..bound], start, …)` returns.
    pub(crate) fn end(
        &mut self,
        hay: &[u8],
        start: usize,
        bound: usize,
        alphabet: Alphabet,
    ) -> usize {
        let bound = bound.min(hay.len()).max(start);
        let slots = &mut self.known[alphabet as usize];
        let recent = &mut self.recent[alphabet as usize];
        // A stretch known to hold `start`.
        if let Some(slot) = (0..SLOTS).find(|&s| slots[s].holds(start)) {
            *recent = slot;
            return slots[slot].end_from(hay, bound, alphabet);
        }
        // Or the nearest one after it, which the bytes from `start` may join.
        let joinable = (0..SLOTS)
            .filter(|&s| {
                let k = slots[s];
                start < k.from && k.to > k.from && k.from <= hay.len()
            })
            .min_by_key(|&s| slots[s].from);
        let stop = scan(
            hay,
            start,
            joinable.map_or(bound, |s| slots[s].from),
            alphabet,
        );
        if let Some(slot) = joinable
            && stop == slots[slot].from
        {
            slots[slot].from = start;
            *recent = slot;
            return slots[slot].end_from(hay, bound, alphabet);
        }
        let slot = (*recent + 1) % SLOTS;
        slots[slot] = Known {
            from: start,
            to: stop,
            ended: stop < hay.len() && !alphabet.contains(hay[stop]),
        };
        *recent = slot;
        stop.min(bound)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plain(hay: &[u8], start: usize, bound: usize, alphabet: Alphabet) -> usize {
        let mut i = start;
        while i < bound.min(hay.len()) && alphabet.contains(hay[i]) {
            i += 1;
        }
        i
    }

    /// Queries in every order, on every prefix, give what a plain walk gives.
    #[test]
    fn remembered_runs_end_where_a_plain_walk_ends() {
        let hay = b"ab-cd.ef_gh/ij kl-mn--op.QR9\nst-uv";
        let mut state = 7u64;
        let mut next = |n: usize| {
            state = state
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (state >> 33) as usize % n
        };
        for alphabet in Alphabet::ALL {
            let mut runs = Runs::default();
            for _ in 0..5000 {
                let len = next(hay.len() + 1);
                let prefix = &hay[..len];
                let start = next(len + 1);
                let bound = start + next(len - start + 1);
                assert_eq!(
                    runs.end(prefix, start, bound, alphabet),
                    plain(prefix, start, bound, alphabet),
                    "{alphabet:?} on {len} bytes from {start} to {bound}"
                );
            }
        }
    }

    /// A deterministic generator (xorshift), so that a failure replays.
    struct Rng(u64);

    impl Rng {
        fn below(&mut self, n: usize) -> usize {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            (self.0 % n as u64) as usize
        }
    }

    /// `Runs::end` asked directly, on any bytes, against a plain walk: queries
    /// in any order (forwards as the scan asks, backwards as the judging again
    /// asks, and at random), on prefixes of the input of every length, longer
    /// and shorter than the last one, starting on empty runs and at the end.
    #[test]
    fn remembered_runs_end_where_a_plain_walk_ends_on_any_bytes_in_any_order() {
        let bytes = b"aZ09-_./ \n[:=";
        let mut rng = Rng(0x5eed_0003);
        for case in 0..3000 {
            let len = rng.below(if case % 2 == 0 { 24 } else { 120 });
            // Mostly one byte, so that runs are long and queries land in them.
            let common = bytes[rng.below(bytes.len())];
            let hay: Vec<u8> = (0..len)
                .map(|_| {
                    if rng.below(4) == 0 {
                        bytes[rng.below(bytes.len())]
                    } else {
                        common
                    }
                })
                .collect();
            for alphabet in Alphabet::ALL {
                let mut runs = Runs::default();
                let mut prefix = len;
                let mut start = 0;
                let order = rng.below(3);
                for _ in 0..80 {
                    if rng.below(3) == 0 {
                        prefix = rng.below(len + 1);
                    }
                    start = match order {
                        // Forwards, as the scan asks.
                        0 => (start + rng.below(4)).min(prefix),
                        // Backwards, each on the input cut after it, as the
                        // judging again asks.
                        1 => {
                            let s = start.min(prefix).saturating_sub(rng.below(4));
                            prefix = (s + rng.below(40)).min(len);
                            s
                        }
                        _ => rng.below(prefix + 1),
                    };
                    let bound = start + rng.below(prefix + 8 - start);
                    let got = runs.end(&hay[..prefix], start, bound, alphabet);
                    let want = plain(&hay[..prefix], start, bound, alphabet);
                    assert_eq!(
                        got,
                        want,
                        "{alphabet:?} on {:?}[..{prefix}] from {start} to {bound}",
                        String::from_utf8_lossy(&hay)
                    );
                }
            }
        }
    }
}
