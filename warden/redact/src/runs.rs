//! Where runs of a token alphabet end, remembered over one pass.
//!
//! A token rule reads its body as a run of bytes of one alphabet, up to its
//! longest body. Every candidate inside one long run would read the same
//! bytes again: a mebibyte of `-eyJ` has a quarter of a million candidates
//! and a JWT header may be 8 KiB. [`Runs`] keeps, per alphabet, one stretch
//! known to be of that alphabet (and whether the byte after it is not), so
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

/// The remembered runs of one pass over one input.
#[derive(Debug, Default)]
pub(crate) struct Runs {
    known: [Known; ALPHABETS],
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
        let known = &mut self.known[alphabet as usize];
        let scan = |from: usize, upto: usize| {
            let mut i = from;
            while i < upto && alphabet.contains(hay[i]) {
                i += 1;
            }
            i
        };
        // A stretch of the alphabet known to hold `start`, or one that the
        // bytes from `start` up to it join.
        let holds = known.from <= start && start <= known.to && known.to > known.from;
        if !holds {
            let joins = start < known.from && known.to > known.from && known.from <= hay.len();
            let stop = scan(start, if joins { known.from } else { bound });
            if !(joins && stop == known.from) {
                *known = Known {
                    from: start,
                    to: stop,
                    ended: stop < hay.len() && !alphabet.contains(hay[stop]),
                };
                return stop.min(bound);
            }
            known.from = start;
        }
        if known.to >= hay.len() {
            // Known from a longer prefix: the run reaches this one's end.
            return bound;
        }
        if known.ended || known.to >= bound {
            return known.to.min(bound);
        }
        let stop = scan(known.to, bound);
        known.to = stop;
        known.ended = stop < bound;
        stop
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
        let alphabets = [
            Alphabet::Token,
            Alphabet::Alnum,
            Alphabet::AlnumUnderscore,
            Alphabet::UpperOrDigit,
            Alphabet::AlnumDashDot,
            Alphabet::AlnumDash,
            Alphabet::TokenSlash,
            Alphabet::TokenDot,
        ];
        let mut state = 7u64;
        let mut next = |n: usize| {
            state = state
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (state >> 33) as usize % n
        };
        for alphabet in alphabets {
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
}
