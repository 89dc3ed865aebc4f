//! What a connection queues between `MULTI` and `EXEC`, bounded: at most [`MAX_QUEUED`]
//! commands and [`MAX_QUEUED_BYTES`] bytes (arguments and their bookkeeping), so a client that
//! never sends `EXEC` holds at most about 1 MiB, not a gigabyte.
//!
//! As in Redis, a command that cannot be queued (unknown, a wrong number of arguments, or here
//! one that would pass the bound) is answered with an error and spoils the transaction: the
//! commands queued so far are dropped at once (their memory with them), later ones are answered
//! `QUEUED` but not kept, and `EXEC` answers `-EXECABORT Transaction discarded because of
//! previous errors.` and ends the transaction.

/// The most commands one `MULTI` may queue.
pub(crate) const MAX_QUEUED: usize = 1024;
/// The most bytes one `MULTI` may queue, counted as [`cost`] counts them.
pub(crate) const MAX_QUEUED_BYTES: usize = 1 << 20;

/// `EXEC`'s answer to a spoiled transaction (Redis's words).
pub(crate) const EXECABORT: &str = "EXECABORT Transaction discarded because of previous errors.";

/// The commands of an open transaction.
#[derive(Debug, Default)]
pub(crate) struct Queue {
    commands: Vec<Vec<Vec<u8>>>,
    /// What `commands` holds, counted by [`cost`].
    bytes: usize,
    /// A command could not be queued: `EXEC` will refuse.
    spoiled: bool,
}

/// What queueing `args` takes: its bytes, and a vector header per argument and per command.
pub(crate) fn cost(args: &[&[u8]]) -> usize {
    let header = std::mem::size_of::<Vec<u8>>();
    args.iter().map(|a| a.len() + header).sum::<usize>() + header
}

impl Queue {
    /// Queues `args`, or says why not (the error to answer); an error spoils the transaction.
    pub(crate) fn push(&mut self, args: &[&[u8]]) -> Result<(), String> {
        if self.spoiled {
            return Ok(());
        }
        let cost = cost(args);
        let why = if self.commands.len() >= MAX_QUEUED {
            format!("ERR too many commands in one MULTI: at most {MAX_QUEUED}")
        } else if self.bytes + cost > MAX_QUEUED_BYTES {
            format!("ERR MULTI may queue at most {MAX_QUEUED_BYTES} bytes of commands")
        } else {
            self.bytes += cost;
            self.commands.push(args.iter().map(|a| a.to_vec()).collect());
            return Ok(());
        };
        self.spoil();
        Err(why)
    }

    /// Spoils the transaction: nothing queued is kept, and `EXEC` will refuse.
    pub(crate) fn spoil(&mut self) {
        self.spoiled = true;
        self.commands = Vec::new();
        self.bytes = 0;
    }

    /// The commands to run at `EXEC`, or `None` if the transaction is spoiled.
    pub(crate) fn into_commands(self) -> Option<Vec<Vec<Vec<u8>>>> {
        (!self.spoiled).then_some(self.commands)
    }

    /// Bytes held now, counted by [`cost`].
    #[cfg(test)]
    pub(crate) fn bytes(&self) -> usize {
        self.bytes
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_queue_past_its_bytes_is_spoiled_and_emptied() {
        let big = vec![b'x'; 300 * 1024];
        let mut q = Queue::default();
        let command: [&[u8]; 2] = [b"ECHO", &big];
        for _ in 0..3 {
            q.push(&command).unwrap();
        }
        let e = q.push(&command).unwrap_err();
        assert!(e.contains("1048576 bytes"), "{e}");
        assert_eq!(q.bytes(), 0);
        // Later commands are answered as queued, kept nowhere; EXEC refuses.
        q.push(&[b"PING"]).unwrap();
        assert_eq!(q.bytes(), 0);
        assert!(q.into_commands().is_none());
    }

    #[test]
    fn at_most_so_many_commands() {
        let mut q = Queue::default();
        for _ in 0..MAX_QUEUED {
            q.push(&[b"PING"]).unwrap();
        }
        assert!(q.push(&[b"PING"]).unwrap_err().contains("too many"));
        let mut ok = Queue::default();
        ok.push(&[b"PING"]).unwrap();
        assert_eq!(ok.into_commands().unwrap().len(), 1);
    }
}
