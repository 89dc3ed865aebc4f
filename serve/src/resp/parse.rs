//! The Redis protocol's requests: arrays of bulk strings (`*2\r\n$4\r\nPING\r\n$2\r\nhi\r\n`) and
//! inline commands (`PING hi\r\n`), parsed incrementally from a connection's read buffer.
//!
//! # What a peer cannot make this allocate
//!
//! Nothing is reserved on a peer's word: an array's claimed length only bounds how many
//! arguments are expected, and a bulk string's claimed length only says how many bytes to wait
//! for; the buffer grows by what actually arrives. Claims beyond the bounds ([`MAX_ARGS`]
//! arguments, [`MAX_BULK`] bytes in one, [`MAX_COMMAND`] in all, [`MAX_INLINE`] for an inline
//! line) are answered with an error at once. So a connection holds at most one command's bytes
//! (plus what one read brings), whatever it claims.
//!
//! # Errors keep the connection
//!
//! A malformed header is answered with an error and its line is dropped; parsing goes on at the
//! next line. When the error is inside an array, the bytes the peer still sends for that array
//! are read as new commands (each answered, usually with an error of its own). Redis closes the
//! connection instead; this server keeps it, so one bad frame does not cost a pipelining client
//! its other replies.
//!
//! Each byte is scanned once: a line end is looked for only in bytes not yet searched, and a
//! bulk string is waited for by its length, so a peer dribbling one byte at a time costs
//! nothing more than one sending everything at once.

use std::ops::Range;

/// The most arguments one command may have (the command name included).
pub(crate) const MAX_ARGS: usize = 1024;
/// The longest one argument may be.
pub(crate) const MAX_BULK: usize = 512 * 1024;
/// The most bytes all the arguments of one command may take together.
pub(crate) const MAX_COMMAND: usize = 1024 * 1024;
/// The longest inline command line.
pub(crate) const MAX_INLINE: usize = 64 * 1024;
/// The longest header line (`*N` or `$N`); anything longer is not a number we accept.
const MAX_HEADER: usize = 24;

/// What the parser found next.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Step {
    /// A whole command: its arguments are [`Parser::args`], ranges of the buffer.
    Command,
    /// A protocol error, to be answered; parsing goes on after it.
    Error(&'static str),
    /// More bytes are needed.
    NeedMore,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    /// Between commands.
    Idle,
    /// In an array of `total` arguments; `bytes` of argument payload so far.
    Array { total: usize, bytes: usize },
    /// In an array, waiting for a bulk string of `len` bytes (and its CRLF) at `pos`.
    Bulk { total: usize, bytes: usize, len: usize },
    /// Dropping a line that is too long, up to its end.
    DropLine,
}

/// An incremental parser over one connection's buffer.
#[derive(Debug)]
pub(crate) struct Parser {
    state: State,
    /// The next byte to parse.
    pos: usize,
    /// Where the command being parsed began (bytes before it may be dropped).
    start: usize,
    /// Bytes before this offset have been searched for a line end without finding one.
    scanned: usize,
    /// The arguments of the last command, as ranges of the buffer.
    args: Vec<Range<usize>>,
}

impl Default for Parser {
    fn default() -> Self {
        Parser { state: State::Idle, pos: 0, start: 0, scanned: 0, args: Vec::new() }
    }
}

impl Parser {
    /// The arguments of the command [`Step::Command`] announced.
    pub(crate) fn args(&self) -> &[Range<usize>] {
        &self.args
    }

    /// How many leading bytes of the buffer are no longer needed; after dropping them, call
    /// [`Parser::dropped`] with the same count.
    pub(crate) fn consumed(&self) -> usize {
        match self.state {
            State::Idle | State::DropLine => self.pos,
            State::Array { .. } | State::Bulk { .. } => self.start,
        }
    }

    /// Shifts the parser's offsets after `n` leading bytes were dropped from the buffer.
    pub(crate) fn dropped(&mut self, n: usize) {
        self.pos -= n;
        self.start = self.start.saturating_sub(n);
        self.scanned = self.scanned.saturating_sub(n);
        for range in &mut self.args {
            *range = range.start.saturating_sub(n)..range.end.saturating_sub(n);
        }
    }

    /// Parses from the buffer `buf` (the same buffer each time, grown by what arrived and with
    /// consumed bytes dropped).
    pub(crate) fn next(&mut self, buf: &[u8]) -> Step {
        loop {
            match self.state {
                State::Idle => {
                    let Some(&first) = buf.get(self.pos) else { return Step::NeedMore };
                    self.args.clear();
                    self.start = self.pos;
                    if first == b'*' {
                        let claimed = match self.header(buf) {
                            Ok(claimed) => claimed,
                            Err(step) => return step,
                        };
                        match claimed {
                            None => return Step::Error("Protocol error: invalid multibulk length"),
                            // Empty and null arrays are no command: Redis skips them too.
                            Some(n) if n <= 0 => continue,
                            Some(n) if n as u64 > MAX_ARGS as u64 => {
                                return Step::Error(
                                    "Protocol error: too many arguments in one command",
                                )
                            }
                            Some(n) => self.state = State::Array { total: n as usize, bytes: 0 },
                        }
                    } else {
                        let (line, next) = match self.line(buf, MAX_INLINE) {
                            Ok(Some(line)) => line,
                            Ok(None) => return Step::NeedMore,
                            Err(e) => return e,
                        };
                        self.pos = next;
                        let text = &buf[line.clone()];
                        let mut at = line.start;
                        for word in text.split(|b| matches!(b, b' ' | b'\t')) {
                            if !word.is_empty() {
                                if self.args.len() == MAX_ARGS {
                                    return Step::Error(
                                        "Protocol error: too many arguments in one command",
                                    );
                                }
                                self.args.push(at..at + word.len());
                            }
                            at += word.len() + 1;
                        }
                        if !self.args.is_empty() {
                            return Step::Command;
                        }
                    }
                }
                State::Array { total, bytes } => {
                    if self.args.len() == total {
                        self.state = State::Idle;
                        return Step::Command;
                    }
                    let Some(&first) = buf.get(self.pos) else { return Step::NeedMore };
                    if first != b'$' {
                        // Not part of this array after all: read it as a new command.
                        self.state = State::Idle;
                        return Step::Error("Protocol error: expected '$' for a bulk string");
                    }
                    let claimed = match self.header(buf) {
                        Ok(claimed) => claimed,
                        // The array is abandoned; the rest of the line is dropped.
                        Err(step) => return step,
                    };
                    let len = match claimed {
                        Some(n) if n >= 0 && (n as u64) <= MAX_BULK as u64 => n as usize,
                        Some(n) if n >= 0 => {
                            self.state = State::Idle;
                            return Step::Error("Protocol error: argument too long");
                        }
                        _ => {
                            self.state = State::Idle;
                            return Step::Error("Protocol error: invalid bulk length");
                        }
                    };
                    if bytes + len > MAX_COMMAND {
                        self.state = State::Idle;
                        return Step::Error("Protocol error: command too long");
                    }
                    self.state = State::Bulk { total, bytes, len };
                }
                State::Bulk { total, bytes, len } => {
                    // Waits for the bytes the peer sends, never reserving what it claimed.
                    if buf.len() < self.pos + len + 2 {
                        return Step::NeedMore;
                    }
                    if &buf[self.pos + len..self.pos + len + 2] != b"\r\n" {
                        // The peer's length was wrong: drop what is left of its line.
                        self.state = State::DropLine;
                        self.pos += len;
                        return Step::Error("Protocol error: expected CRLF after a bulk string");
                    }
                    self.args.push(self.pos..self.pos + len);
                    self.pos += len + 2;
                    self.state = State::Array { total, bytes: bytes + len };
                }
                State::DropLine => {
                    let from = self.pos.max(self.scanned);
                    match memchr::memchr(b'\n', &buf[from..]) {
                        Some(i) => {
                            self.pos = from + i + 1;
                            self.scanned = self.pos;
                            self.state = State::Idle;
                        }
                        None => {
                            // Nothing of this line is kept.
                            self.pos = buf.len();
                            self.scanned = buf.len();
                            return Step::NeedMore;
                        }
                    }
                }
            }
        }
    }

    /// The count of the `*` or `$` header line at `pos` (`None`: not a count), moving past the
    /// line; `Err` with the step to return while the line is incomplete or too long.
    fn header(&mut self, buf: &[u8]) -> Result<Option<i64>, Step> {
        let (line, next) = match self.line(buf, MAX_HEADER) {
            Ok(Some(line)) => line,
            Ok(None) => return Err(Step::NeedMore),
            Err(e) => return Err(e),
        };
        self.pos = next;
        Ok(parse_count(&buf[line.start + 1..line.end]))
    }

    /// The line starting at `pos` (without its CRLF) and where the next one starts, if it has
    /// arrived. A line longer than
    /// `max` is an error, and the rest of it is dropped.
    fn line(&mut self, buf: &[u8], max: usize) -> Result<Option<(Range<usize>, usize)>, Step> {
        let from = self.pos.max(self.scanned);
        let limit = (self.pos + max + 2).min(buf.len());
        match memchr::memchr(b'\n', &buf[from.min(limit)..limit]) {
            Some(i) => {
                let nl = from + i;
                self.scanned = nl + 1;
                if nl == self.pos || buf[nl - 1] != b'\r' {
                    // A bare LF ends the line too (as Redis accepts for inline commands).
                    return Ok(Some((self.pos..nl, nl + 1)));
                }
                Ok(Some((self.pos..nl - 1, nl + 1)))
            }
            None if buf.len() >= self.pos + max + 2 => {
                self.state = State::DropLine;
                self.scanned = limit;
                Err(Step::Error("Protocol error: line too long"))
            }
            None => {
                self.scanned = limit;
                Ok(None)
            }
        }
    }
}

/// A header's number: optional `-`, then decimal digits (what Redis accepts), at most 18 of
/// them so it fits.
fn parse_count(text: &[u8]) -> Option<i64> {
    let (negative, digits) = match text {
        [b'-', rest @ ..] => (true, rest),
        _ => (false, text),
    };
    if digits.is_empty() || digits.len() > 18 || !digits.iter().all(u8::is_ascii_digit) {
        return None;
    }
    let value = digits.iter().fold(0i64, |v, d| v * 10 + i64::from(d - b'0'));
    Some(if negative { -value } else { value })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every step over `input`, fed in chunks of `chunk` bytes, and each command's arguments.
    fn run(input: &[u8], chunk: usize) -> Vec<Result<Vec<String>, &'static str>> {
        let mut parser = Parser::default();
        let mut buf = Vec::new();
        let mut out = Vec::new();
        for piece in input.chunks(chunk.max(1)) {
            buf.extend_from_slice(piece);
            loop {
                match parser.next(&buf) {
                    Step::Command => out.push(Ok(parser
                        .args()
                        .iter()
                        .map(|r| String::from_utf8_lossy(&buf[r.clone()]).into_owned())
                        .collect())),
                    Step::Error(e) => out.push(Err(e)),
                    Step::NeedMore => break,
                }
            }
            let n = parser.consumed();
            buf.drain(..n);
            parser.dropped(n);
        }
        out
    }

    fn cmd(words: &[&str]) -> Result<Vec<String>, &'static str> {
        Ok(words.iter().map(|w| w.to_string()).collect())
    }

    #[test]
    fn arrays_and_inline_commands_whatever_the_chunks() {
        let input = b"*2\r\n$4\r\nPING\r\n$2\r\nhi\r\nPING\r\n*1\r\n$0\r\n\r\nECHO  a\tb\n";
        for chunk in [1, 2, 3, 7, 1000] {
            let got = run(input, chunk);
            let want =
                vec![cmd(&["PING", "hi"]), cmd(&["PING"]), cmd(&[""]), cmd(&["ECHO", "a", "b"])];
            assert_eq!(got, want, "chunk {chunk}");
        }
    }

    #[test]
    fn huge_claims_are_errors_and_parsing_goes_on() {
        let got = run(b"*99999999999\r\nPING\r\n*1\r\n$99999999999\r\nPING\r\n", 5);
        assert_eq!(
            got,
            vec![
                Err("Protocol error: too many arguments in one command"),
                cmd(&["PING"]),
                Err("Protocol error: argument too long"),
                cmd(&["PING"]),
            ]
        );
        let got = run(b"*1\r\n$-5\r\n*x\r\n*999999999999999999999999999999\r\nPING\r\n", 3);
        assert_eq!(got[0], Err("Protocol error: invalid bulk length"));
        assert_eq!(got[1], Err("Protocol error: invalid multibulk length"));
        assert_eq!(got[2], Err("Protocol error: line too long"));
        assert_eq!(got[3], cmd(&["PING"]));
    }

    #[test]
    fn a_claimed_length_is_waited_for_not_reserved() {
        let mut parser = Parser::default();
        let buf = b"*1\r\n$524288\r\nab".to_vec();
        assert_eq!(parser.next(&buf), Step::NeedMore);
        assert!(parser.args.capacity() < 16);
        assert_eq!(parser.consumed(), 0); // the command's bytes are kept until it is whole
    }

    #[test]
    fn a_bad_element_inside_an_array_restarts_at_that_line() {
        let got = run(b"*2\r\n$4\r\nPING\r\nPING\r\n", 4);
        assert_eq!(
            got,
            vec![Err("Protocol error: expected '$' for a bulk string"), cmd(&["PING"])]
        );
        let got = run(b"*1\r\n$2\r\nabcd\r\nPING\r\n", 100);
        assert_eq!(
            got,
            vec![Err("Protocol error: expected CRLF after a bulk string"), cmd(&["PING"])]
        );
    }

    #[test]
    fn long_inline_lines_are_dropped_whole() {
        let mut input = vec![b'x'; MAX_INLINE + 100];
        input.extend_from_slice(b"\r\nPING\r\n");
        let got = run(&input, 4096);
        assert_eq!(got, vec![Err("Protocol error: line too long"), cmd(&["PING"])]);
    }

    #[test]
    fn too_many_words_inline_is_an_error() {
        let mut input = "a ".repeat(MAX_ARGS + 1).into_bytes();
        input.extend_from_slice(b"\r\n");
        assert_eq!(
            run(&input, 100000),
            vec![Err("Protocol error: too many arguments in one command")]
        );
    }

    proptest::proptest! {
        /// Any bytes at all, in any chunks: the parser never panics, always gets through them
        /// (every call makes progress or asks for more), and never holds more than one command.
        #[test]
        fn any_bytes_in_any_chunks_are_got_through(
            bytes in proptest::collection::vec(proptest::prop_oneof![
                proptest::sample::select(b"*$\r\n-0123456789 PINGabc".to_vec()),
                proptest::num::u8::ANY,
            ], 0..2000),
            chunk in 1usize..300,
        ) {
            let mut parser = Parser::default();
            let mut buf = Vec::new();
            for piece in bytes.chunks(chunk) {
                buf.extend_from_slice(piece);
                // Each command or error consumes at least a byte, or hands its line to the next
                // step, which does: the parser asks for more within two steps a byte.
                let mut asked = false;
                for _ in 0..2 * buf.len() + 2 {
                    if parser.next(&buf) == Step::NeedMore {
                        asked = true;
                        break;
                    }
                }
                proptest::prop_assert!(asked, "no progress on {:?}", String::from_utf8_lossy(&buf));
                let n = parser.consumed();
                proptest::prop_assert!(n <= buf.len());
                buf.drain(..n);
                parser.dropped(n);
                proptest::prop_assert!(buf.len() <= MAX_COMMAND + MAX_ARGS * (MAX_HEADER + 2) + 300);
            }
        }

        /// Well-formed commands, whatever their chunking, come out whole and in order.
        #[test]
        fn commands_survive_any_chunking(
            commands in proptest::collection::vec(
                proptest::collection::vec(proptest::collection::vec(proptest::num::u8::ANY, 0..40), 1..6),
                1..20,
            ),
            chunk in 1usize..64,
        ) {
            let mut input = Vec::new();
            for command in &commands {
                input.extend_from_slice(format!("*{}\r\n", command.len()).as_bytes());
                for arg in command {
                    input.extend_from_slice(format!("${}\r\n", arg.len()).as_bytes());
                    input.extend_from_slice(arg);
                    input.extend_from_slice(b"\r\n");
                }
            }
            let mut parser = Parser::default();
            let mut buf = Vec::new();
            let mut got: Vec<Vec<Vec<u8>>> = Vec::new();
            for piece in input.chunks(chunk) {
                buf.extend_from_slice(piece);
                loop {
                    match parser.next(&buf) {
                        Step::Command => got.push(parser.args().iter().map(|r| buf[r.clone()].to_vec()).collect()),
                        Step::Error(e) => proptest::prop_assert!(false, "{}", e),
                        Step::NeedMore => break,
                    }
                }
                let n = parser.consumed();
                buf.drain(..n);
                parser.dropped(n);
            }
            proptest::prop_assert_eq!(got, commands);
        }
    }
}
